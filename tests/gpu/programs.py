"""Hand-built GPU Programs (loop IR bound to blockIdx/threadIdx) with numpy references.

Shared by the code-generation tests (tests/codegen), the GPU tests (tests/gpu) and
tests/gpu/smoke.py, so every backend is checked on the same kernels. Each :class:`Case` gives a
Program, a random-input maker and a numpy reference for its outputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tensorir.expr import (
    Const,
    Expr,
    Not,
    Var,
    all_,
    call,
    cast,
    const,
    floordiv,
    floormod,
    if_then_else,
    max_,
    min_,
    select,
)
from tensorir.loops import Allocate, Barrier, Buffer, For, If, Load, Program, Stmt, Store, seq


@dataclass(frozen=True)
class Case:
    """A Program and how to check it: ``reference(inputs)`` returns the outputs by name."""

    name: str
    program: Program
    inputs: Callable[[np.random.Generator], dict]
    reference: Callable[[dict], dict]
    rtol: float = 1e-5
    atol: float = 1e-5
    needs: tuple[str, ...] = ()  # device features, e.g. ("float16",)


def ld(buf: Buffer, index) -> Load:
    return Load(buf, index if isinstance(index, Expr) else const(index), buf.dtype)


def thread(var: Var, extent: int, tag: str, body: Stmt) -> For:
    return For(var, extent, body, "thread", tag)


def bind(loops: list[tuple[Var, int, str]], body: Stmt) -> Stmt:
    """Nest thread loops, outermost first: ``[(var, extent, tag), ...]``."""
    for var, extent, tag in reversed(loops):
        body = thread(var, extent, tag, body)
    return body


def loop(var: Var, extent: int, body: Stmt, kind: str = "serial") -> For:
    return For(var, extent, body, kind)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


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


# ----------------------------------------------------------------------------- math


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


ROWS: list[tuple[str, Callable, Callable]] = [
    ("exp", lambda x, y: call("exp", x), lambda x, y: np.exp(x)),
    ("log", lambda x, y: call("log", call("fabs", x) + 0.5), lambda x, y: np.log(abs(x) + 0.5)),
    ("sqrt", lambda x, y: call("sqrt", call("fabs", x) + 0.5), lambda x, y: np.sqrt(abs(x) + 0.5)),
    (
        "rsqrt",
        lambda x, y: call("rsqrt", call("fabs", x) + 0.5),
        lambda x, y: 1 / np.sqrt(abs(x) + 0.5),
    ),
    ("tanh", lambda x, y: call("tanh", x), lambda x, y: np.tanh(x)),
    ("sigmoid", lambda x, y: call("sigmoid", x), lambda x, y: 1 / (1 + np.exp(-x))),
    ("erf", lambda x, y: call("erf", x), lambda x, y: _erf(x)),
    ("pow", lambda x, y: call("pow", call("fabs", x) + 0.5, y), lambda x, y: (abs(x) + 0.5) ** y),
    ("fabs", lambda x, y: call("fabs", x), lambda x, y: abs(x)),
    ("floor", lambda x, y: call("floor", x * 3.0), lambda x, y: np.floor(x * 3)),
    ("ceil", lambda x, y: call("ceil", x * 3.0), lambda x, y: np.ceil(x * 3)),
    ("round", lambda x, y: call("round", x * 3.0), lambda x, y: np.round(x * 3)),
    ("sin", lambda x, y: call("sin", x), lambda x, y: np.sin(x)),
    ("cos", lambda x, y: call("cos", x), lambda x, y: np.cos(x)),
    ("min", lambda x, y: min_(x, y), lambda x, y: np.minimum(x, y)),
    ("max_inf", lambda x, y: max_(x, const(-math.inf)), lambda x, y: x),
    ("min_inf", lambda x, y: min_(x, const(math.inf)), lambda x, y: x),
    ("div", lambda x, y: x / (call("fabs", y) + 1.0), lambda x, y: x / (abs(y) + 1)),
    ("fdiv", lambda x, y: floordiv(x, 0.7), lambda x, y: np.floor_divide(x, np.float32(0.7))),
    ("fmod", lambda x, y: floormod(x, 0.7), lambda x, y: np.mod(x, np.float32(0.7))),
    ("select", lambda x, y: select(x > 0.0, x, y * 2.0), lambda x, y: np.where(x > 0, x, 2 * y)),
    (
        "logic",
        lambda x, y: select(Not(x > 0.0) & (y > 0.0), 1.0, -1.0),
        lambda x, y: np.where(~(x > 0) & (y > 0), 1.0, -1.0),
    ),
    (
        "to_int",
        lambda x, y: cast("float32", cast("int32", x * 10.0)),
        lambda x, y: np.trunc(x * 10),
    ),
    ("neg_const", lambda x, y: x * -2.5, lambda x, y: x * -2.5),
]


def math_case(n: int = 256) -> Case:
    """Out[r, i] = f_r(A[i], B[i]) for every math call and float operator (one kernel)."""
    a, b = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32")
    o = Buffer("Out", (len(ROWS), n), "float32")
    bx, tx = Var("bx"), Var("tx")
    i = bx * 64 + tx
    x, y = ld(a, i), ld(b, i)
    stores = [Store(o, r * n + i, cast("float32", f(x, y))) for r, (_, f, _) in enumerate(ROWS)]
    body = thread(bx, n // 64, "blockIdx.x", thread(tx, 64, "threadIdx.x", seq(*stores)))

    def ref(d):
        x64, y64 = d["A"].astype(np.float64), d["B"].astype(np.float64)
        rows = [g(x64, y64) for _, _, g in ROWS]
        # floor-division rows are checked in float32, as the kernel computes them
        rows[[r for r, _, _ in ROWS].index("fdiv")] = np.floor_divide(d["A"], np.float32(0.7))
        rows[[r for r, _, _ in ROWS].index("fmod")] = np.mod(d["A"], np.float32(0.7))
        return {"Out": np.stack(rows).astype(np.float32)}

    def inputs(rng):
        # keep x*3 and x/0.7 away from integers so floor/ceil/round/fdiv are not at a knife edge
        return {"A": f32(rng, n), "B": f32(rng, n)}

    return Case("math", Program("math", (a, b, o), (), body), inputs, ref, rtol=2e-5, atol=2e-5)


# ----------------------------------------------------------------------------- integers


def int_case(n: int = 256) -> Case:
    """Floor division/modulo of signed ints (negative operands), min/max, int64 and int8."""
    a, b = Buffer("A", (n,), "int32"), Buffer("B", (n,), "int32")
    o = Buffer("Out", (6, n), "int32")
    o64 = Buffer("Out64", (n,), "int64")
    a8, b8 = Buffer("A8", (n,), "int8"), Buffer("B8", (n,), "int8")
    o8 = Buffer("Out8", (4, n), "int8")
    o8w = Buffer("Out8w", (n,), "int32")
    bx, tx = Var("bx"), Var("tx")
    i = bx * 64 + tx
    x, y, x8, y8 = ld(a, i), ld(b, i), ld(a8, i), ld(b8, i)
    rows = [floordiv(x, y), floormod(x, y), floordiv(x, 4), floormod(x, 4), min_(x, y), max_(x, y)]
    rows8 = [x8 * y8 + x8, max_(x8, y8), floordiv(x8, Const(3, "int8")), x8 - y8]
    stores = [Store(o, r * n + i, e) for r, e in enumerate(rows)]
    stores += [Store(o8, r * n + i, e) for r, e in enumerate(rows8)]
    big = cast("int64", x) * Const(3_000_000_000, "int64")
    stores.append(Store(o64, i, floordiv(big, Const(-7, "int64"))))
    stores.append(Store(o8w, i, cast("int32", x8) * cast("int32", y8)))
    body = thread(bx, n // 64, "blockIdx.x", thread(tx, 64, "threadIdx.x", seq(*stores)))

    def inputs(rng):
        bb = rng.integers(1, 8, n) * rng.choice([-1, 1], n)
        return {
            "A": rng.integers(-50, 50, n).astype(np.int32),
            "B": bb.astype(np.int32),
            "A8": rng.integers(-128, 128, n).astype(np.int8),
            "B8": rng.integers(-128, 128, n).astype(np.int8),
        }

    def ref(d):
        x, y, x8, y8 = d["A"], d["B"], d["A8"], d["B8"]
        with np.errstate(over="ignore"):
            r8 = [x8 * y8 + x8, np.maximum(x8, y8), x8 // np.int8(3), x8 - y8]
        return {
            "Out": np.stack([x // y, x % y, x // 4, x % 4, np.minimum(x, y), np.maximum(x, y)]),
            "Out64": (x.astype(np.int64) * 3_000_000_000) // -7,
            "Out8": np.stack(r8).astype(np.int8),
            "Out8w": x8.astype(np.int32) * y8.astype(np.int32),
        }

    prog = Program("ints", (a, b, a8, b8, o, o64, o8, o8w), (), body)
    return Case("ints", prog, inputs, ref, rtol=0, atol=0)


def half_case(n: int = 256) -> Case:
    """float16 arithmetic, a float16 math call, and half <-> float casts."""
    a, b = Buffer("A", (n,), "float16"), Buffer("B", (n,), "float16")
    c, e, g = (
        Buffer("C", (n,), "float16"),
        Buffer("E", (n,), "float16"),
        Buffer("G", (n,), "float16"),
    )
    f = Buffer("F", (n,), "float32")
    bx, tx = Var("bx"), Var("tx")
    i = bx * 64 + tx
    x, y = ld(a, i), ld(b, i)
    stores = seq(
        Store(c, i, x * y + x),
        Store(e, i, call("exp", x)),
        Store(f, i, cast("float32", x) * 2.0),
        Store(g, i, max_(x, y)),
    )
    body = thread(bx, n // 64, "blockIdx.x", thread(tx, 64, "threadIdx.x", stores))

    def ref(d):
        x, y = d["A"], d["B"]
        return {
            "C": x * y + x,
            "E": np.exp(x.astype(np.float32)).astype(np.float16),
            "F": x.astype(np.float32) * 2,
            "G": np.maximum(x, y),
        }

    def inputs(rng):
        return {"A": f32(rng, n).astype(np.float16), "B": f32(rng, n).astype(np.float16)}

    prog = Program("halfs", (a, b, c, e, f, g), (), body)
    return Case("halfs", prog, inputs, ref, rtol=1e-2, atol=1e-2, needs=("float16",))


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


# ----------------------------------------------------------------------------- lowered schedules


def _dag_case(name: str, dag, state, **tol) -> Case:
    """A Case whose Program comes from tensorir.lower and whose reference is tensorir.interp."""
    from tensorir.interp import eval_dag
    from tensorir.lower import lower

    ins, outs = list(dag.input_tensors), list(dag.output_tensors)

    def inputs(rng):
        return {t.name: f32(rng, *t.shape) for t in ins}

    def ref(d):
        res = eval_dag(dag, [d[t.name] for t in ins])
        return {t.name: np.asarray(r) for t, r in zip(outs, res)}

    return Case(name, lower(state, name=name), inputs, ref, **tol)


def lowered_matmul_state(n: int = 64, m: int = 64, k: int = 32):
    """An Ansor-style GPU sketch: blockIdx/vthread/threadIdx tiling, local accumulator,
    shared-memory cache reads with cooperative fetching, unrolled inner reduction.

    Returns ``(dag, state)``."""
    from tensorir import te
    from tensorir.dag import ComputeDAG
    from tensorir.schedule import State

    a = te.placeholder((n, k), name="A")
    b = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    dag = ComputeDAG([a, b, c])
    s = State(dag)
    s.cache_write("C", "local")
    s.cache_read("A", "shared", ["C.local"])
    s.cache_read("B", "shared", ["C.local"])
    i, j = s["C"].iters
    i0, i1, i2, i3 = s.split("C", i, [2, 8, 2])
    j0, j1, j2, j3 = s.split("C", j, [2, 8, 2])
    s.reorder("C", [i0, j0, i1, j1, i2, j2, i3, j3])
    s.bind("C", s.fuse("C", [i0, j0]), "blockIdx.x")
    s.bind("C", s.fuse("C", [i1, j1]), "vthread")
    t = s.fuse("C", [i2, j2])
    s.bind("C", t, "threadIdx.x")
    s.compute_at("C.local", "C", t)
    ci, cj, ck = s["C.local"].iters
    ko, ki = s.split("C.local", ck, [8])
    s.reorder("C.local", [ko, ki, ci, cj])
    s.unroll("C.local", ki)
    for name in ("A.shared", "B.shared"):
        s.compute_at(name, "C.local", ko)
        fo, fi = s.split(name, s.fuse(name, s[name].iters), [64])
        s.bind(name, fi, "threadIdx.x")
    return dag, s


def lowered_matmul_case(n: int = 64, m: int = 64, k: int = 32) -> Case:
    """:func:`lowered_matmul_state` lowered, checked against tensorir.interp."""
    dag, s = lowered_matmul_state(n, m, k)
    return _dag_case("lowered_matmul", dag, s, rtol=1e-4, atol=1e-4)


def lowered_conv2d_case(h: int = 14, w: int = 14, ci: int = 8, co: int = 16) -> Case:
    """conv2d NHWC with its zero padding inlined (IfThenElse reads) and a non-divisible
    blockIdx/threadIdx split of the fused output (tail guard)."""
    from tensorir import te
    from tensorir.dag import ComputeDAG
    from tensorir.schedule import State

    x = te.placeholder((1, h, w, ci), name="X")
    wt = te.placeholder((3, 3, ci, co), name="W")
    p = te.compute(
        (1, h + 2, w + 2, ci),
        lambda b, y, xx, c: te.if_then_else(
            te.all(y >= 1, y < h + 1, xx >= 1, xx < w + 1), x[b, y - 1, xx - 1, c], 0.0
        ),
        name="pad",
    )
    ry, rx, rc = (te.reduce_axis((0, e), name=nm) for e, nm in ((3, "ry"), (3, "rx"), (ci, "rc")))
    out = te.compute(
        (1, h, w, co),
        lambda b, y, xx, f: te.sum(
            p[b, y + ry, xx + rx, rc] * wt[ry, rx, rc, f], axis=[ry, rx, rc]
        ),
        name="conv",
    )
    dag = ComputeDAG([x, wt, out])
    s = State(dag)
    s.compute_inline("pad")
    it = s["conv"].iters
    fused = s.fuse("conv", list(it[:4]))
    bo, ti = s.split("conv", fused, [96])
    s.bind("conv", bo, "blockIdx.x")
    s.bind("conv", ti, "threadIdx.x")
    return _dag_case("lowered_conv2d", dag, s, rtol=1e-4, atol=1e-4)


def lowered_xthread_case(combiner: str = "max", k_len: int = 37) -> Case:
    """A reduction axis bound to threadIdx.x (cross-thread reduction through shared memory),
    rows on threadIdx.y with a tail, then an elementwise consumer: two kernels, a workspace."""
    from tensorir import te
    from tensorir.dag import ComputeDAG
    from tensorir.schedule import State

    a = te.placeholder((6, k_len), name="A")
    k = te.reduce_axis((0, k_len), name="k")
    b = te.compute((6,), lambda i: getattr(te, combiner)(a[i, k], axis=k), name="B")
    c = te.compute((6,), lambda i: b[i] * 2.0, name="C")
    dag = ComputeDAG([a, c])
    s = State(dag)
    ko, ki = s.split("B", "k", [8])
    s.bind("B", ki, "threadIdx.x")
    io, ii = s.split("B", "i", [4])
    s.bind("B", io, "blockIdx.x")
    s.bind("B", ii, "threadIdx.y")
    co, ci = s.split("C", "i", [4])
    s.bind("C", co, "blockIdx.x")
    s.bind("C", ci, "threadIdx.x")
    return _dag_case(f"lowered_xthread_{combiner}", dag, s)


def lowered_guarded_shared_case() -> Case:
    """Rows 10 in tiles of 4 (a tail guard on threadIdx) with a shared cache read at k: the
    guard must not enclose the barriers."""
    from tensorir import te
    from tensorir.dag import ComputeDAG
    from tensorir.schedule import State

    a = te.placeholder((10, 8), name="A")
    b = te.placeholder((8, 8), name="B")
    r = te.reduce_axis((0, 8), name="k")
    c = te.compute((10, 8), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    dag = ComputeDAG([a, b, c])
    s = State(dag)
    s.cache_read("A", "shared", ["C"])
    io, ii = s.split("C", "i", [4])
    s.reorder("C", [io, "j", ii, "k"])
    s.bind("C", io, "blockIdx.x")
    s.bind("C", ii, "threadIdx.x")
    s.compute_at("A.shared", "C", "k")
    f = s.fuse("A.shared", s["A.shared"].iters)
    s.bind("A.shared", s.split("A.shared", f, [4])[1], "threadIdx.x")
    return _dag_case("lowered_guarded_shared", dag, s, rtol=1e-4, atol=1e-4)


def lowered_cases() -> list[Case]:
    """Programs from tensorir.lower (other helpers' code): an integration check of both."""
    return [
        lowered_matmul_case(),
        lowered_conv2d_case(),
        lowered_xthread_case("max", 37),
        lowered_xthread_case("sum", 32),
        lowered_guarded_shared_case(),
    ]


# ----------------------------------------------------------------------------- int8 dot products


def int8_dense_dag(k: int, a_dtype: str = "int8", w_dtype: str = "int8", offset: int = 0):
    """``C[i, j] = sum_r int32(A[i, r + offset]) * int32(W[j, r])``, C (4, 32), A with
    ``offset`` extra columns (its rows' runs then start ``offset`` bytes in)."""
    from tensorir import te
    from tensorir.dag import ComputeDAG

    a = te.placeholder((4, k + offset), a_dtype, name="A")
    w = te.placeholder((32, k), w_dtype, name="W")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute(
        (4, 32),
        lambda i, j: te.sum(a[i, r + offset].astype("int32") * w[j, r].astype("int32"), axis=r),
        name="C",
    )
    return ComputeDAG([a, w, c])


def int8_conv_ohwi_dag(ci: int = 16):
    """NHWC int8 conv2d X (1, 6, 6, ci) * W (8, 3, 3, ci) (OHWI), no padding: the reduction
    over ci is contiguous in both operands."""
    from tensorir import te
    from tensorir.dag import ComputeDAG

    x = te.placeholder((1, 6, 6, ci), "int8", name="X")
    w = te.placeholder((8, 3, 3, ci), "int8", name="W")
    ry, rx, rc = (te.reduce_axis((0, e), name=n) for e, n in ((3, "ry"), (3, "rx"), (ci, "rc")))
    c = te.compute(
        (1, 4, 4, 8),
        lambda n, y, xx, f: te.sum(
            x[n, y + ry, xx + rx, rc].astype("int32") * w[f, ry, rx, rc].astype("int32"),
            axis=[ry, rx, rc],
        ),
        name="C",
    )
    return ComputeDAG([x, w, c])


def int8_gpu_state(dag, unroll: bool = False, shared_a: bool = False):
    """The output's spatial loops on blockIdx.x (all but the last, fused) and threadIdx.x, its
    reduction loops serial inside: ``acc += a[.. k] * b[.. k]`` directly in the innermost loop
    (unrolled with ``unroll``). ``shared_a``: each block first copies its row of A to shared
    memory (two threadIdx.x-bound rounds), so one operand is a shared array."""
    from tensorir.schedule import State

    s = State(dag)
    if "PaddedInput" in [st.op.name for st in s.stages]:
        s.compute_inline("PaddedInput")
    stage = dag.output_tensors[0].name
    spatial = [it for it in s[stage].iters if it.kind == "spatial"]
    *outer, inner = spatial
    block = s.fuse(stage, outer) if len(outer) > 1 else outer[0]
    s.bind(stage, block, "blockIdx.x")
    s.bind(stage, inner, "threadIdx.x")
    if unroll:
        s.unroll(stage, s[stage].iters[-1])
    if shared_a:
        s.cache_read("A", "shared", [stage])
        s.compute_at("A.shared", stage, s[stage].iters[0])
        f = s.fuse("A.shared", s["A.shared"].iters)
        s.bind("A.shared", s.split("A.shared", f, [32])[1], "threadIdx.x")
    return s
