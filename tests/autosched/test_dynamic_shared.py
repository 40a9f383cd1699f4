"""Pipelined kernels past 48 KB of shared memory, without a GPU: the search offers the deeper
pipelines a device's opt-in (dynamic shared memory) has room for, the verifier allows the
opt-in to pipelined kernels only, the CUDA code carves the arrays out of one ``extern
__shared__`` buffer and names its size for the runtime, nvcc compiles it, and the runtime opts
the kernel in and passes the bytes at every launch (with a stand-in for pycuda)."""

import contextlib
import random

import numpy as np
import pytest

from autosched.hardware import GPU_DEFAULTS, HardwareParams
from autosched.kernel import gpu_limits
from autosched.search import state_utils as su
from autosched.search.annotate_gpu import (
    gpu_context,
    gpu_state_errors,
    pipeline_depth_choices,
    sample_state_gpu,
)
from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from codegen import cuda_shared
from codegen.cuda import build_cuda
from codegen.cuda_shared import SharedArray, shared_declarations
from runtime import cuda as runtime_cuda
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.passes.tensor_core import fragment_plan
from tensorir.passes.verify_gpu import kernels
from tests.autosched.tensor_core_helpers import (
    dense_tensors,
    first_states,
    gemm_reference,
    gpu_task,
    needs_nvcc,
    nvcc_ptx,
    random_args,
    sampled_states,
    shared_allocations,
)

STATIC = 48 * 1024
OPTIN = 227 * 1024  # an H100's
USABLE = OPTIN - 1024  # less the slack for aligning the arrays
H100_LIKE = HardwareParams(num_cores=1, max_shared_memory_per_block=STATIC,
                           max_shared_memory_per_block_optin=OPTIN)  # fmt: skip


def shared_bytes(prog) -> int:
    return sum(b.nbytes for b in shared_allocations(prog).values())


def tf32_dense(hw=H100_LIKE, m=128, n=128, k=512):
    tensors = dense_tensors(m, n, k, dtype="float32", out_dtype="float32")
    return gpu_task(tensors, "cuda -allow_tf32=1", hw)


def big_pipelined_state(task, seed=0):
    """A sampled pipelined state whose shared memory is past the static 48 KB."""
    params = SearchParams(gpu_tensor_core_pipeline=4)
    (sketch,) = generate_sketches(task, params=params)
    states = sampled_states(task, sketch, seed, tries=300, params=params)
    big = (s for s in states if shared_bytes(lower(s)) > STATIC)
    (s,) = first_states(big, 1, "sampled states past 48 KB of shared memory")
    return s


def test_the_suffix_is_spelled_the_same_by_the_code_and_the_runtime():
    assert cuda_shared.DYNAMIC_SHARED_SUFFIX == runtime_cuda.DYNAMIC_SHARED_SUFFIX
    assert cuda_shared.STATIC_SHARED_BYTES == runtime_cuda.STATIC_SHARED_LIMIT


def test_arrays_within_48k_stay_static_and_more_share_one_dynamic_buffer():
    small = [SharedArray("a", "half", 1024, 2, 32), SharedArray("b", "float", 100, 4)]
    body, before = shared_declarations(small, "k0")
    assert body == ["__shared__ __align__(32) half a[1024];", "__shared__ float b[100];"]
    assert before == []
    big = [SharedArray("a", "float", 10000, 4, 32), SharedArray("b", "float", 3000, 4, 16)]
    body, before = shared_declarations(big, "k0")
    # b starts at the first 128-byte boundary past a's 40000 bytes; the total is rounded too.
    assert body == [
        "extern __shared__ __align__(128) unsigned char autosched_dynamic_shared[];",
        "float* a = reinterpret_cast<float*>(autosched_dynamic_shared + 0);",
        "float* b = reinterpret_cast<float*>(autosched_dynamic_shared + 40064);",
    ]
    assert before == ['extern "C" { __device__ unsigned int k0__dynamic_shared_bytes = 52096; }']


def test_depths_past_48k_are_offered_only_with_an_optin():
    s = big_pipelined_state(tf32_dense())
    staged = shared_bytes(lower(su.single_buffered(s)))
    assert staged <= STATIC  # tiles are still drawn to fit the static limit once
    four = su.with_pipeline_stages(s, 4)
    assert shared_bytes(lower(four)) > STATIC
    params = SearchParams(gpu_tensor_core_pipeline=4)
    with_optin = tf32_dense()
    assert gpu_state_errors(with_optin, four) == []
    static_only = tf32_dense(HardwareParams(num_cores=1, max_shared_memory_per_block=STATIC))
    assert static_only.hardware_params.max_shared_memory_per_block_optin == STATIC
    errors = gpu_state_errors(static_only, four)
    assert errors and "max_shared_memory_per_block=49152" in errors[0], errors
    # The choices: every depth with the opt-in; only those within 48 KB without it.
    got = pipeline_depth_choices(gpu_context(with_optin, params), s, staged)
    assert got == [n for n in (2, 3, 4) if n * staged <= USABLE] and 4 in got
    got = pipeline_depth_choices(gpu_context(static_only, params), s, staged)
    assert got == [2] + [n for n in (3, 4) if n * staged <= STATIC]


def test_a_kernel_without_a_pipeline_keeps_the_static_limit():
    s = big_pipelined_state(tf32_dense())
    flat = su.single_buffered(s)
    # Its tiles, staged once, would fit the opt-in; four times over, 48 KB never.
    hw = HardwareParams(num_cores=1, max_shared_memory_per_block=shared_bytes(lower(flat)) - 4,
                        max_shared_memory_per_block_optin=OPTIN)  # fmt: skip
    task = tf32_dense(hw)
    errors = gpu_state_errors(task, flat)
    assert errors and "max_shared_memory_per_block=" in errors[0], errors
    assert gpu_state_errors(task, su.with_pipeline_stages(s, 2)) == []


def test_sampling_with_the_optin_draws_valid_states_past_48k():
    task = tf32_dense()
    params = SearchParams(gpu_tensor_core_pipeline=4)
    (sketch,) = generate_sketches(task, params=params)
    ctx, rng = gpu_context(task, params), random.Random(0)
    sizes = []
    for _ in range(40):
        s = sample_state_gpu(ctx, sketch, rng, task)
        if s is not None:
            assert gpu_state_errors(task, s) == []
            sizes.append(shared_bytes(lower(s)))
    assert max(sizes) > STATIC and max(sizes) <= USABLE


def test_a_dynamic_shared_kernel_computes_the_gemm_as_simt_code():
    task = tf32_dense(m=64, n=64, k=256)
    s = big_pipelined_state(task, seed=1)
    args = random_args(task.compute_dag, seed=3)
    out = np.zeros((64, 64), np.float32)
    run_program(lower(s), [*args, out], simt=True)
    np.testing.assert_allclose(out, gemm_reference(args), rtol=1e-4, atol=1e-4)


@needs_nvcc
def test_nvcc_compiles_the_dynamic_buffer_and_the_size_global(tmp_path):
    s = big_pipelined_state(tf32_dense())
    prog = lower(s)
    code = build_cuda(prog, arch="sm_90", allow_tf32=True).code
    (info,) = kernels(prog)
    assert "extern __shared__ __align__(128) unsigned char autosched_dynamic_shared[];" in code
    assert "__shared__ __align__" not in code.replace("extern __shared__ __align__(128)", "")
    name = f"{prog.name}_kernel{info.index}"
    (line,) = [x for x in code.splitlines() if "__dynamic_shared_bytes" in x]
    total = int(line.split("=")[1].split(";")[0])
    # The staged tiles and the fragment store tiles, each at a 128-byte boundary.
    want = shared_bytes(prog) + fragment_plan(info.stmt, info.extents)[0].staging_bytes
    assert total % 128 == 0 and want <= total < want + 128 * (len(shared_allocations(prog)) + 1)
    ptx = nvcc_ptx(code, "sm_90", tmp_path)
    assert f".u32 {name}__dynamic_shared_bytes = {total};" in ptx
    assert ".extern .shared .align 128 .b8 autosched_dynamic_shared[];" in ptx
    assert "cp.async.cg.shared.global" in ptx and "wmma.mma.sync" in ptx


def test_a_small_kernel_keeps_static_arrays():
    task = tf32_dense(m=32, n=32, k=64)
    params = SearchParams(gpu_tensor_core_pipeline=2)
    (sketch,) = generate_sketches(task, params=params)
    (s,) = first_states(sampled_states(task, sketch, 0, tries=50, params=params), 1)
    code = build_cuda(lower(s), arch="sm_90", allow_tf32=True).code
    assert "__shared__ __align__(32) float" in code and "dynamic_shared" not in code


def test_the_device_limits_give_an_optin_only_where_the_device_reports_one():
    class Dev:
        def __init__(self, **props):
            self.properties = props

    cuda = gpu_limits(Dev(max_shared_memory_per_block=STATIC,
                          max_shared_memory_per_block_optin=OPTIN))  # fmt: skip
    assert cuda["max_shared_memory_per_block_optin"] == OPTIN
    opencl = gpu_limits(Dev(max_shared_memory_per_block=32768))
    assert opencl["max_shared_memory_per_block_optin"] == 32768
    assert GPU_DEFAULTS["max_shared_memory_per_block_optin"] == STATIC  # none without a device
    # A shared-memory limit the user gives is not raised by the device's opt-in.
    hw = HardwareParams.for_target("cuda", HardwareParams(max_shared_memory_per_block=16384))
    assert hw.max_shared_memory_per_block_optin == 16384


# --- the runtime, with a stand-in for pycuda ---------------------------------------------------


class FakeCuda:
    """What CUDABackend._compile and launch call of pycuda.driver."""

    class Error(Exception):
        pass

    class LogicError(Error):
        pass

    class function_attribute:  # noqa: N801 - pycuda's name
        MAX_DYNAMIC_SHARED_SIZE_BYTES = "max-dynamic-shared"

    class Function:
        def __init__(self, name):
            self.name, self.attributes, self.calls = name, {}, []

        def set_attribute(self, attr, value):
            self.attributes[attr] = value

        def __call__(self, *args, **kwargs):
            self.calls.append(("call", args, kwargs))

        def prepare(self, fmt):
            self.calls.append(("prepare", fmt))

        def prepared_async_call(self, grid, block, stream, *args, **kwargs):
            self.calls.append(("prepared", args, kwargs))

    class Module:
        def __init__(self, globals_):
            self.globals, self.functions = globals_, {}

        def get_function(self, name):
            return self.functions.setdefault(name, FakeCuda.Function(name))

        def get_global(self, name):
            if name not in self.globals:
                raise FakeCuda.LogicError("cuModuleGetGlobal failed: named symbol not found")
            return name, 4

    def __init__(self, globals_):
        self.module = FakeCuda.Module(globals_)
        self.globals = globals_

    def module_from_buffer(self, binary):
        return self.module

    def memcpy_dtoh(self, dest, ptr):
        dest[...] = self.globals[ptr]


def fake_backend(globals_):
    backend = object.__new__(runtime_cuda.CUDABackend)
    backend._cuda, backend.arch = FakeCuda(globals_), "sm_90"
    backend._current = contextlib.nullcontext
    return backend


@pytest.mark.parametrize("launch", ["launch", "bind", "graph capture"])
def test_the_runtime_opts_in_and_every_launch_passes_the_bytes(launch):
    backend = fake_backend({"big__dynamic_shared_bytes": 110592})
    module = backend._compile("", ("big", "small"), b"cubin")
    big, small = (backend._cuda.module.functions[n] for n in ("big", "small"))
    assert big.attributes == {"max-dynamic-shared": 110592} and small.attributes == {}
    for name in ("big", "small"):
        if launch == "launch":
            backend.launch(module, name, (2, 1, 1), (128, 1, 1), [7])
        elif launch == "bind":
            backend.bind(module, name, (2, 1, 1), (128, 1, 1), [7])()
        else:  # cuda_graph calls the module's functions as pycuda functions, on a stream
            module.functions[name](7, grid=(2, 1, 1), block=(128, 1, 1), stream="s")
    *_, (_, _, big_kwargs) = big.calls
    *_, (_, _, small_kwargs) = small.calls
    key = "shared_size" if launch == "bind" else "shared"
    assert big_kwargs[key] == 110592 and key not in small_kwargs
