"""codegen.llvm's arithmetic against numpy: math calls, float16, integer floor division and
modulo, division by zero, index arithmetic of negative offsets, selects and bool buffers, and
the constant folding of unrolled select chains and index arithmetic."""

from __future__ import annotations

import re

import numpy as np
import pytest
from llvm_programs import RNG, ld, rand, run

from codegen.llvm import build_llvm
from tensorir.expr import Var, call, cast, const, equal, floordiv, floormod, max_, min_, select
from tensorir.loops import Buffer, For, Program, Seq, Store

MATH = {
    "exp": (np.exp, (-5, 5)),
    "log": (np.log, (0.1, 10)),
    "sqrt": (np.sqrt, (0.1, 10)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 10)),
    "tanh": (np.tanh, (-4, 4)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-8, 8)),
    "erf": (None, (-3, 3)),
    "fabs": (np.abs, (-5, 5)),
    "floor": (np.floor, (-5, 5)),
    "ceil": (np.ceil, (-5, 5)),
    "round": (lambda x: np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)), (-5, 5)),
    "sin": (np.sin, (-5, 5)),
    "cos": (np.cos, (-5, 5)),
}


@pytest.mark.parametrize("kind", ["serial", "vectorized"])
@pytest.mark.parametrize("name", [*MATH, "pow"])
def test_math_calls_match_numpy(name, kind):
    n = 67
    a, b, c = (Buffer(x, (n,), "float32") for x in "ABC")
    i = Var("i")
    args = (ld(a, i), ld(b, i)) if name == "pow" else (ld(a, i),)
    p = Program("m_" + name, (a, b, c), (), For(i, n, Store(c, i, call(name, *args)), kind))
    lo, hi = MATH.get(name, (None, (0.5, 3)))[1]
    x = RNG.uniform(lo, hi, n).astype("float32")
    y = RNG.uniform(-2, 2, n).astype("float32")
    z = np.zeros(n, "float32")
    run(p, x, y, z)
    if name == "pow":
        ref = np.power(x.astype("float64"), y)
    elif name == "erf":
        import math

        ref = np.array([math.erf(v) for v in x.astype("float64")])
    else:
        ref = MATH[name][0](x.astype("float64"))
    np.testing.assert_allclose(z, ref, rtol=2e-5, atol=2e-6)


def test_float16_math_and_arithmetic():
    n = 40
    a, b, c = (Buffer(x, (n,), "float16") for x in "ABC")
    i = Var("i")
    val = call("exp", ld(a, i)) * ld(b, i) + call("tanh", ld(b, i)) - const(0.5, "float16")
    p = Program("half", (a, b, c), (), For(i, n, Store(c, i, val), "vectorized"))
    x = RNG.uniform(-2, 2, n).astype("float16")
    y = RNG.uniform(-2, 2, n).astype("float16")
    z = np.zeros(n, "float16")
    run(p, x, y, z)
    ref = np.exp(x.astype("float32")) * y + np.tanh(y.astype("float32")) - 0.5
    np.testing.assert_allclose(z.astype("float32"), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "int16"])
@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_integer_arithmetic_with_floor_semantics(dtype, kind):
    n = 50
    a, b = Buffer("A", (n,), dtype), Buffer("B", (n,), dtype)
    outs = [Buffer(f"O{t}", (n,), dtype) for t in range(6)]
    i = Var("i")
    x, y = ld(a, i), ld(b, i)
    three = const(3, dtype)
    exprs = [x + y * three, x - y, floordiv(x, y), floormod(x, y), floordiv(x, three),
             min_(x, y) + max_(floormod(x, three), y)]  # fmt: skip
    body = Seq(tuple(Store(o, i, e) for o, e in zip(outs, exprs)))
    p = Program("ints_" + dtype, (a, b, *outs), (), For(i, n, body, kind))
    signed = np.dtype(dtype).kind == "i"
    xa = rand(n, dtype, -100 if signed else 0, 100)
    ya = rand(n, dtype, -9 if signed else 1, 10)
    ya[ya == 0] = 3
    res = [np.zeros(n, dtype) for _ in outs]
    run(p, xa, ya, *res)
    with np.errstate(over="ignore"):
        t = np.dtype(dtype).type
        refs = [xa + ya * t(3), xa - ya, xa // ya, xa % ya, xa // t(3),
                np.minimum(xa, ya) + np.maximum(xa % t(3), ya)]  # fmt: skip
    for got, ref in zip(res, refs):
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_division_by_zero_and_int_min_by_minus_one_do_not_trap(dtype, kind):
    # x86 raises SIGFPE for these: the generated code must give numpy's answers instead.
    n = 9
    a, b, q, r = (Buffer(x, (n,), dtype) for x in "ABQR")
    i = Var("i")
    body = Seq(
        (Store(q, i, floordiv(ld(a, i), ld(b, i))), Store(r, i, floormod(ld(a, i), ld(b, i))))
    )
    p = Program("div_edges", (a, b, q, r), (), For(i, n, body, kind))
    lo = np.iinfo(dtype).min
    x = np.array([lo, lo, 7, -7, 5, 0, lo, 3, -3], dtype)
    y = np.array([-1, 1, 0, 0, -1, -1, 2, -2, 2], dtype)
    got_q, got_r = np.zeros(n, dtype), np.zeros(n, dtype)
    run(p, x, y, got_q, got_r)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got_q, x // y)
        np.testing.assert_array_equal(got_r, x % y)


def test_index_floordiv_floormod_of_negative_offsets_and_casts():
    # B[i] = A[(i - 7) mod 10] + float(floordiv(i - 7, 3)) with negative intermediate indices.
    n = 30
    a, b = Buffer("A", (10,), "float32"), Buffer("B", (n,), "float32")
    c = Buffer("C", (n,), "int8")
    d = Buffer("D", (n,), "bool")
    i = Var("i")
    val = ld(a, floormod(i - 7, 10)) + cast("float32", floordiv(i - 7, 3))
    body = Seq((
        Store(b, i, val),
        Store(c, i, cast("int8", ld(b, i) * const(3.0))),
        Store(d, i, (ld(b, i) > 0.0) & ~equal(floormod(i, 4), 0)),
    ))  # fmt: skip
    p = Program("negidx", (a, b, c, d), (), For(i, n, body))
    x = rand(10)
    y, z, w = np.zeros(n, "float32"), np.zeros(n, "int8"), np.zeros(n, "bool")
    run(p, x, y, z, w)
    k = np.arange(n) - 7
    ref = x[k % 10] + (k // 3)
    np.testing.assert_allclose(y, ref, rtol=1e-6)
    np.testing.assert_array_equal(z, (ref.astype("float32") * 3).astype("int8"))
    np.testing.assert_array_equal(w, (ref > 0) & (np.arange(n) % 4 != 0))


def test_select_bool_buffers_and_strided_gather():
    n = 48
    a, m, c = (
        Buffer("A", (2 * n,), "float32"),
        Buffer("M", (n,), "bool"),
        Buffer("C", (n,), "float32"),
    )
    i = Var("i")
    val = select(ld(m, i), ld(a, i * 2), ld(a, n * 2 - 1 - i) * const(2.0))
    p = Program("sel", (a, m, c), (), For(i, n, Store(c, i, val), "vectorized"))
    x, mk, z = rand(2 * n), RNG.random(n) > 0.5, np.zeros(n, "float32")
    run(p, x, mk, z)
    np.testing.assert_allclose(z, np.where(mk, x[::2], x[::-1][:n] * 2), rtol=1e-6)


@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_constant_matrix_of_unrolled_loops_is_folded(kind):
    # Winograd's transforms read constant matrices as select chains over the loop variables;
    # with those loops unrolled, every condition is constant: the chain must fold at emission
    # (no compare of two constants, no select on a constant) and give numpy's answer. The
    # index arithmetic that every unrolled copy repeats (j // 8, j % 8) is emitted once.
    n, t = 16, 4
    mat = RNG.standard_normal((t, t)).astype("float32")
    a, b = Buffer("A", (t * n,), "float32"), Buffer("B", (t * n,), "float32")
    i, r, j = Var("i"), Var("r"), Var("j")
    entry = const(0.0)
    for x in range(t):
        for y in range(t):
            entry = select(equal(r, x) & equal(i, y), const(float(mat[x, y])), entry)
    jj = floordiv(j, 8) * 8 + floormod(j, 8)
    acc = Store(b, i * n + jj, ld(b, i * n + jj) + ld(a, r * n + jj) * entry)
    body = For(i, t, Seq((Store(b, i * n + jj, const(0.0)), For(r, t, acc, "unrolled"))),
               "unrolled")  # fmt: skip
    p = Program("const_matrix", (a, b), (), For(j, n, body, kind))
    code = build_llvm(p).code
    assert not re.search(r"icmp \w+ i64 -?\d+, -?\d+|select i1 (true|false)", code)
    if kind == "serial":
        assert code.count(" udiv ") == 1 and code.count(" urem ") == 1
    x, y = rand(t * n), np.zeros(t * n, "float32")
    run(p, x, y)
    ref = mat.T @ x.reshape(t, n)  # B[i, j] = sum_r M[r, i] A[r, j]
    np.testing.assert_allclose(y.reshape(t, n), ref, rtol=1e-5, atol=1e-5)


def test_folded_constant_index_arithmetic_keeps_floor_semantics():
    # Unrolled, the index arithmetic is all constants: folded at emission where both operands
    # and the result are non-negative, emitted otherwise (negative floordiv / floormod).
    n = 8
    a, b = Buffer("A", (64,), "float32"), Buffer("B", (2 * n,), "float32")
    k = Var("k")
    idx = [
        floormod(k * 7 + 3, 5) + min_(k, 2) * 5,
        floordiv(k * 7 - 10, 3) + floormod(k * 7 - 10, 4) + 12,
    ]
    vals = [ld(a, idx[0]), select(k > 2, ld(a, idx[1]), ld(a, max_(k * 3, 7)))]
    body = Seq(tuple(Store(b, k * 2 + t, v) for t, v in enumerate(vals)))
    p = Program("const_index", (a, b), (), For(k, n, body, "unrolled"))
    assert " urem " not in build_llvm(p).code.split('@"const_index"', 1)[1]
    x, y = rand(64), np.zeros(2 * n, "float32")
    run(p, x, y)
    ks = range(n)
    ref0 = [x[(q * 7 + 3) % 5 + min(q, 2) * 5] for q in ks]
    ref1 = [x[(q * 7 - 10) // 3 + (q * 7 - 10) % 4 + 12] if q > 2 else x[max(q * 3, 7)] for q in ks]
    np.testing.assert_array_equal(y, np.stack([ref0, ref1], 1).reshape(-1))
