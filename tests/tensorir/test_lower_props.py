"""Property test: random valid schedules of small DAGs lower to programs that compute the DAG.

Each example builds a tiny DAG, applies a random sequence of steps through the State API
(splits with random, often non-divisible factors; reorders; fuses of adjacent loops;
annotations; compute_at of a producer into a random loop of its consumer; inline; root;
cache_read / cache_write / rfactor),
skipping steps the State rejects, then lowers it and runs it with loop_interp against the
reference.
"""

import contextlib

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.dtype import to_numpy
from tensorir.loop_interp import run_program
from tensorir.lower import LowerError, lower
from tensorir.schedule import ScheduleError, State


def _matmul_relu():
    A = te.placeholder((5, 4), name="A")
    B = te.placeholder((4, 6), name="B")
    k = te.reduce_axis((0, 4), name="k")
    C = te.compute((5, 6), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((5, 6), lambda i, j: te.max(C[i, j], 0.0) + 1.0, name="D")
    return ComputeDAG([A, B, D])


def _chain():
    A = te.placeholder((7, 5), name="A")
    B = te.compute((7, 5), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((7, 5), lambda i, j: B[i, j] + A[i, 4 - j], name="C")
    D = te.compute((7, 5), lambda i, j: te.exp(C[i, j] * 0.1), name="D")
    return ComputeDAG([A, D])


def _reduce_elementwise():
    A = te.placeholder((6, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    M = te.compute((6,), lambda i: te.max(A[i, k], axis=k), name="M")
    E = te.compute((6, 5), lambda i, j: A[i, j] - M[i], name="E")
    return ComputeDAG([A, E])


def _stencil():
    A = te.placeholder((9,), name="A")
    B = te.compute((9,), lambda i: A[i] * 3.0, name="B")
    C = te.compute(
        (9,),
        lambda i: (
            te.if_then_else(i >= 1, B[i - 1], 0.0) + B[i] + te.if_then_else(i < 8, B[i + 1], 0.0)
        ),
        name="C",
    )
    return ComputeDAG([A, C])


DAGS = [_matmul_relu, _chain, _reduce_elementwise, _stencil]
KINDS = ["split", "split", "reorder", "fuse", "annotate", "compute_at", "compute_at", "inline",
         "root", "cache_read", "cache_write", "rfactor"]  # fmt: skip
ANNS = ["parallel", "vectorize", "unroll", "vthread", "blockIdx.x", "threadIdx.x"]


def _reference(dag, inputs):
    try:
        from tensorir.interp import eval_dag
    except ImportError:  # pragma: no cover
        eval_dag = None
    if eval_dag is not None:
        return [np.asarray(o) for o in eval_dag(dag, inputs)]
    return _run(lower(dag), dag, inputs)


def _run(prog, dag, inputs):
    outs = [np.zeros(t.shape, to_numpy(t.dtype)) for t in dag.output_tensors]
    run_program(prog, [*[np.array(x) for x in inputs], *outs])
    return outs


def _consumers(state, name):
    out = []
    for s in state.stages:
        if s.is_placeholder or s.compute_at == "inline":
            continue
        for t in s.op.input_tensors:
            if t.name == name:
                out.append(s.name)
    return out


def _apply_random_step(state, data):
    kind = data.draw(st.sampled_from(KINDS))
    names = [s.name for s in state.stages if not s.is_placeholder and s.compute_at != "inline"]
    if kind == "cache_read":
        names += [s.name for s in state.stages if s.is_placeholder]
    name = data.draw(st.sampled_from(names))
    stage = state[name]
    iters = list(stage.iters)
    if not iters and kind != "cache_read":
        return
    if kind == "split":
        it = data.draw(st.sampled_from(iters))
        nparts = data.draw(st.integers(1, 2))
        lengths = [data.draw(st.integers(1, 4)) for _ in range(nparts)]
        state.split(name, it, lengths)
    elif kind == "reorder":
        state.reorder(name, data.draw(st.permutations(iters)))
    elif kind == "fuse":
        if len(iters) < 2:
            return
        k = data.draw(st.integers(0, len(iters) - 2))
        n = data.draw(st.integers(2, len(iters) - k))
        state.fuse(name, iters[k : k + n])
    elif kind == "annotate":
        it = data.draw(st.sampled_from(iters))
        ann = data.draw(st.sampled_from(ANNS))
        if ann in ("parallel", "vectorize", "unroll"):
            getattr(state, ann)(name, it)
        else:
            state.bind(name, it, ann)
    elif kind == "compute_at":
        cons = _consumers(state, name)
        if len(cons) != 1:
            return
        target = state[cons[0]]
        it = data.draw(st.sampled_from(list(target.iters)))
        state.compute_at(name, target.name, it)
    elif kind == "inline":
        state.compute_inline(name)
    elif kind == "cache_write":
        if stage.compute_at == "root" and not state.attached_stages(name):
            state.cache_write(name, data.draw(st.sampled_from(["local", "global"])))
    elif kind == "cache_read":
        cons = _consumers(state, name)
        if cons:
            state.cache_read(name, data.draw(st.sampled_from(["local", "shared"])), cons[:1])
    elif kind == "rfactor":
        red = [k for k, it in enumerate(iters) if it.kind == "reduce"]
        if red:
            k = data.draw(st.sampled_from(red))
            state.rfactor(name, iters[k], data.draw(st.integers(0, len(stage.op.axes))))
    else:
        state.compute_root(name)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_random_schedules_compute_the_dag(data):
    dag = data.draw(st.sampled_from(DAGS))()
    state = State(dag)
    for _ in range(data.draw(st.integers(0, 8))):
        # an invalid step raises and leaves the state unchanged
        with contextlib.suppress(ScheduleError):
            _apply_random_step(state, data)
    try:
        prog = lower(state)
    except LowerError as exc:
        # Reduce loops bound to threadIdx lower to a cross-thread reduction only in the
        # supported shape (spatial loops outside, no fused spatial+reduce loop).
        assume("cross-thread reduction" not in str(exc))
        raise
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(t.shape).astype("float32") for t in dag.input_tensors]
    got = _run(prog, dag, inputs)
    want = _reference(dag, inputs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{state}\n{prog}")


def _gpu_matmul_sketch(n, m, k, ti, tj, ki, vi, vj, ri, rj):
    """The Ansor GPU sketch of a matmul with the given tile sizes (often non-divisible)."""
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    dag = ComputeDAG([A, B, C])
    s = State(dag)
    s.cache_write("C", "local")
    s.cache_read("A", "shared", ["C.local"])
    s.cache_read("B", "shared", ["C.local"])
    i, j, kk = s["C.local"].iters
    ii = s.split("C.local", i, [vi, ti, ri])
    jj = s.split("C.local", j, [vj, tj, rj])
    ks = s.split("C.local", kk, [ki, 2])
    order = [ii[0], jj[0], ii[1], jj[1], ii[2], jj[2], ks[0], ks[1], ii[3], jj[3], ks[2]]
    s.reorder("C.local", order)
    ci, cj = s["C"].iters
    ci = s.split("C", ci, [vi, ti, ri])
    cj = s.split("C", cj, [vj, tj, rj])
    s.reorder("C", [ci[0], cj[0], ci[1], cj[1], ci[2], cj[2], ci[3], cj[3]])
    s.bind("C", s.fuse("C", [ci[0], cj[0]]), "blockIdx.x")
    s.bind("C", s.fuse("C", [ci[1], cj[1]]), "vthread")
    t = s.fuse("C", [ci[2], cj[2]])
    s.bind("C", t, "threadIdx.x")
    s.compute_at("C.local", "C", t)
    for name in ("A.shared", "B.shared"):
        s.compute_at(name, "C.local", ks[0])
        f = s.fuse(name, s[name].iters)
        s.bind(name, s.split(name, f, [ti * tj])[1], "threadIdx.x")
    return dag, s


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(3, 9),
    m=st.integers(3, 9),
    k=st.integers(2, 9),
    tiles=st.tuples(*[st.integers(1, 3) for _ in range(7)]),
)
def test_random_gpu_sketches_run_simt(n, m, k, tiles):
    """Shared-memory regions (relaxed over threads), barriers and tail guards are right when
    threads really run in lockstep."""
    dag, s = _gpu_matmul_sketch(n, m, k, *tiles)
    prog = lower(s)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, k)).astype("float32")
    b = rng.standard_normal((k, m)).astype("float32")
    c = np.zeros((n, m), "float32")
    run_program(prog, [a, b, c], simt=True)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5, err_msg=str(prog))
