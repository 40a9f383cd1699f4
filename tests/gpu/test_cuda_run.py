"""CUDA: generated kernels run on the GPU through CUDABackend and load_module, vs numpy."""

import numpy as np
import pytest

from codegen.cuda import build_cuda
from tensorir.passes.verify_gpu import gpu_program_errors

from .programs import (
    add_case,
    all_cases,
    check_outputs,
    lowered_cases,
    param_arrays,
    run_on_backend,
)


@pytest.mark.parametrize("case", all_cases() + lowered_cases(), ids=lambda c: c.name)
def test_runs_like_numpy(cuda_backend, case):
    src = build_cuda(case.program).as_dict()
    inputs = case.inputs(np.random.default_rng(11))
    check_outputs(case, run_on_backend(cuda_backend, src, inputs), inputs)


def test_properties_fit_the_verifier(cuda_backend):
    p = cuda_backend.properties()
    assert p["warp_size"] == 32 and p["max_threads_per_block"] >= 1024
    assert p["max_shared_memory_per_block"] >= 48 * 1024
    assert p["multi_processor_count"] > 0 and p["compute_version"][0].isdigit()
    for case in all_cases():
        assert gpu_program_errors(case.program, p) == []


@pytest.mark.parametrize("case", all_cases()[3:5], ids=lambda c: c.name)
def test_through_load_module(case):
    from runtime import device, load_module

    src = build_cuda(case.program).as_dict()
    mod = load_module(**src, device=device("cuda"))
    inputs = case.inputs(np.random.default_rng(5))
    arrays = param_arrays(src["params"], inputs)
    mod(*arrays)
    got = {p[0]: a for a, p in zip(arrays, src["params"]) if p[0] not in inputs}
    check_outputs(case, got, inputs)
    t = mod.time_evaluator(number=5, repeat=2)(*arrays)
    assert 0 < t.mean < 0.1


def test_compile_error_carries_nvcc_log(cuda_backend):
    from runtime.errors import CompileError

    with pytest.raises(CompileError) as info:
        cuda_backend.compile('extern "C" __global__ void k(float* a) { a[0] = nope; }', ("k",))
    assert "nope" in info.value.log


def test_time_launches_uses_events(cuda_backend):
    src = build_cuda(add_case(1 << 20, 256).program).as_dict()
    compiled = cuda_backend.compile(src["code"], ("add_kernel0",))
    bufs = [cuda_backend.alloc(4 << 20) for _ in range(3)]
    _, _, grid, block = src["launches"][0]
    t = cuda_backend.time_launches(
        lambda: cuda_backend.launch(compiled, "add_kernel0", grid, block, bufs), 10
    )
    assert 1e-7 < t < 1e-2  # 12 MB moved: microseconds on any recent GPU


def test_worker_threads_compile_main_thread_runs(cuda_backend):
    # The tuner's pattern: nvcc runs in a thread pool (each thread gets the context for the call
    # and gives it back; pycuda aborts at exit if one is left pushed), launches on the main
    # thread, which also drops the modules (pycuda cannot free them from another thread).
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    cases = [add_case(256 * (i + 1), 128) for i in range(4)]
    srcs = [build_cuda(c.program).as_dict() for c in cases]
    with ThreadPoolExecutor(4) as pool:
        compiled = list(pool.map(lambda s: cuda_backend.compile(s["code"], ("add_kernel0",)), srcs))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "out-of-thread context could not be cleaned up"
        for case, src, mod in zip(cases, srcs, compiled):
            inputs = case.inputs(np.random.default_rng(0))
            n = case.program.params[0].size
            h = [cuda_backend.alloc(4 * n) for _ in range(3)]
            cuda_backend.copy_to_device(h[0], inputs["A"])
            cuda_backend.copy_to_device(h[1], inputs["B"])
            _, _, grid, block = src["launches"][0]
            cuda_backend.launch(mod, "add_kernel0", grid, block, h)
            out = np.empty(n, np.float32)
            cuda_backend.copy_to_host(h[2], out)
            check_outputs(case, {"C": out}, inputs)
        del compiled, mod, h
