"""Every built-in AutoTVM template builds correct kernels: llvm in-process, the GPU templates
on OpenCL (PoCL in CI; CUDA in tests/gpu), fp32 and int8 (int32 accumulation, bit-exact)."""

import numpy as np
import pytest

import autosched as ansor
from autosched import autotvm
from tensorir.interp import eval_dag
from tensorir.passes.verify_gpu import GPUVerifyError


def _t(shape, dtype):
    return ("TENSOR", shape, dtype)


def _conv(layout, dtype, out_dtype, depthwise=False):
    data = (1, 8, 9, 9) if layout == "nchw" else (1, 9, 9, 8)
    if depthwise:
        kernel = (8, 1, 3, 3)
    else:
        kernel = (16, 8, 3, 3) if layout == "nchw" else (3, 3, 8, 16)
    return (_t(data, dtype), _t(kernel, dtype), (1, 1), (1, 1, 1, 1), (1, 1), out_dtype)


WORKLOADS = {
    "conv2d_nchw": lambda dt, odt: _conv("nchw", dt, odt),
    "conv2d_nhwc": lambda dt, odt: _conv("nhwc", dt, odt),
    "depthwise_conv2d_nchw": lambda dt, odt: _conv("nchw", dt, odt, depthwise=True),
    "dense": lambda dt, odt: (_t((4, 24), dt), _t((16, 24), dt), odt),
}
DTYPES = [("float32", "float32"), ("int8", "int32")]


def _inputs(tensors, rng):
    out = []
    for t in tensors:
        if t.dtype == "int8":
            out.append(rng.integers(-128, 128, t.shape).astype("int8"))
        else:
            out.append(rng.uniform(-1, 1, t.shape).astype(t.dtype))
    return out


def _check_some_configs(name, args, target, n_configs, seed):
    task = autotvm.task.create(name, args, target)
    rng = np.random.default_rng(seed)
    checked = 0
    for index in rng.permutation(len(task.config_space))[:40]:
        state, tensors = task.instantiate(task.config_space.get(int(index)))
        try:
            func = ansor.build(state, target)
        except GPUVerifyError:  # too many threads / vthreads for the device: not this config
            continue
        args_np = _inputs(tensors[:-1], rng)
        out = np.zeros(tensors[-1].shape, tensors[-1].dtype)
        func(*args_np, out)
        ref = eval_dag(state.dag, args_np)[0]
        if out.dtype.kind == "i":
            np.testing.assert_array_equal(out, ref)
        else:
            np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
        checked += 1
        if checked == n_configs:
            return
    pytest.fail(f"{name}: only {checked} of 40 configurations built for {target}")


@pytest.mark.parametrize("dtype,out_dtype", DTYPES)
@pytest.mark.parametrize("op", list(WORKLOADS))
def test_cpu_templates(op, dtype, out_dtype):
    _check_some_configs(f"{op}.x86", WORKLOADS[op](dtype, out_dtype), "llvm", 1, seed=len(op))


# fp32 for every op and int8 for conv2d in the default run; the other int8 ones are slow.
GPU_CASES = (
    [(op, "float32", "float32") for op in WORKLOADS]
    + [("conv2d_nchw", "int8", "int32")]
    + [pytest.param(op, "int8", "int32", marks=pytest.mark.slow) for op in list(WORKLOADS)[1:]]
)


@pytest.fixture(scope="module")
def opencl():
    pytest.importorskip("pyopencl")
    try:
        if not ansor.device("opencl", 0).exists:
            pytest.skip("no OpenCL device")
    except Exception as err:  # noqa: BLE001 - a missing ICD loader or platform
        pytest.skip(f"no OpenCL device: {err}")


@pytest.mark.parametrize("op,dtype,out_dtype", GPU_CASES)
def test_gpu_templates_on_opencl(opencl, op, dtype, out_dtype):
    _check_some_configs(f"{op}.cuda", WORKLOADS[op](dtype, out_dtype), "opencl", 1, seed=len(op))


def test_gpu_template_space_printing():
    task = autotvm.task.create("conv2d_nchw.cuda", WORKLOADS["conv2d_nchw"]("float32", "float32"),
                               "cuda")  # fmt: skip
    assert list(task.config_space.space_map) == [
        "tile_f", "tile_y", "tile_x", "tile_rc", "tile_ry", "tile_rx", "auto_unroll_max_step",
    ]  # fmt: skip
    lines = str(task.config_space).splitlines()
    assert lines[1].startswith("   0 tile_f: Split(policy=factors, product=16, num_outputs=4) len=")
    assert lines[-2] == "   6 auto_unroll_max_step: OtherOption([0, 512, 1500]) len=3"


@pytest.mark.parametrize("op", ["conv2d_nchw", "dense"])
def test_gpu_fallback_config_fits_and_is_correct(opencl, op):
    """Without a record the GPU templates take a fallback that fits any GPU (no vthreads,
    small thread tiles), not the first entity of every knob."""
    from autosched.autotvm.template import TEMPLATES

    name = f"{op}.cuda"
    args = WORKLOADS[op]("float32", "float32")
    wrapper = autotvm.template(name)(TEMPLATES[name])
    with ansor.Target("opencl"), pytest.warns(UserWarning, match="fallback"):
        state, tensors = wrapper(*args)
    rng = np.random.default_rng(3)
    inputs = _inputs(tensors[:-1], rng)
    out = np.zeros(tensors[-1].shape, "float32")
    ansor.build(state, "opencl")(*inputs, out)
    np.testing.assert_allclose(out, eval_dag(state.dag, inputs)[0], rtol=1e-4, atol=1e-4)
    threads = [it for st in state.stages for it in st.iters if it.annotation == "threadIdx.x"]
    assert threads and all(1 < it.extent <= 8**3 for it in threads if it.extent)
