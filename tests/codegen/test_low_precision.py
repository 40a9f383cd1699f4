"""float16 / bfloat16 kernels: LLVM on the CPU against a float32 numpy reference with the dtype's
tolerance, CUDA compiled by nvcc (skipped without it), OpenCL half (run where the device has
cl_khr_fp16; PoCL on the CPU has not)."""

from __future__ import annotations

import random
import shutil
import subprocess

import numpy as np
import pytest

import autosched as ansor
from autosched import te
from autosched.kernel import generate_source
from autosched.search.annotate import sample_init_population
from autosched.search.sketch import generate_sketches
from autosched.task import SearchTask
from tensorir.dtype import (
    bfloat16_bits_to_float32,
    float32_to_bfloat16_bits,
    promote,
    to_numpy,
    tolerance,
)
from tensorir.ops.dense import batch_matmul, dense

RNG = np.random.default_rng(28)
LOWP = ["float16", "bfloat16"]


def rand(shape, dtype):
    """Random normal values, rounded to ``dtype``, and their exact float32 values."""
    x = RNG.normal(size=shape).astype(np.float32).astype(to_numpy(dtype))
    return x, x.astype(np.float32)


def test_tolerance_per_dtype():
    assert tolerance("float16") < tolerance("bfloat16")
    assert tolerance("float32") < tolerance("float16")
    assert tolerance("int8") == (0.0, 0.0)
    with pytest.raises(ValueError, match="unsupported dtype 'half'"):
        tolerance("half")
    assert promote("float16", "bfloat16") == "float32"
    assert promote("bfloat16", "float32") == "float32"


def test_bfloat16_bits_round_to_nearest_even_like_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.concatenate([RNG.normal(size=500) * 10.0 ** RNG.integers(-8, 8, 500), [np.nan, 0.0]])
    x = x.astype(np.float32)
    bits = float32_to_bfloat16_bits(x)
    want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(bits[:-2], want[:-2])
    back = bfloat16_bits_to_float32(bits)
    assert np.isnan(back[-2]) and back[-1] == 0.0
    np.testing.assert_allclose(back[:-2], x[:-2], rtol=2**-8)


@pytest.mark.parametrize("dtype", LOWP)
@pytest.mark.parametrize("acc", ["same", "float32"])
def test_dense_relu_on_llvm_matches_float32_reference(dtype, acc):
    out_dtype = dtype if acc == "same" else "float32"
    A = te.placeholder((5, 48), name="A", dtype=dtype)
    B = te.placeholder((12, 48), name="B", dtype=dtype)
    C = dense(A, B, out_dtype=out_dtype)
    D = te.compute(C.shape, lambda i, j: te.max(C[i, j] * 0.5, 0.0), name="relu")
    f = ansor.build(ansor.ComputeDAG([A, B, D]).get_init_state(), "llvm")
    (a, a32), (b, b32) = rand((5, 48), dtype), rand((12, 48), dtype)
    d = np.zeros((5, 12), to_numpy(out_dtype))
    f(a, b, d)
    ref = np.maximum(a32 @ b32.T * 0.5, 0)
    rtol, atol = tolerance(dtype)
    # Accumulating in 16 bits rounds every partial sum: a tolerance scaled by the sum's length.
    scale = 1.0 if acc == "float32" else np.sqrt(48)
    np.testing.assert_allclose(d.astype(np.float32), ref, rtol=rtol * scale, atol=atol * scale)
    if acc == "float32":  # fp32 accumulation of exact products: float32 accuracy
        np.testing.assert_allclose(d, ref, *tolerance("float32"))


@pytest.mark.parametrize("dtype", LOWP)
def test_vectorized_elementwise_math(dtype):
    """A vectorized loop of loads, math, casts and stores in the 16-bit type."""
    n = 70
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.placeholder((n,), name="B", dtype=dtype)
    C = te.compute((n,), lambda i: te.exp(A[i]) * B[i] - te.tanh(B[i]) + 0.25, name="C")
    s = ansor.ComputeDAG([A, B, C]).get_init_state()
    _, inner = s.split("C", s["C"].iters[0], [8])
    s.vectorize("C", inner)
    f = ansor.build(s, "llvm")
    (a, a32), (b, b32) = rand((n,), dtype), rand((n,), dtype)
    c = np.zeros(n, to_numpy(dtype))
    f(a, b, c)
    ref = np.exp(a32) * b32 - np.tanh(b32) + 0.25
    np.testing.assert_allclose(c.astype(np.float32), ref, *tolerance(dtype))


def _relu_cast(c, dtype):
    return te.compute(c.shape, lambda i, j: te.max(c[i, j], 0.0).astype(dtype), name="out")


def _sampled_sources(dag_tensors, name, n=4):
    hw = ansor.HardwareParams(num_cores=16, max_threads_per_block=1024, warp_size=32)
    task = SearchTask(ansor.ComputeDAG(dag_tensors), target="cuda", hardware_params=hw)
    states = sample_init_population(task, generate_sketches(task), n, random.Random(5))
    return [generate_source(s, "cuda", name=f"{name}_{k}").code for k, s in enumerate(states)]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_low_precision_dense_and_batch_matmul_compile_with_nvcc(tmp_path):
    parts = []
    for dtype in LOWP:
        A = te.placeholder((16, 64), name="A", dtype=dtype)
        B = te.placeholder((32, 64), name="B", dtype=dtype)
        C = dense(A, B, out_dtype="float32")  # what to_mixed_precision emits
        parts += _sampled_sources([A, B, _relu_cast(C, dtype)], f"dense_{dtype}")
        X = te.placeholder((2, 8, 32), name="X", dtype=dtype)
        Y = te.placeholder((2, 16, 32), name="Y", dtype=dtype)
        parts += _sampled_sources([X, Y, batch_matmul(X, Y)], f"bmm_{dtype}", n=2)
    code = "\n".join(parts)
    assert "#include <cuda_fp16.h>" in code and "#include <cuda_bf16.h>" in code
    assert "__nv_bfloat16" in code and "__bfloat162float" in code and "half" in code
    src = tmp_path / "lowp.cu"
    src.write_text(code)
    proc = subprocess.run(
        ["nvcc", "--cubin", "-arch=sm_90", "-o", str(tmp_path / "lowp.cubin"), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_opencl_half_source_and_run_where_supported():
    from codegen.target import Target

    A = te.placeholder((64,), name="A", dtype="float16")
    B = te.compute((64,), lambda i: te.sqrt(A[i] * A[i] + 1.0), name="B")
    s = ansor.ComputeDAG([A, B]).get_init_state()
    bx, tx = s.split("B", s["B"].iters[0], [16])
    s.bind("B", bx, "blockIdx.x")
    s.bind("B", tx, "threadIdx.x")
    code = generate_source(s, Target("opencl")).code
    assert "#pragma OPENCL EXTENSION cl_khr_fp16 : enable" in code and "half" in code
    with pytest.raises(ValueError, match="opencl code has no bfloat16 type"):
        C = te.placeholder((64,), name="C", dtype="bfloat16")
        D = te.compute((64,), lambda i: C[i] + C[i], name="D")
        s2 = ansor.ComputeDAG([C, D]).get_init_state()
        bx, tx = s2.split("D", s2["D"].iters[0], [16])
        s2.bind("D", bx, "blockIdx.x")
        s2.bind("D", tx, "threadIdx.x")
        generate_source(s2, Target("opencl"))
    cl = pytest.importorskip("pyopencl")
    devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    if not any("cl_khr_fp16" in d.extensions for d in devices):
        pytest.skip("no OpenCL device with cl_khr_fp16 (PoCL on the CPU has none)")
    f = ansor.build(s, "opencl")
    a, a32 = rand((64,), "float16")
    b = np.zeros(64, np.float16)
    f(a, b)
    np.testing.assert_allclose(b.astype(np.float32), np.sqrt(a32 * a32 + 1), *tolerance("float16"))


def test_tf32_is_an_explicit_cuda_option_carried_to_the_tasks():
    """allow_tf32 is parsed, off by default and reaches every task's target, where the tensor-core
    sketch rule reads it (tests/autosched/test_tensor_core_tf32.py); a kernel without tensor-core
    nests is the same with and without it (docs/gpu.md)."""
    from codegen.target import Target
    from tensorir.graph import ir as gir
    from tensorir.graph import nn, op

    assert Target("cuda").allow_tf32 is False
    assert Target("cuda -allow_tf32=1").allow_tf32 is True
    assert Target("cuda -allow_tf32=0").allow_tf32 is False
    assert Target("cuda").with_options(allow_tf32="1").allow_tf32 is True
    with pytest.raises(ValueError, match="-allow_tf32 is an option of cuda targets"):
        Target("llvm -allow_tf32=1")
    with pytest.raises(ValueError, match="-allow_tf32=yes; write -allow_tf32=1 or =0"):
        Target("cuda -allow_tf32=yes")
    data = op.var("data", (1, 16))
    w = op.const(RNG.normal(size=(8, 16)).astype("float32"))
    func = gir.Function((data,), nn.relu(nn.dense(data, w)))
    hw = ansor.HardwareParams(num_cores=16, max_threads_per_block=1024, warp_size=32)
    tasks, _ = ansor.extract_tasks(func, None, "cuda -allow_tf32=1", hardware_params=hw)
    assert tasks and all(t.target.allow_tf32 for t in tasks)
    tasks, _ = ansor.extract_tasks(func, None, "cuda", hardware_params=hw)
    assert not any(t.target.allow_tf32 for t in tasks)
    # A batch-1 dense (M = 1) fills no fragment: the same scalar kernel with and without it.
    state = sample_init_population(tasks[0], generate_sketches(tasks[0]), 1, random.Random(3))[0]
    plain = generate_source(state, "cuda").code
    assert generate_source(state, "cuda -allow_tf32=1").code == plain


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("dtype", LOWP)
def test_mixed_precision_network_kernels_compile_with_nvcc(tmp_path, dtype):
    """Every fused group of a to_mixed_precision network (conv + cast + bias + relu in 16 bits,
    softmax in float32, the casts between) as the untuned CUDA build generates it."""
    from autosched.network.default_schedules import default_gpu_state
    from autosched.network.partition import partition
    from tensorir.graph import ir as gir
    from tensorir.graph import nn, op

    rng = np.random.default_rng(2)
    data = op.var("data", (1, 8, 8, 8))
    w = op.const(rng.normal(0, 0.2, (3, 3, 8, 16)).astype("float32"))
    b = op.const(rng.normal(0, 0.2, (16,)).astype("float32"))
    x = nn.relu(nn.bias_add(nn.conv2d(data, w, padding=1, data_layout="NHWC", kernel_layout="HWIO"),
                            b, axis=3))  # fmt: skip
    wd = op.const(rng.normal(0, 0.2, (10, 16)).astype("float32"))
    out = nn.softmax(nn.dense(nn.batch_flatten(nn.global_avg_pool2d(x, layout="NHWC")), wd))
    mixed = ansor.to_mixed_precision(gir.Function((data,), out), dtype)
    _, groups = partition(mixed, None, "cuda")
    codes = []
    for k, gd in enumerate(groups):
        state = default_gpu_state(gd.dag, 256, 32, lambda s: None)
        codes.append(generate_source(state, "cuda", name=f"g{k}_{gd.name}").code)
    code = "\n".join(codes)
    ctype = "half" if dtype == "float16" else "__nv_bfloat16"
    assert any("conv2d" in gd.name and "cast" in gd.name for gd in groups)
    assert f"{ctype}* __restrict__" in code
    src = tmp_path / "net.cu"
    src.write_text(code)
    proc = subprocess.run(
        ["nvcc", "--cubin", "-arch=sm_90", "-o", str(tmp_path / "net.cubin"), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_a_build_without_tf32_never_takes_a_record_tuned_with_it():
    from autosched.measure.dispatch import ApplyHistoryBest
    from autosched.network.build import _candidates
    from codegen.target import Target

    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    dag = ansor.ComputeDAG([A, B])
    hw = ansor.HardwareParams(num_cores=16, max_threads_per_block=1024, warp_size=32)

    def record(target, cost):
        task = ansor.SearchTask(dag, target=target, hardware_params=hw)
        return ansor.MeasureInput(task, dag.get_init_state()), ansor.MeasureResult((cost,))

    ctx = ApplyHistoryBest([record("cuda -arch=sm_90 -allow_tf32=1", 1e-5)])
    key = dag.workload_key
    assert _candidates(ctx, key, Target("cuda")) == []
    assert len(_candidates(ctx, key, Target("cuda -allow_tf32=1"))) == 1
    ctx = ApplyHistoryBest([record("cuda -arch=sm_90", 2e-5)])  # float32 serves a TF32 build
    assert len(_candidates(ctx, key, Target("cuda -allow_tf32=1"))) == 1
