"""codegen.llvm on random programs against the loop-IR interpreter: seeded random expression
trees, and hypothesis-drawn two-level nests of random loop kinds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llvm_programs import ld, rand, run

import runtime
from codegen.llvm import build_llvm
from tensorir.expr import (
    Call,
    Cast,
    Const,
    Var,
    const,
    floordiv,
    floormod,
    if_then_else,
    max_,
    min_,
    select,
)
from tensorir.loop_interp import run_program
from tensorir.loops import Allocate, Buffer, For, If, Load, Program, Seq, Store


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
