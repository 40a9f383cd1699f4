"""codegen.llvm: hand-built loop-IR Programs compiled for the CPU and compared with numpy.

Run as a script (``python tests/codegen/test_llvm.py [size]``) to print the GFLOP/s of a tiled
matmul against numpy.
"""

from __future__ import annotations

import gc
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime
from codegen.llvm import build_llvm
from tensorir.expr import (
    Call,
    Cast,
    Const,
    Var,
    call,
    cast,
    const,
    equal,
    floordiv,
    floormod,
    if_then_else,
    max_,
    min_,
    select,
)
from tensorir.loop_interp import run_program
from tensorir.loops import Allocate, Barrier, Buffer, For, If, Load, Program, Seq, Store
from tensorir.transform import substitute

RNG = np.random.default_rng(1234)


def compile_program(p: Program):
    return runtime.load_module(**build_llvm(p).as_dict(), device=runtime.device("cpu"))


def run(p: Program, *arrays):
    compile_program(p)(*arrays)


def ld(buf: Buffer, index):
    return Load(buf, index, buf.dtype)


def rand(shape, dtype="float32", lo=-100, hi=100):
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(lo, hi, shape).astype(dtype)


# --------------------------------------------------------------------------- programs


def elementwise_add(n: int, kind: str = "serial", dtype="float32") -> Program:
    a, b, c = (Buffer(x, (n,), dtype) for x in "ABC")
    i = Var("i")
    return Program("add", (a, b, c), (), For(i, n, Store(c, i, ld(a, i) + ld(b, i)), kind))


def matmul_naive(m: int, n: int, k: int) -> Program:
    a, b, c = (
        Buffer("A", (m, k), "float32"),
        Buffer("B", (k, n), "float32"),
        Buffer("C", (m, n), "float32"),
    )
    i, j, r = Var("i"), Var("j"), Var("k")
    body = Seq((
        Store(c, i * n + j, const(0.0)),
        For(r, k, Store(c, i * n + j, ld(c, i * n + j) + ld(a, i * k + r) * ld(b, r * n + j))),
    ))  # fmt: skip
    return Program("matmul", (a, b, c), (), For(i, m, For(j, n, body)))


def matmul_tiled(m: int, n: int, k: int, mi: int = 8, nj: int = 32) -> Program:
    """Fused i.o/j.o parallel; k; i.i unrolled; j.i vectorized; accumulators in a local buffer."""
    a, b, c = (
        Buffer("A", (m, k), "float32"),
        Buffer("B", (k, n), "float32"),
        Buffer("C", (m, n), "float32"),
    )
    acc = Buffer("C_local", (mi, nj), "float32", "local")
    f, r = Var("i_o_j_o_fused"), Var("k")
    io, jo = floordiv(f, n // nj), floormod(f, n // nj)
    ii = [Var(f"i_i{t}") for t in range(3)]
    ji = [Var(f"j_i{t}") for t in range(3)]

    def tile(t, store):
        return For(ii[t], mi, For(ji[t], nj, store(ii[t], ji[t]), "vectorized"), "unrolled")

    init = tile(0, lambda x, y: Store(acc, x * nj + y, const(0.0)))
    update = For(r, k, tile(1, lambda x, y: Store(
        acc, x * nj + y,
        ld(acc, x * nj + y) + ld(a, (io * mi + x) * k + r) * ld(b, r * n + jo * nj + y),
    )))  # fmt: skip
    out = tile(2, lambda x, y: Store(c, (io * mi + x) * n + jo * nj + y, ld(acc, x * nj + y)))
    body = For(f, (m // mi) * (n // nj), Allocate(acc, Seq((init, update, out))), "parallel")
    return Program("matmul_tiled", (a, b, c), (), body)


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("kind", ["serial", "vectorized", "parallel", "unrolled", "thread"])
def test_elementwise_add(kind):
    n = 100
    a, b, c = rand(n), rand(n), np.zeros(n, "float32")
    run(elementwise_add(n, kind), a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_source_layout():
    src = build_llvm(elementwise_add(8))
    assert src.lang == "llvm" and src.launches[0].name == "add"
    assert src.launches[0].args == ("A", "B", "C")
    assert src.params[2].name == "C" and src.params[2].size == 8
    assert 'define i32 @"add"' in src.code and "noalias" in src.code


def test_matmul_with_reduction():
    m, n, k = 13, 17, 19
    a, b, c = rand((m, k)), rand((k, n)), np.zeros((m, n), "float32")
    run(matmul_naive(m, n, k), a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_tiled_matmul_parallel_vectorized_unrolled():
    m, n, k = 64, 128, 48
    p = matmul_tiled(m, n, k, mi=4, nj=32)
    mod = compile_program(p)
    a, b, c = rand((m, k)), rand((k, n)), np.zeros((m, n), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    ir = mod._compiled.ir  # after O3
    assert "_parallel_1" in ir and "autosched_parallel_for" in ir
    assert "x float>" in ir  # explicit vector code survived optimisation
    assert any(
        op in line and "x float>" in line for line in ir.splitlines() for op in ("fmul", "fma")
    )


@pytest.mark.parametrize("pack", [False, True])
def test_cache_blocked_matmul(pack):
    m, n, k = 32, 64, 48
    a, b, c = rand((m, k)), rand((k, n)), np.full((m, n), np.nan, "float32")
    run(matmul_blocked(m, n, k, mi=4, nj=32, kb=16, pack=pack), a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_non_divisible_tail_guarded_by_if():
    n, vec = 100, 8
    a, b, c = (Buffer(x, (n,), "float32") for x in "ABC")
    o, i = Var("o"), Var("i")
    idx = o * vec + i
    body = If(idx < n, Store(c, idx, ld(a, idx) * ld(b, idx) + const(1.0)))
    p = Program("tail", (a, b, c), (), For(o, -(-n // vec), For(i, vec, body, "vectorized")))
    x, y, z = rand(n), rand(n), np.zeros(n, "float32")
    run(p, x, y, z)
    np.testing.assert_allclose(z, x * y + 1, rtol=1e-5)


@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_if_then_else_guards_out_of_bounds_read(kind):
    # Padding: B[i, j] = A[i-1, j-1] inside, 0 on the border; the index is out of bounds on the
    # border, so only the taken branch may be evaluated (A is put at the end of a page-sized
    # allocation region by numpy, an unguarded read would read garbage or crash).
    h, w = 7, 40
    a, b = Buffer("A", (h, w), "float32"), Buffer("B", (h + 2, w + 2), "float32")
    i, j = Var("i"), Var("j")
    inside = (i >= 1) & (i <= h) & (j >= 1) & (j <= w)
    row_inside = (i >= 1) & (i <= h)
    val = if_then_else(inside, ld(a, (i - 1) * w + (j - 1)), 0.0)
    # A second, lane-uniform guard: explicit vector code with a branch and a vector phi.
    val2 = if_then_else(row_inside, ld(a, (i - 1) * w + min_(max_(j - 1, 0), w - 1)), -1.0)
    j2 = Var("j2")
    val2 = val2.__class__(val2.cond, substitute(val2.t, {j: j2}), val2.f, val2.dtype)
    idx, idx2 = i * (w + 2) + j, i * (w + 2) + j2
    body = Seq((
        For(j, w + 2, Store(b, idx, val), kind),
        For(j2, w + 2, Store(b, idx2, ld(b, idx2) + val2), kind),
    ))  # fmt: skip
    p = Program("pad", (a, b), (), For(i, h + 2, body))
    if kind == "vectorized":  # the lane-uniform guard became a branch merging vectors
        assert "phi  <42 x float>" in build_llvm(p).code
    x, y = rand((h, w)), np.zeros((h + 2, w + 2), "float32")
    run(p, x, y)
    ref = np.pad(x, 1)
    ref2 = np.full((h + 2, w + 2), -1.0, "float32")
    ref2[1:-1] = x[:, np.clip(np.arange(w + 2) - 1, 0, w - 1)]
    np.testing.assert_allclose(y, ref + ref2, rtol=1e-6)


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


def test_vectorized_fallbacks_and_long_loops():
    # A reduction into one element inside a vectorized loop (store stride 0: scalar loop with
    # vectorize metadata), and a long vectorized loop (chunks + tail).
    n = 150
    a, s, c = (
        Buffer("A", (n,), "float32"),
        Buffer("S", (1,), "float32"),
        Buffer("C", (n,), "float32"),
    )
    i, j = Var("i"), Var("j")
    p = Program("fallback", (a, s, c), (), Seq((
        Store(s, 0, const(0.0)),
        For(i, n, Store(s, 0, ld(s, 0) + ld(a, i)), "vectorized"),
        For(j, n, Store(c, j, ld(a, j) * ld(s, 0)), "vectorized"),
    )))  # fmt: skip
    src = build_llvm(p).code
    assert "llvm.loop.vectorize.enable" in src and "<32 x float>" in src
    x, y, z = rand(n), np.zeros(1, "float32"), np.zeros(n, "float32")
    run(p, x, y, z)
    np.testing.assert_allclose(y[0], x.sum(dtype="float64"), rtol=1e-4)
    np.testing.assert_allclose(z, x * y[0], rtol=1e-5)


def test_allocate_inside_parallel_loop_is_private_and_large_allocate_uses_heap():
    rows, w, big = 64, 16, 20000  # big * 4 bytes > 64 KiB: malloc/free
    a, b = Buffer("A", (rows, w), "float32"), Buffer("B", (rows, w), "float32")
    t, h = Buffer("T", (w,), "float32", "local"), Buffer("H", (big,), "float32", "global")
    i, j, j2, q = Var("i"), Var("j"), Var("j2"), Var("q")
    body = Allocate(t, Allocate(h, Seq((
        For(j, w, Store(t, j, ld(a, i * w + j) * const(2.0))),
        For(q, big, Store(h, q, cast("float32", q))),
        For(j2, w, Store(b, i * w + j2, ld(t, w - 1 - j2) + ld(h, big - 1 - i))),
    ))))  # fmt: skip
    p = Program("private", (a, b), (), For(i, rows, body, "parallel"))
    assert "malloc" in build_llvm(p).code
    x, y = rand((rows, w)), np.zeros((rows, w), "float32")
    run(p, x, y)
    ref = x[:, ::-1] * 2 + (big - 1 - np.arange(rows))[:, None]
    np.testing.assert_allclose(y, ref, rtol=1e-6)


def test_stack_frame_is_bounded():
    # Twelve 60 KB scratch buffers: the first ones live on the stack, the rest on the heap.
    n, count = 15000, 12
    a, b = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32")
    stmts = []
    for t in range(count):
        buf, i, j = Buffer(f"T{t}", (n,), "float32", "local"), Var(f"i{t}"), Var(f"j{t}")
        src = a if t == 0 else b
        stmts.append(Allocate(buf, Seq((
            For(i, n, Store(buf, i, ld(src, i) + const(1.0)), "vectorized"),
            For(j, n, Store(b, j, ld(buf, j)), "vectorized"),
        ))))  # fmt: skip
    p = Program("frames", (a, b), (), Seq(tuple(stmts)))
    code = build_llvm(p).code
    assert "alloca [15000 x float]" in code and "malloc" in code
    x, y = rand(n), np.zeros(n, "float32")
    run(p, x, y)
    np.testing.assert_allclose(y, x + count, rtol=1e-5)


def test_nested_parallel_and_parallel_inside_serial():
    n, m = 6, 10
    a, b = Buffer("A", (n, m), "float32"), Buffer("B", (n, m), "float32")
    i, j = Var("i"), Var("j")
    inner = For(j, m, Store(b, i * m + j, ld(a, i * m + j) + cast("float32", i)), "parallel")
    for outer_kind in ("parallel", "serial"):
        p = Program("nested", (a, b), (), For(i, n, inner, outer_kind))
        x, y = rand((n, m)), np.zeros((n, m), "float32")
        run(p, x, y)
        np.testing.assert_allclose(y, x + np.arange(n)[:, None], rtol=1e-6)


def test_large_unroll_uses_metadata_and_matches_interpreter():
    n = 2000
    a, b = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32")
    i = Var("i")
    p = Program("unroll", (a, b), (), For(i, n, Store(b, i, ld(a, i) * ld(a, i)), "unrolled"))
    assert "llvm.loop.unroll.full" in build_llvm(p).code
    x, y, ref = rand(n), np.zeros(n, "float32"), np.zeros(n, "float32")
    run(p, x, y)
    run_program(p, [x, ref])
    np.testing.assert_allclose(y, ref, rtol=1e-6)


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


def test_emission_restores_the_garbage_collector():
    # build_llvm pauses cyclic collection while emitting: it must come back on, after an
    # error too, and stay off for a caller that had it off.
    a = Buffer("A", (4,), "float32")
    assert gc.isenabled()
    build_llvm(elementwise_add(8))
    assert gc.isenabled()
    with pytest.raises(ValueError, match="'stray' is used outside"):
        build_llvm(Program("bad", (a,), (), Store(a, Var("stray"), const(1.0))))
    assert gc.isenabled()
    gc.disable()
    try:
        build_llvm(elementwise_add(8))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_thread_loops_run_serially_and_barrier_rules():
    n = 32
    a, b = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32")
    sh = Buffer("S", (n,), "float32", "shared")
    tx, t2 = Var("tx"), Var("tx2")
    body = Allocate(sh, Seq((
        For(tx, n, Store(sh, tx, ld(a, tx)), "thread", "threadIdx.x"),
        Barrier(),
        For(t2, n, Store(b, t2, ld(sh, n - 1 - t2)), "thread", "threadIdx.x"),
    )))  # fmt: skip
    with pytest.raises(ValueError, match="barrier requires a GPU target"):
        build_llvm(Program("gpu_only", (a, b), (), body))
    no_threads = Allocate(sh, Seq((
        For(tx, n, Store(sh, tx, ld(a, tx))),
        Barrier(),
        For(t2, n, Store(b, t2, ld(sh, n - 1 - t2))),
    )))  # fmt: skip
    x, y = rand(n), np.zeros(n, "float32")
    run(Program("barrier_noop", (a, b), (), no_threads), x, y)
    np.testing.assert_array_equal(y, x[::-1])


def test_codegen_errors_name_the_problem():
    a = Buffer("A", (4,), "float32")
    stray = Var("stray")
    with pytest.raises(ValueError, match="'stray' is used outside"):
        build_llvm(Program("bad", (a,), (), Store(a, stray, const(1.0))))
    t = Buffer("T", (4,), "float32", "local")
    i = Var("i")
    with pytest.raises(ValueError, match="'T' is accessed outside its Allocate"):
        build_llvm(Program("bad2", (a,), (), For(i, 4, Store(a, i, ld(t, i)))))


def test_random_elementwise_programs_match_interpreter():
    # A few random expression trees over int32/float32 (seeded), vs the loop-IR interpreter.
    n = 24
    a, b = Buffer("A", (n,), "float32"), Buffer("B", (n,), "int32")
    out_f, out_i = Buffer("F", (n,), "float32"), Buffer("I", (n,), "int32")
    i = Var("i")
    rng = np.random.default_rng(7)

    def fexpr(depth):
        if depth == 0:
            return [ld(a, i), const(float(rng.uniform(-2, 2))), Cast("float32", ld(b, i))][
                rng.integers(3)
            ]
        op = rng.integers(6)
        x, y = fexpr(depth - 1), fexpr(depth - 1)
        return [
            x + y,
            x - y,
            x * y,
            max_(x, y),
            select(x < y, x, y),
            Call("fabs", (x,), "float32"),
        ][op]

    def iexpr(depth):
        if depth == 0:
            return [ld(b, i), i, const(int(rng.integers(-5, 6)) or 2)][rng.integers(3)]
        x, y = iexpr(depth - 1), iexpr(depth - 1)
        return [x + y, x * y, floordiv(x, const(3)), floormod(x, const(-4)), min_(x, y)][
            rng.integers(5)
        ]

    for trial in range(4):
        fe, ie = fexpr(3), iexpr(3)
        kind = ("serial", "vectorized")[trial % 2]
        body = Seq((Store(out_f, i, fe), Store(out_i, i, ie)))
        p = Program(f"rand{trial}", (a, b, out_f, out_i), (), For(i, n, body, kind))
        x, y = rand(n), rand(n, "int32", -50, 50)
        got = [np.zeros(n, "float32"), np.zeros(n, "int32")]
        ref = [np.zeros(n, "float32"), np.zeros(n, "int32")]
        run(p, x, y, *got)
        run_program(p, [x, y, *ref])
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got[1], ref[1])


# --------------------------------------------------------------------------- random programs
# Two-level nests ``for o: for v: [if idx < lim:] F[idx] = f; I[idx] = g`` (idx = o * inner + v)
# with random loop kinds and expression trees reading contiguously, reversed, gathered, at a
# uniform index and behind IfThenElse guards of out-of-bounds reads, vs the loop-IR interpreter.
# Values stay small so int32 arithmetic never overflows.

KINDS = ("serial", "parallel", "vectorized", "unrolled")


def _program(draw, outer: int, inner: int):
    n = outer * inner
    a, b = Buffer("A", (n,), "float32"), Buffer("B", (n,), "int32")
    fo, io = Buffer("F", (n,), "float32"), Buffer("I", (n,), "int32")
    o, v = Var("o"), Var("v")
    idx = o * inner + v
    reads_i = [idx, (n - 1) - idx, floormod(idx * 7 + 3, n), o, Const(0, "int32")]

    def ld(buf, pick):
        return Load(buf, reads_i[pick], buf.dtype)

    def iexpr(depth):
        if depth == 0:
            choice = draw(st.integers(0, 3))
            if choice == 0:
                return ld(b, draw(st.integers(0, len(reads_i) - 1)))
            if choice == 1:
                return [idx, v, o][draw(st.integers(0, 2))]
            return Const(draw(st.integers(-6, 6)), "int32")
        x, y = iexpr(depth - 1), iexpr(depth - 1)
        k = Const(draw(st.sampled_from([-4, -3, 2, 3, 8])), "int32")
        return [
            x + y,
            x - y,
            x * k,
            floordiv(x, k),
            floormod(x, k),
            min_(x, y),
            max_(x, y),
            select(x < y, x, y),
        ][draw(st.integers(0, 7))]

    def fexpr(depth):
        if depth == 0:
            choice = draw(st.integers(0, 4))
            if choice <= 1:
                return ld(a, draw(st.integers(0, len(reads_i) - 1)))
            if choice == 2:
                return Cast("float32", iexpr(1))
            if choice == 3:  # guarded read past the end: only the taken branch may run
                return if_then_else(
                    idx + 1 < n, Load(a, idx + 1, "float32"), Const(-1.0, "float32")
                )
            return Const(float(draw(st.integers(-4, 4))) / 2, "float32")
        x, y = fexpr(depth - 1), fexpr(depth - 1)
        return [
            x + y,
            x * y,
            x - y,
            max_(x, y),
            select(x > y, x, y * Const(0.5, "float32")),
            Call("fabs", (x,), "float32"),
            Call("exp", (Call("fabs", (x,), "float32") * Const(-1.0, "float32"),), "float32"),
            if_then_else(o < outer // 2 + 1, x, y),
        ][draw(st.integers(0, 7))]

    body = Seq((Store(fo, idx, fexpr(draw(st.integers(1, 3)))), Store(io, idx, iexpr(2))))
    if draw(st.booleans()):
        body = If(idx < n - draw(st.integers(0, 3)), body)
    if draw(st.booleans()):  # a private scratch buffer inside the nest
        t = Buffer("T", (1,), "float32", "local")
        zero, two = Const(0, "int32"), Const(2.0, "float32")
        scratch = Seq((Store(t, zero, Load(a, idx, "float32")),
                       Store(fo, idx, Load(t, zero, "float32") * two), body))  # fmt: skip
        body = Allocate(t, scratch)
    kinds = draw(st.tuples(st.sampled_from(KINDS), st.sampled_from(KINDS)))
    nest = For(o, outer, For(v, inner, body, kinds[1]), kinds[0])
    return Program("rand", (a, b, fo, io), (), nest)


@st.composite
def programs(draw):
    outer = draw(st.integers(1, 5))
    inner = draw(st.sampled_from([1, 3, 8, 16, 33, 70]))
    return _program(draw, outer, inner), draw(st.integers(0, 2**31 - 1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_programs_match_interpreter(case):
    prog, seed = case
    rng = np.random.default_rng(seed)
    n = prog.params[0].size
    inputs = [rng.uniform(-3, 3, n).astype("float32"), rng.integers(-20, 20, n).astype("int32")]
    got = [np.zeros(n, "float32"), np.zeros(n, "int32")]
    want = [np.zeros(n, "float32"), np.zeros(n, "int32")]
    try:
        mod = runtime.load_module(**build_llvm(prog).as_dict())
    except Exception as err:  # pragma: no cover - show the program that failed
        pytest.fail(f"{err}\n{prog}")
    mod(*inputs, *got)
    run_program(prog, [*inputs, *want])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5, err_msg=str(prog))
    np.testing.assert_array_equal(got[1], want[1], err_msg=str(prog))


# --------------------------------------------------------------------------- benchmark script


def matmul_blocked(
    m: int, n: int, k: int, mi: int = 8, nj: int = 32, kb: int = 128, pack: bool = False
) -> Program:
    """Cache-blocked: j.o parallel; k.o; i.o; [i.i unrolled, j.i vectorized] register tile.

    The kb x nj panel of B is reused by every i.o (copied to a contiguous buffer first when
    ``pack``, which avoids the cache-set conflicts of a 4 KiB row stride); the register tile is
    loaded from and stored to C once per (k.o, i.o).
    """
    a, b, c = (Buffer("A", (m, k), "float32"), Buffer("B", (k, n), "float32"),
               Buffer("C", (m, n), "float32"))  # fmt: skip
    acc = Buffer("C_local", (mi, nj), "float32", "local")
    panel = Buffer("B_panel", (kb, nj), "float32", "local")
    jo, ko, io, ki, kp = Var("j_o"), Var("k_o"), Var("i_o"), Var("k_i"), Var("k_p")
    ii = [Var(f"i_i{t}") for t in range(4)]
    ji = [Var(f"j_i{t}") for t in range(5)]

    def tile(t, store):
        return For(ii[t], mi, For(ji[t], nj, store(ii[t], ji[t]), "vectorized"), "unrolled")

    def cidx(x, y):
        return (io * mi + x) * n + jo * nj + y

    def b_at(kk, y):
        return ld(panel, kk * nj + y) if pack else ld(b, (ko * kb + kk) * n + jo * nj + y)

    zero = For(ii[3], m, For(ji[3], nj, Store(c, ii[3] * n + jo * nj + ji[3], const(0.0)),
                             "vectorized"))  # fmt: skip
    load = tile(0, lambda x, y: Store(acc, x * nj + y, ld(c, cidx(x, y))))

    def a_at(x):
        return ld(a, (io * mi + x) * k + ko * kb + ki)

    update = For(ki, kb, tile(1, lambda x, y: Store(
        acc, x * nj + y, ld(acc, x * nj + y) + a_at(x) * b_at(ki, y),
    )))  # fmt: skip
    store = tile(2, lambda x, y: Store(c, cidx(x, y), ld(acc, x * nj + y)))
    inner = For(io, m // mi, Allocate(acc, Seq((load, update, store))))
    if pack:
        copy = For(kp, kb, For(ji[4], nj, Store(panel, kp * nj + ji[4],
                                                ld(b, (ko * kb + kp) * n + jo * nj + ji[4])),
                               "vectorized"))  # fmt: skip
        inner = Allocate(panel, Seq((copy, inner)))
    body = Seq((zero, For(ko, k // kb, inner)))
    return Program("matmul_blocked", (a, b, c), (), For(jo, n // nj, body, "parallel"))


def _bench(size: int = 1024) -> None:
    import time

    a, b, c = rand((size, size)), rand((size, size)), np.zeros((size, size), "float32")
    progs = [(f"tiled mi={mi} nj={nj}", matmul_tiled(size, size, size, mi, nj))
             for mi, nj in ((4, 32), (8, 32))]  # fmt: skip
    progs += [(f"blocked mi={mi} nj={nj} kb={kb}{' packed' * p}",
               matmul_blocked(size, size, size, mi, nj, kb, p))
              for mi, nj, kb, p in ((8, 32, 128, False), (8, 32, 128, True), (8, 32, 256, True),
                                    (4, 64, 128, True), (16, 16, 256, True))]  # fmt: skip
    for label, prog in progs:
        mod = compile_program(prog)
        mod(a, b, c)
        err = np.abs(c - a @ b).max()
        t = mod.time_evaluator(number=3, repeat=5)(a, b, c).median
        print(f"{label:32s} {size}^3: {2 * size**3 / t / 1e9:6.1f} GFLOP/s (max err {err:.1e})")
    times = []
    for _ in range(5):
        start = time.perf_counter()
        np.matmul(a, b, out=c)
        times.append(time.perf_counter() - start)
    print(f"numpy matmul {size}^3: {2 * size**3 / np.median(times) / 1e9:6.1f} GFLOP/s")


if __name__ == "__main__":
    import sys

    _bench(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)
