"""GPU programs of tests/gpu/programs.py made by tensorir.lower from scheduled states (an
Ansor-style matmul sketch, a conv2d, cross-thread reductions, guarded shared memory; the
reference is tensorir.interp), and the int8 dot-product DAGs and GPU states the dp4a tests use."""

from __future__ import annotations

import numpy as np

from .kernel_kit import Case, f32

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
