"""Hand-built GPU Programs (loop IR bound to blockIdx/threadIdx) with numpy references.

Shared by the code-generation tests (tests/codegen), the GPU tests (tests/gpu) and
tests/gpu/smoke.py, so every backend is checked on the same kernels. Each :class:`Case` gives a
Program, a random-input maker and a numpy reference for its outputs.

This module holds the elementwise, matmul, padding and two-kernel programs and the runners;
the others are in ``numeric_programs.py`` (math, integers, float16) and ``lowered_programs.py``
(made by tensorir.lower; int8 dot products), the ``Case`` and builders in ``kernel_kit.py``;
every name is importable from here.
"""

from __future__ import annotations

import numpy as np

from tensorir.expr import Var, all_, const, if_then_else, select
from tensorir.loops import Allocate, Barrier, Buffer, If, Program, Stmt, Store, seq

from .kernel_kit import Case, bind, f32, ld, loop, thread  # noqa: F401  (re-exported)
from .lowered_programs import (  # noqa: F401  (re-exported)
    int8_conv_ohwi_dag,
    int8_dense_dag,
    int8_gpu_state,
    lowered_cases,
    lowered_conv2d_case,
    lowered_guarded_shared_case,
    lowered_matmul_case,
    lowered_matmul_state,
    lowered_xthread_case,
)
from .numeric_programs import ROWS, half_case, int_case, math_case  # noqa: F401

# ----------------------------------------------------------------------------- elementwise


def add_case(n: int = 1024, block: int = 128) -> Case:
    """C = A + B over blockIdx.x/threadIdx.x; a tail guard when block does not divide n."""
    a, b, c = (Buffer(x, (n,), "float32") for x in "ABC")
    bx, tx = Var("bx"), Var("tx")
    i = bx * block + tx
    st: Stmt = Store(c, i, ld(a, i) + ld(b, i))
    if n % block:
        st = If(i < n, st)
    body = thread(bx, -(-n // block), "blockIdx.x", thread(tx, block, "threadIdx.x", st))
    name = "add" if n % block == 0 else "add_tail"
    return Case(
        name,
        Program(name, (a, b, c), (), body),
        lambda rng: {"A": f32(rng, n), "B": f32(rng, n)},
        lambda d: {"C": d["A"] + d["B"]},
    )


def transpose_tail_case(h: int = 37, w: int = 50) -> Case:
    """Out[y, x] = 2 * A[x, y] on 8x8 blocks (blockIdx.y/threadIdx.y too) with a 2-D guard."""
    a = Buffer("A", (w, h), "float32")
    o = Buffer("Out", (h, w), "float32")
    by, bx, ty, tx = Var("by"), Var("bx"), Var("ty"), Var("tx")
    y, x = by * 8 + ty, bx * 8 + tx
    st = If(all_(y < h, x < w), Store(o, y * w + x, ld(a, x * h + y) * 2.0))
    body = bind(
        [(by, -(-h // 8), "blockIdx.y"), (bx, -(-w // 8), "blockIdx.x"),
         (ty, 8, "threadIdx.y"), (tx, 8, "threadIdx.x")], st,
    )  # fmt: skip
    return Case(
        "transpose_tail",
        Program("transpose_tail", (a, o), (), body),
        lambda rng: {"A": f32(rng, w, h)},
        lambda d: {"Out": 2 * d["A"].T},
    )


# ----------------------------------------------------------------------------- tiled matmul


def matmul_case(m: int = 64, n: int = 64, k: int = 48, tx_extent: int = 8) -> Case:
    """C = A @ B with 16x16 block tiles, shared-memory cache stages, barriers, a local
    accumulator, a vthread loop and unrolled loops (the shape Ansor's GPU sketches lower to).

    The fetch loops always use 8x4 threads; with ``tx_extent`` 4 the compute loops use fewer
    threadIdx.x values than the block has, so the code generator must guard them without
    putting the barriers under the guard.
    """
    a = Buffer("A", (m, k), "float32")
    b = Buffer("B", (k, n), "float32")
    c = Buffer("C", (m, n), "float32")
    a_sh = Buffer("A_shared", (16, 8), "float32", "shared")
    b_sh = Buffer("B_shared", (8, 16), "float32", "shared")
    cj = 16 // tx_extent
    c_loc = Buffer("C_local", (2, 2, cj), "float32", "local")
    by, bx, ty, tx = Var("by"), Var("bx"), Var("ty"), Var("tx")
    ko, ki = Var("k_o"), Var("k_i")

    def local_nest(make):  # for vi (vthread) / i / j (unrolled) over the register tile
        vi, i, j = Var("vi"), Var("i"), Var("j")
        idx = vi * (2 * cj) + i * cj + j
        row = ty * 4 + vi * 2 + i
        col = tx * cj + j
        return loop(vi, 2, loop(i, 2, loop(j, cj, make(idx, row, col), "unrolled"), "unrolled"),
                    "vthread")  # fmt: skip

    def fetch(dst, src_index, tag):
        fo, ty2, tx2 = Var(f"{tag}_fo"), Var(f"{tag}_ty"), Var(f"{tag}_tx")
        f = fo * 32 + ty2 * 8 + tx2
        st = Store(dst, f, ld(src_ref[tag], src_index(f)))
        return loop(fo, 4, thread(ty2, 4, "threadIdx.y", thread(tx2, 8, "threadIdx.x", st)))

    src_ref = {"A": a, "B": b}
    fetch_a = fetch(a_sh, lambda f: (by * 16 + f // 8) * k + ko * 8 + f % 8, "A")
    fetch_b = fetch(b_sh, lambda f: (ko * 8 + f // 16) * n + bx * 16 + f % 16, "B")
    init = local_nest(lambda idx, row, col: Store(c_loc, idx, const(0.0)))
    update = loop(
        ki,
        8,
        local_nest(
            lambda idx, row, col: Store(
                c_loc, idx, ld(c_loc, idx) + ld(a_sh, row * 8 + ki) * ld(b_sh, ki * 16 + col)
            )
        ),
        "unrolled",
    )
    write = local_nest(
        lambda idx, row, col: Store(c, (by * 16 + row) * n + bx * 16 + col, ld(c_loc, idx))
    )
    red = loop(ko, k // 8, seq(Barrier(), fetch_a, fetch_b, Barrier(), update))
    inner = Allocate(c_loc, Allocate(a_sh, Allocate(b_sh, seq(init, red, write))))
    body = bind(
        [(by, m // 16, "blockIdx.y"), (bx, n // 16, "blockIdx.x"), (ty, 4, "threadIdx.y"),
         (tx, tx_extent, "threadIdx.x")], inner,
    )  # fmt: skip
    name = "matmul" if tx_extent == 8 else "matmul_guarded"
    return Case(
        name,
        Program(name, (a, b, c), (), body),
        lambda rng: {"A": f32(rng, m, k), "B": f32(rng, k, n)},
        lambda d: {"C": d["A"] @ d["B"]},
        rtol=1e-4,
        atol=1e-4,
    )


# ----------------------------------------------------------------------------- padding


def box3x3_case(h: int = 20, w: int = 20) -> Case:
    """Out = 3x3 box filter of A with zero padding: IfThenElse guards the out-of-range reads."""
    a = Buffer("A", (h, w), "float32")
    o = Buffer("Out", (h, w), "float32")
    acc = Buffer("acc", (1,), "float32", "local")
    bx, tx, dy, dx = Var("bx"), Var("tx"), Var("dy"), Var("dx")
    i = bx * 64 + tx
    y, x = i // w, i % w
    yy, xx = y + dy - 1, x + dx - 1
    val = if_then_else(all_(yy >= 0, yy < h, xx >= 0, xx < w), ld(a, yy * w + xx), 0.0)
    nest = seq(
        Store(acc, const(0), const(0.0)),
        loop(dy, 3, loop(dx, 3, Store(acc, const(0), ld(acc, 0) + val), "unrolled"), "unrolled"),
        Store(o, i, ld(acc, 0)),
    )
    st = If(i < h * w, Allocate(acc, nest))
    body = thread(bx, -(-h * w // 64), "blockIdx.x", thread(tx, 64, "threadIdx.x", st))

    def ref(d):
        p = np.pad(d["A"], 1)
        return {"Out": sum(p[r : r + h, s : s + w] for r in range(3) for s in range(3))}

    return Case(
        "box3x3", Program("box3x3", (a, o), (), body), lambda rng: {"A": f32(rng, h, w)}, ref
    )


# ----------------------------------------------------------------------------- two kernels


def two_stage_case(n: int = 300) -> Case:
    """Kernel 0 writes a bool workspace, kernel 1 reads it: two launches, one workspace."""
    a, b, c = (Buffer(x, (n,), "float32") for x in "ABC")
    t = Buffer("T", (n,), "bool")
    bx0, tx0, bx1, tx1 = Var("bx"), Var("tx"), Var("bx"), Var("tx")
    i0, i1 = bx0 * 32 + tx0, bx1 * 128 + tx1
    k0 = bind([(bx0, -(-n // 32), "blockIdx.x"), (tx0, 32, "threadIdx.x")],
              If(i0 < n, Store(t, i0, ld(a, i0) > 0.0)))  # fmt: skip
    v = select(ld(t, i1), ld(a, i1) * 2.0, ld(b, i1))
    k1 = thread(
        bx1,
        -(-n // 128),
        "blockIdx.x",
        thread(tx1, 128, "threadIdx.x", If(i1 < n, Store(c, i1, v))),
    )
    prog = Program("two_stage", (a, b, c), (t,), seq(k0, k1))
    return Case(
        "two_stage",
        prog,
        lambda rng: {"A": f32(rng, n), "B": f32(rng, n)},
        lambda d: {"C": np.where(d["A"] > 0, 2 * d["A"], d["B"])},
    )


def all_cases() -> list[Case]:
    return [
        add_case(),
        add_case(1000, 128),
        transpose_tail_case(),
        matmul_case(),
        matmul_case(tx_extent=4),
        box3x3_case(),
        math_case(),
        int_case(),
        half_case(),
        two_stage_case(),
    ]


# ----------------------------------------------------------------------------- running


def run_on_backend(backend, source: dict, inputs: dict) -> dict:
    """Run ``source`` (``Source.as_dict()``) on a runtime backend directly; return the outputs.

    A miniature of runtime.load_module, so the backends are tested even without it.
    """
    from tensorir.dtype import to_numpy

    compiled = backend.compile(source["code"], tuple(la[0] for la in source["launches"]))
    handles, hosts = {}, {}
    for name, dtype, size in (*source["params"], *source["workspaces"]):
        host = np.ascontiguousarray(
            inputs[name].reshape(-1) if name in inputs else np.zeros(size, to_numpy(dtype))
        )
        assert host.size == size and host.dtype == to_numpy(dtype), name
        handles[name] = backend.alloc(host.nbytes)
        backend.copy_to_device(handles[name], host)
        hosts[name] = host
    for kname, args, grid, block in source["launches"]:
        backend.launch(compiled, kname, grid, block, [handles[a] for a in args])
    backend.synchronize()
    out = {}
    for name, dtype, size in source["params"]:
        if name not in inputs:
            host = np.empty(size, to_numpy(dtype))
            backend.copy_to_host(handles[name], host)
            out[name] = host
    return out


def param_arrays(params, inputs: dict) -> list[np.ndarray]:
    """One numpy array per ``(name, dtype, size)`` param: the input, or a zeroed output."""
    from tensorir.dtype import to_numpy

    return [inputs[n] if n in inputs else np.zeros(size, to_numpy(d)) for n, d, size in params]


def check_outputs(case: Case, got: dict, inputs: dict) -> None:
    """Assert ``got`` matches the numpy reference of ``case`` (raises AssertionError)."""
    want = case.reference(inputs)
    assert set(got) == set(want), (sorted(got), sorted(want))
    for name, w in want.items():
        g = got[name].reshape(np.shape(w))
        if name == "Out" and case.name == "math":
            for r, (row, _, _) in enumerate(ROWS):
                np.testing.assert_allclose(
                    g[r], w[r], rtol=case.rtol, atol=case.atol, err_msg=f"{case.name}: {row}"
                )
        else:
            np.testing.assert_allclose(
                g.astype(np.float64), np.asarray(w).astype(np.float64), rtol=case.rtol,
                atol=case.atol, err_msg=f"{case.name}: output {name}",
            )  # fmt: skip
