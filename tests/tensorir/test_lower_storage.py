"""Lowering of storage and GPU-style schedules (storage_align, cache_read / cache_write, rfactor,
thread guards and barriers, GPU multi-level tiling, default scopes in kernels, cross-thread
reductions), checked by running loop_interp vs the reference."""

import pytest
from lower_workloads import _fors, check, matmul, matmul_relu

from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.loops import Allocate, Barrier, If, walk_stmts
from tensorir.lower import LowerError, infer_bound, lower, tree_reduction_steps
from tensorir.schedule import State

# ----------------------------------------------------------------------------- storage


def test_storage_align_pads_the_row_stride():
    dag = matmul_relu()
    s = State(dag)
    io, ii = s.split("D", "i", [4])
    s.compute_at("C", "D", io)
    s.storage_align("C", "i", 16, 3)
    prog = check(s)
    alloc = next(x for x in walk_stmts(prog.body) if isinstance(x, Allocate))
    assert alloc.buffer.shape == (4, 19)
    assert "*19" in str(prog)


def test_cache_write_local_and_cache_read_shared_gpu_style():
    dag = matmul(8, 8, 8)
    s = State(dag)
    s.cache_write("C", "local")
    s.cache_read("A", "shared", ["C.local"])
    i, j = s["C"].iters
    io, ii = s.split("C", i, [4])
    jo, ji = s.split("C", j, [4])
    s.reorder("C", [io, jo, ii, ji])
    s.bind("C", io, "blockIdx.x")
    s.bind("C", ii, "threadIdx.x")
    s.compute_at("C.local", "C", ii)
    s.compute_at("A.shared", "C.local", "k")
    f = s.fuse("A.shared", s["A.shared"].iters)
    fo, fi = s.split("A.shared", f, [4])
    s.bind("A.shared", fi, "threadIdx.x")
    prog = check(s, simt=True)
    allocs = {x.buffer.scope: x.buffer for x in walk_stmts(prog.body) if isinstance(x, Allocate)}
    assert allocs["local"].size == 4
    # shared region spans all threadIdx of the block: 4 rows of A, one k column
    assert allocs["shared"].size == 4
    assert len([x for x in walk_stmts(prog.body) if isinstance(x, Barrier)]) == 2


def test_cache_read_local_at_root_and_attached():
    dag = matmul_relu()
    s = State(dag)
    s.cache_read("B", "local", ["C"])
    io, ii = s.split("C", "i", [4])
    s.compute_at("B.local", "C", "k")
    check(s)


def test_rfactor():
    dag = matmul(4, 3, 12)
    s = State(dag)
    ko, ki = s.split("C", "k", [4])
    s.rfactor("C", ki, 2)
    check(s)


def test_thread_guard_never_wraps_a_barrier():
    dag = matmul(10, 8, 8)
    s = State(dag)
    s.cache_read("A", "shared", ["C"])
    io, ii = s.split("C", "i", [4])  # 10 rows in tiles of 4: tail guard on threadIdx
    s.reorder("C", [io, "j", ii, "k"])
    s.bind("C", io, "blockIdx.x")
    s.bind("C", ii, "threadIdx.x")
    s.compute_at("A.shared", "C", "k")
    f = s.fuse("A.shared", s["A.shared"].iters)
    s.bind("A.shared", s.split("A.shared", f, [4])[1], "threadIdx.x")
    prog = check(s, simt=True)
    for node in walk_stmts(prog.body):
        if isinstance(node, If):
            assert not any(isinstance(x, Barrier) for x in walk_stmts(node))
    assert any(isinstance(x, Barrier) for x in walk_stmts(prog.body))


def test_gpu_multi_level_tiling_sketch():
    # The Ansor GPU sketch: C.local tiled SSSRRSRS-like, C follows and binds
    # blockIdx/vthread/threadIdx, A.shared/B.shared fetched cooperatively at k.0.
    dag = matmul(64, 64, 32)
    s = State(dag)
    s.cache_write("C", "local")
    s.cache_read("A", "shared", ["C.local"])
    s.cache_read("B", "shared", ["C.local"])
    i, j, k = s["C.local"].iters
    ii = s.split("C.local", i, [2, 4, 2])
    jj = s.split("C.local", j, [2, 8, 2])
    kk = s.split("C.local", k, [4, 2])
    order = [ii[0], jj[0], ii[1], jj[1], ii[2], jj[2], kk[0], kk[1], ii[3], jj[3], kk[2]]
    s.reorder("C.local", order)
    ci, cj = s["C"].iters
    ci = s.split("C", ci, [2, 4, 2])
    cj = s.split("C", cj, [2, 8, 2])
    s.reorder("C", [ci[0], cj[0], ci[1], cj[1], ci[2], cj[2], ci[3], cj[3]])
    s.compute_at("C.local", "C", cj[2])
    s.bind("C", s.fuse("C", [ci[0], cj[0]]), "blockIdx.x")
    s.bind("C", s.fuse("C", [ci[1], cj[1]]), "vthread")
    s.bind("C", s.fuse("C", [ci[2], cj[2]]), "threadIdx.x")
    for name in ["A.shared", "B.shared"]:
        s.compute_at(name, "C.local", kk[0])
        f = s.fuse(name, s[name].iters)
        s.bind(name, s.split(name, f, [32])[1], "threadIdx.x")
    prog = check(s, simt=True)
    allocs = {x.buffer.name: x.buffer for x in walk_stmts(prog.body) if isinstance(x, Allocate)}
    assert allocs["C_local"].size == 4  # 2x2 per thread
    assert allocs["A_shared"].size == 16 * 8 and allocs["B_shared"].size == 8 * 32
    assert len([x for x in walk_stmts(prog.body) if isinstance(x, Barrier)]) == 2
    assert not [x for x in walk_stmts(prog.body) if isinstance(x, If)]  # tightened splits
    tags = [f.thread_tag or f.kind for f in _fors(prog) if f.kind in ("thread", "vthread")]
    assert tags[:3] == ["blockIdx.x", "vthread", "threadIdx.x"]
    local = {x.name: x for x in infer_bound(s)}["C.local"]
    assert [it.extent for it in local.iters] == [1, 1, 1, 1, 1, 1, 4, 4, 2, 2, 2]


@pytest.mark.parametrize("level", ["threadIdx", "blockIdx"])
def test_default_scope_inside_kernels_follows_the_attach_path(level):
    # Like TVM's InferStorageScope: a stage without explicit scope attached under threadIdx
    # is local (per-thread region); under blockIdx only it is shared (fenced by barriers).
    dag = matmul_relu(8, 8, 6)
    s = State(dag)
    f = s.fuse("D", ["i", "j"])
    bo, ti = s.split("D", f, [16])
    s.bind("D", bo, "blockIdx.x")
    s.bind("D", ti, "threadIdx.x")
    if level == "threadIdx":
        s.compute_at("C", "D", ti)
    else:
        s.compute_at("C", "D", bo)
        fc = s.fuse("C", ["i", "j"])
        s.bind("C", s.split("C", fc, [16])[1], "threadIdx.x")
    prog = check(s, simt=True)
    (alloc,) = [x.buffer for x in walk_stmts(prog.body) if isinstance(x, Allocate)]
    barriers = [x for x in walk_stmts(prog.body) if isinstance(x, Barrier)]
    if level == "threadIdx":
        assert alloc.scope == "local" and alloc.size == 1 and not barriers
    else:
        assert alloc.scope == "shared" and alloc.size == 16 and len(barriers) == 2


@pytest.mark.parametrize("combiner", ["sum", "max"])
@pytest.mark.parametrize("k_len", [32, 37])
def test_cross_thread_reduction(combiner, k_len):
    A = te.placeholder((6, k_len), name="A")
    k = te.reduce_axis((0, k_len), name="k")
    red = getattr(te, combiner)
    B = te.compute((6,), lambda i: red(A[i, k], axis=k), name="B")
    C = te.compute((6,), lambda i: B[i] * 2.0, name="C")
    dag = ComputeDAG([A, C])
    s = State(dag)
    ko, ki = s.split("B", "k", [8])
    s.bind("B", ki, "threadIdx.x")
    io, ii = s.split("B", "i", [4])
    s.bind("B", io, "blockIdx.x")
    s.bind("B", ii, "threadIdx.y")
    co, ci = s.split("C", "i", [4])
    s.bind("C", co, "blockIdx.x")
    s.bind("C", ci, "threadIdx.x")
    prog = check(s, simt=True)
    allocs = {x.buffer.scope: x.buffer for x in walk_stmts(prog.body) if isinstance(x, Allocate)}
    assert allocs["shared"].size == 4 * 8 and allocs["local"].size == 1
    # one barrier after the partial sums, one per tree step (8 -> 4 -> 2 -> 1), one at the end
    assert len([x for x in walk_stmts(prog.body) if isinstance(x, Barrier)]) == 2 + 3


@pytest.mark.parametrize(
    "n, steps",
    [(1, []), (2, [(1, 1)]), (8, [(4, 4), (2, 2), (1, 1)]),
     (48, [(24, 24), (12, 12), (6, 6), (3, 3), (2, 1), (1, 1)])],
)  # fmt: skip
def test_tree_reduction_steps_leave_one_slot_holding_every_partial(n, steps):
    assert tree_reduction_steps(n) == steps
    for m in range(1, 130):
        slots = [{i} for i in range(m)]  # which partial results each live slot holds
        for half, active in tree_reduction_steps(m):
            assert active <= half
            slots = [slots[t] | slots[t + half] if t < active else slots[t] for t in range(half)]
        assert slots == [set(range(m))]


def test_cross_thread_reduction_needs_spatial_loops_outside():
    dag = matmul(4, 4, 8)
    s = State(dag)
    ko, ki = s.split("C", "k", [4])
    s.reorder("C", ["i", ko, ki, "j"])
    s.bind("C", ki, "threadIdx.x")
    with pytest.raises(LowerError, match="reorder"):
        lower(s)
