"""What the codegen.llvm tests share: compiling and running a loop-IR Program on the CPU,
seeded random arrays, and hand-built programs (elementwise add, naive / tiled / cache-blocked
matmuls)."""

from __future__ import annotations

import numpy as np

import runtime
from codegen.llvm import build_llvm
from tensorir.expr import Var, const, floordiv, floormod
from tensorir.loops import Allocate, Buffer, For, Load, Program, Seq, Store

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
