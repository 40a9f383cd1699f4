"""codegen.llvm: hand-built loop-IR Programs compiled for the CPU and compared with numpy: the
loop kinds (serial, vectorized, parallel, unrolled, thread), guards, allocations, the stack
frame, unrolling, barriers and the errors. Arithmetic and math: test_llvm_arith.py; random
programs against the loop-IR interpreter: test_llvm_random.py; the programs: llvm_programs.py.

Run as a script (``python tests/codegen/test_llvm.py [size]``) to print the GFLOP/s of a tiled
matmul against numpy.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from llvm_programs import (
    compile_program,
    elementwise_add,
    ld,
    matmul_blocked,
    matmul_naive,
    matmul_tiled,
    rand,
    run,
)

from codegen.llvm import build_llvm
from tensorir.expr import Var, cast, const, if_then_else, max_, min_
from tensorir.loop_interp import run_program
from tensorir.loops import Allocate, Barrier, Buffer, For, If, Program, Seq, Store
from tensorir.transform import substitute

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


# --------------------------------------------------------------------------- benchmark script


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
