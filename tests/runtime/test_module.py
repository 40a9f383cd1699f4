"""runtime.load_module / Module / NDArray / Device on the CPU with hand-written LLVM IR."""

import numpy as np
import pytest

import runtime
from runtime.errors import CompileError

# c[i] = a[i] * 2 + b[i] for i < n, through a workspace w (w = a * 2; c = w + b).
SCALE_ADD = """
define i32 @scale_add(ptr noalias %a, ptr noalias %b, ptr noalias %c, ptr noalias %w) {
entry:
  br label %loop1
loop1:
  %i = phi i64 [0, %entry], [%i1, %loop1]
  %pa = getelementptr float, ptr %a, i64 %i
  %x = load float, ptr %pa
  %y = fmul float %x, 2.0
  %pw = getelementptr float, ptr %w, i64 %i
  store float %y, ptr %pw
  %i1 = add i64 %i, 1
  %d1 = icmp eq i64 %i1, 37
  br i1 %d1, label %loop2, label %loop1
loop2:
  %j = phi i64 [0, %loop1], [%j1, %loop2]
  %pw2 = getelementptr float, ptr %w, i64 %j
  %u = load float, ptr %pw2
  %pb = getelementptr float, ptr %b, i64 %j
  %v = load float, ptr %pb
  %s = fadd float %u, %v
  %pc = getelementptr float, ptr %c, i64 %j
  store float %s, ptr %pc
  %j1 = add i64 %j, 1
  %d2 = icmp eq i64 %j1, 37
  br i1 %d2, label %done, label %loop2
done:
  ret i32 0
}
"""
N = 37
PARAMS = (("a", "float32", N), ("b", "float32", N), ("c", "float32", N))
LAUNCHES = (("scale_add", ("a", "b", "c", "w"), (1, 1, 1), (1, 1, 1)),)


@pytest.fixture(scope="module")
def mod():
    return runtime.load_module(
        "llvm", SCALE_ADD, PARAMS, (("w", "float32", N),), LAUNCHES, runtime.device("cpu")
    )


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(N).astype("float32"), rng.standard_normal(N).astype("float32")


def test_numpy_arrays_in_place(mod):
    a, b = _inputs()
    c = np.zeros(N, "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a * 2 + b, rtol=1e-6)


def test_ndarrays_and_non_contiguous(mod):
    a, b = _inputs(1)
    dev = runtime.device("llvm")
    c = runtime.empty((N,), "float32", dev)
    mod(runtime.array(a, dev), runtime.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a * 2 + b, rtol=1e-6)
    # A strided output view is staged and copied back.
    big = np.zeros(2 * N, "float32")
    mod(a, b, big[::2])
    np.testing.assert_allclose(big[::2], a * 2 + b, rtol=1e-6)
    assert not big[1::2].any()


def test_argument_errors_name_the_param(mod):
    a, b = _inputs()
    with pytest.raises(TypeError, match="expects 3 arrays"):
        mod(a, b)
    with pytest.raises(TypeError, match="param 'b'.*float32.*float64"):
        mod(a, b.astype("float64"), np.zeros(N, "float32"))
    with pytest.raises(ValueError, match="param 'c'.*37 elements, got 36"):
        mod(a, b, np.zeros(N - 1, "float32"))
    with pytest.raises(TypeError, match="param 'a'.*list"):
        mod(list(a), b, np.zeros(N, "float32"))


def test_time_evaluator_positive(mod):
    a, b = _inputs()
    c = np.zeros(N, "float32")
    res = mod.time_evaluator(number=5, repeat=3, min_repeat_ms=1)(a, b, c)
    assert len(res.results) == 3 and all(t > 0 for t in res.results)
    assert min(res.results) <= res.median <= max(res.results)
    np.testing.assert_allclose(c, a * 2 + b, rtol=1e-6)


def test_compile_error_carries_llvm_log():
    bad = "define i32 @f(ptr %a) {\n  %x = fadd float %a, 1.0\n  ret i32 0\n}\n"
    with pytest.raises(CompileError) as info:
        launches = (("f", ("a",), (1,) * 3, (1,) * 3),)
        runtime.load_module("llvm", bad, (("a", "float32", 1),), (), launches)
    assert "LLVM" in str(info.value) and info.value.log


def test_missing_kernel_and_wrong_device():
    with pytest.raises(CompileError, match="'nope' is not defined"):
        runtime.load_module("llvm", SCALE_ADD, PARAMS, (("w", "float32", N),),
                            (("nope", ("a",), (1,) * 3, (1,) * 3),))  # fmt: skip
    with pytest.raises(ValueError, match="runs on a cpu device"):
        runtime.load_module("llvm", SCALE_ADD, PARAMS, (), LAUNCHES, device="opencl")
    with pytest.raises(ValueError, match="unknown buffers"):
        runtime.load_module("llvm", SCALE_ADD, PARAMS, (), LAUNCHES)


def test_device_and_ndarray_basics():
    dev = runtime.device("cpu")
    assert dev == runtime.device("llvm") and dev.kind == "cpu" and dev.exists
    props = dev.properties
    assert props["num_cores"] >= 1 and props["max_vthread_extent"] == 8
    with pytest.raises(ValueError, match="unknown device kind"):
        runtime.device("tpu")
    x = np.random.default_rng(2).integers(-100, 100, (3, 5)).astype("int8")
    arr = runtime.array(x, dev)
    assert arr.shape == (3, 5) and arr.dtype == "int8" and arr.handle.ctypes.data % 64 == 0
    np.testing.assert_array_equal(arr.numpy(), x)
    np.testing.assert_array_equal(np.from_dlpack(arr), x)
    with pytest.raises(ValueError, match="15 elements"):
        arr.copyfrom(np.zeros(4, "int8"))


def test_missing_gpu_reports_not_raises():
    dev = runtime.device("cuda")
    if dev.exists:
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match="not available"):
        _ = dev.properties


TWO_KERNELS = """
define i32 @inc(ptr %x) {
  %v = load float, ptr %x
  %w = fadd float %v, 1.0
  store float %w, ptr %x
  ret i32 0
}
define i32 @dbl(ptr %x) {
  %v = load float, ptr %x
  %w = fmul float %v, 2.0
  store float %w, ptr %x
  ret i32 0
}
"""


def test_launches_run_in_order_also_when_timed():
    one = (1, 1, 1)
    launches = (("inc", ("x",), one, one), ("dbl", ("x",), one, one))
    mod = runtime.load_module("llvm", TWO_KERNELS, (("x", "float32", 1),), (), launches)
    x = np.array([1.5], "float32")
    mod(x)
    assert x[0] == (1.5 + 1) * 2  # inc then dbl
    x[0] = 0.25
    res = mod.time_evaluator(number=2, repeat=2)(x)
    assert all(t > 0 for t in res.results)
    v = 0.25
    for _ in range(1 + 2 * 2):  # warm-up + number * repeat runs, each inc then dbl
        v = (v + 1) * 2
    assert x[0] == np.float32(v)
