"""te shift and bitwise operators (quantized workloads) through the whole stack, bit-exact.

``>>``, ``<<``, ``&``, ``|``, ``^``, ``~`` and TVM's ``te.right_shift`` etc. on int8 / uint8 /
int32: the interpreter, the loop interpreter, LLVM (serial and vectorized) and OpenCL (PoCL)
against numpy on random inputs, shift amounts in [0, bits).
"""

import numpy as np
import pytest

import runtime
from codegen.llvm import build_llvm
from codegen.opencl import build_opencl
from tensorir import te
from tensorir.arith import simplify_expr
from tensorir.dag import ComputeDAG
from tensorir.expr import Binary, Var
from tensorir.interp import eval_dag
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.schedule import State

N = 64
DTYPES = ("int8", "uint8", "int32")


def bit_dag(dtype: str):
    """C = ((A >> S) ^ (A << 3)) | (~A & B), and D = te.right_shift(A, S) etc."""
    a, b, s = (te.placeholder((N,), dtype, name=x) for x in "ABS")
    c = te.compute((N,), lambda i: ((a[i] >> s[i]) ^ (a[i] << 3)) | (~a[i] & b[i]), name="C")
    d = te.compute(
        (N,),
        lambda i: te.bitwise_xor(
            te.bitwise_or(te.right_shift(a[i], 1), te.left_shift(b[i], s[i])),
            te.bitwise_and(te.bitwise_not(b[i]), a[i]),
        ),
        name="D",
    )
    return ComputeDAG([a, b, s, c, d])


def inputs(dtype: str, seed: int):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, N, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, N, endpoint=True).astype(dtype)
    s = rng.integers(0, info.bits, N).astype(dtype)  # shift amounts in range
    return a, b, s


def reference(a, b, s):
    three, one = a.dtype.type(3), a.dtype.type(1)
    c = ((a >> s) ^ (a << three)) | (~a & b)
    d = ((a >> one) | (b << s)) ^ (~b & a)
    return c, d


def run_module(src, device, a, b, s):
    mod = runtime.load_module(**src.as_dict(), device=device)
    c, d = np.zeros_like(a), np.zeros_like(a)
    mod(a, b, s, c, d)
    return c, d


@pytest.mark.parametrize("dtype", DTYPES)
def test_interpreter_matches_numpy(dtype):
    a, b, s = inputs(dtype, 1)
    got = eval_dag(bit_dag(dtype), [a, b, s])
    for g, want in zip(got, reference(a, b, s)):
        assert g.dtype == want.dtype
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_loop_interpreter_matches_numpy(dtype):
    a, b, s = inputs(dtype, 2)
    c, d = np.zeros_like(a), np.zeros_like(a)
    run_program(lower(bit_dag(dtype)), [a, b, s, c, d])
    for g, want in zip((c, d), reference(a, b, s)):
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vectorize", [False, True])
def test_llvm_matches_numpy(dtype, vectorize):
    dag = bit_dag(dtype)
    state = State(dag)
    if vectorize:
        for name in ("C", "D"):
            _, inner = state.split(name, state[name].iters[0], [16])
            state.vectorize(name, inner)
    src = build_llvm(lower(state))
    # Signed >> is arithmetic (ashr), unsigned >> logical (lshr).
    assert ("lshr" if dtype.startswith("u") else "ashr") in src.code
    a, b, s = inputs(dtype, 3)
    got = run_module(src, runtime.device("cpu"), a, b, s)
    for g, want in zip(got, reference(a, b, s)):
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_opencl_matches_numpy(dtype):
    dev = runtime.device("opencl")
    if not dev.exist:
        pytest.skip("no OpenCL device")
    dag = bit_dag(dtype)
    state = State(dag)
    for name in ("C", "D"):
        outer, inner = state.split(name, state[name].iters[0], [16])
        state.bind(name, outer, "blockIdx.x")
        state.bind(name, inner, "threadIdx.x")
    a, b, s = inputs(dtype, 4)
    got = run_module(build_opencl(lower(state)), dev, a, b, s)
    for g, want in zip(got, reference(a, b, s)):
        np.testing.assert_array_equal(g, want)


def test_printed_dag_shows_the_operators():
    text = str(bit_dag("int32"))
    assert "(A[i] >> S[i])" in text and "(A[i] << 3)" in text
    assert " & " in text and " | " in text and " ^ " in text


def test_float_operands_are_refused():
    x = te.placeholder((4,), "float32", name="X")
    k = te.placeholder((4,), "int32", name="K")
    with pytest.raises(TypeError, match=r"right_shift \(>>\) takes integer operands"):
        te.compute((4,), lambda i: x[i] >> 1)
    with pytest.raises(TypeError, match=r"bitwise_and \(&\) takes integer operands"):
        te.compute((4,), lambda i: k[i] & x[i])
    with pytest.raises(TypeError, match=r"bitwise_not \(~\) takes an integer operand"):
        te.bitwise_not(x[0])


def test_conditions_keep_logical_and_or_not():
    i = Var("i")
    both = (i > 1) & (i < 5)
    assert isinstance(both, Binary) and both.op == "&&" and both.dtype == "bool"
    assert ((i > 1) | (i < 5)).op == "||"
    assert (i & 3).op == "&" and (i & 3).dtype == "int32"
    assert (1 << i).op == "<<"


def test_simplifier_does_not_fold_shifts_as_arithmetic():
    i = Var("i")
    ranges = {i: (0, 63)}
    # (i >> 1) * 2 is not i, and (i << 1) // 2 not i either once bits fall off: stay opaque.
    assert str(simplify_expr((i >> 1) * 2, ranges)) != "i"
    e = simplify_expr((i & 7) + 0, ranges)
    assert isinstance(e, Binary) and e.op == "&"
