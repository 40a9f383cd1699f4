"""te.saturate_cast (clamp to the target range, then cast) through the whole stack, bit-exact.

A plain cast wraps (300 -> int8 is 44); quantized kernels need the clamp. Checked on the
interpreter, the loop interpreter, LLVM (serial and vectorized) and OpenCL (PoCL) against
numpy's ``np.clip(...).astype(...)`` on random values far outside the target range.
"""

import numpy as np
import pytest

import runtime
from codegen.llvm import build_llvm
from codegen.opencl import build_opencl
from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.interp import eval_dag
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.schedule import State

N = 64
# (source dtype, target dtype)
PAIRS = [
    ("int32", "int8"),
    ("int32", "uint8"),
    ("int8", "uint8"),
    ("uint8", "int8"),
    ("float32", "int8"),
    ("float32", "int32"),
]


def dag(src: str, dst: str):
    a = te.placeholder((N,), src, name="A")
    c = te.compute((N,), lambda i: te.saturate_cast(dst, a[i]), name="C")
    return ComputeDAG([a, c])


def data(src: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if src == "float32":
        x = rng.normal(0, 1, N) * np.float32(2.0 ** rng.integers(0, 34, N))
        return x.astype("float32")
    info = np.iinfo(src)
    return rng.integers(info.min, info.max, N, endpoint=True).astype(src)


def reference(x: np.ndarray, dst: str) -> np.ndarray:
    info = np.iinfo(dst)
    if x.dtype.kind == "f":
        # The largest float32 below 2**31 (int32's max is no float32).
        hi = np.nextafter(np.float32(info.max), np.float32(0)) if info.bits == 32 else info.max
        return np.clip(x, info.min, hi).astype(dst)
    return np.clip(x.astype(np.int64), info.min, info.max).astype(dst)


@pytest.mark.parametrize("src,dst", PAIRS)
def test_interpreters_match_numpy(src, dst):
    x = data(src, 1)
    want = reference(x, dst)
    lo, hi = np.iinfo(dst).min, np.iinfo(dst).max
    assert (x.astype(np.float64) > hi).any() or (x.astype(np.float64) < lo).any()
    (got,) = eval_dag(dag(src, dst), [x])
    np.testing.assert_array_equal(got, want)
    out = np.zeros(N, dst)
    run_program(lower(dag(src, dst)), [x, out])
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("src,dst", PAIRS)
@pytest.mark.parametrize("vectorize", [False, True])
def test_llvm_matches_numpy(src, dst, vectorize):
    state = State(dag(src, dst))
    if vectorize:
        _, inner = state.split("C", state["C"].iters[0], [16])
        state.vectorize("C", inner)
    src_code = build_llvm(lower(state))
    x = data(src, 2)
    out = np.zeros(N, dst)
    runtime.load_module(**src_code.as_dict(), device=runtime.device("cpu"))(x, out)
    np.testing.assert_array_equal(out, reference(x, dst))


@pytest.mark.parametrize("src,dst", PAIRS)
def test_opencl_matches_numpy(src, dst):
    dev = runtime.device("opencl")
    if not dev.exist:
        pytest.skip("no OpenCL device")
    state = State(dag(src, dst))
    outer, inner = state.split("C", state["C"].iters[0], [16])
    state.bind("C", outer, "blockIdx.x")
    state.bind("C", inner, "threadIdx.x")
    x = data(src, 3)
    out = np.zeros(N, dst)
    runtime.load_module(**build_opencl(lower(state)).as_dict(), device=dev)(x, out)
    np.testing.assert_array_equal(out, reference(x, dst))


def test_plain_cast_wraps_and_saturate_cast_clamps():
    a = te.placeholder((2,), "int32", name="A")
    wrap = te.compute((2,), lambda i: a[i].astype("int8"), name="W")
    sat = te.compute((2,), lambda i: te.saturate_cast("int8", a[i]), name="S")
    got_wrap, got_sat = eval_dag(ComputeDAG([a, wrap, sat]), [np.array([300, -300], "int32")])
    np.testing.assert_array_equal(got_wrap, [44, -44])
    np.testing.assert_array_equal(got_sat, [127, -128])


def test_float_target_is_refused():
    a = te.placeholder((2,), "int32", name="A")
    with pytest.raises(TypeError, match="saturate_cast: target dtype must be an integer"):
        te.saturate_cast("float32", a[0])
