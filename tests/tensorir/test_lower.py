"""Lowering: each step kind alone and combined, checked by running loop_interp vs the reference."""

import numpy as np
import pytest

from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.dtype import to_numpy
from tensorir.loop_interp import run_program
from tensorir.loops import Allocate, Barrier, For, If, Seq, walk_stmts
from tensorir.lower import LowerError, infer_bound, lower, lower_unscheduled
from tensorir.passes.unroll import unroll_loops
from tensorir.schedule import State


def matmul_relu(n=16, m=12, k=10):
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    D = te.compute((n, m), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return ComputeDAG([A, B, D])


def matmul(n=16, m=12, k=10):
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return ComputeDAG([A, B, C])


def elementwise(n=1000):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    return ComputeDAG([A, B])


def elementwise_chain(n=10, m=6):
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] * 3.0, name="C")
    D = te.compute((n, m), lambda i, j: te.exp(C[i, j] * 0.1), name="D")
    return ComputeDAG([A, D])


def conv2d_nhwc(n=1, h=6, w=6, ci=3, co=4, kh=3, kw=3, pad=1, stride=1):
    X = te.placeholder((n, h, w, ci), name="X")
    W = te.placeholder((kh, kw, ci, co), name="W")
    hp, wp = h + 2 * pad, w + 2 * pad
    P = te.compute(
        (n, hp, wp, ci),
        lambda b, y, x, c: te.if_then_else(
            te.all(y >= pad, y < h + pad, x >= pad, x < w + pad),
            X[b, y - pad, x - pad, c],
            0.0,
        ),
        name="pad",
    )
    oh, ow = (hp - kh) // stride + 1, (wp - kw) // stride + 1
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rc = te.reduce_axis((0, ci), name="rc")
    Y = te.compute(
        (n, oh, ow, co),
        lambda b, y, x, f: te.sum(
            P[b, y * stride + ry, x * stride + rx, rc] * W[ry, rx, rc, f], axis=[ry, rx, rc]
        ),
        name="conv",
    )
    return ComputeDAG([X, W, Y])


def softmax(n=4, m=10):
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    mx = te.compute((n,), lambda i: te.max(A[i, k], axis=k), name="mx")
    e = te.compute((n, m), lambda i, j: te.exp(A[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis((0, m), name="k2")
    s = te.compute((n,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
    out = te.compute((n, m), lambda i, j: e[i, j] / s[i], name="out")
    return ComputeDAG([A, out])


def random_inputs(dag, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(t.shape).astype(to_numpy(t.dtype)) for t in dag.input_tensors]


def reference(dag, inputs):
    """eval_dag when available, else the unscheduled lowering (itself checked vs numpy)."""
    try:
        from tensorir.interp import eval_dag
    except ImportError:  # pragma: no cover - until the numpy reference lands
        eval_dag = None
    if eval_dag is not None:
        return [np.asarray(o) for o in eval_dag(dag, inputs)]
    return run_lowered(lower(dag), dag, inputs)


def run_lowered(prog, dag, inputs, simt=False):
    outs = [np.zeros(t.shape, to_numpy(t.dtype)) for t in dag.output_tensors]
    run_program(prog, [*[np.array(x) for x in inputs], *outs], simt=simt)
    return outs


def check(state, dag=None, seed=0, rtol=1e-4, atol=1e-4, simt=False):
    """Lower ``state``, run it on random inputs and compare with the reference; returns the
    Program. With ``simt`` it also runs GPU-style (threads in lockstep, shared per block)."""
    dag = dag if dag is not None else getattr(state, "dag", state)
    prog = lower(state)
    inputs = random_inputs(dag, seed)
    want = reference(dag, inputs)
    for mode in (False, True) if simt else (False,):
        got = run_lowered(prog, dag, inputs, simt=mode)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"simt={mode}\n{prog}")
    return prog


# ----------------------------------------------------------------------------- root stages


def test_unscheduled_matmul_matches_numpy_and_prints():
    dag = matmul()
    a, b = random_inputs(dag)
    (c,) = run_lowered(lower_unscheduled(dag), dag, [a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)
    text = str(lower(dag))
    assert "for k in range(10)" in text and "C[((i*12)+j)] = 0.0f" in text


@pytest.mark.parametrize("make", [matmul_relu, elementwise_chain, conv2d_nhwc, softmax])
def test_unscheduled_workloads(make):
    dag = make()
    prog = check(dag)
    # intermediates at root become global workspaces
    inter = {op.name for op in dag.compute_ops} - {t.name for t in dag.output_tensors}
    assert {b.name for b in prog.workspaces} == inter


def test_non_divisible_split_1000_by_64_is_guarded():
    dag = elementwise(1000)
    s = State(dag)
    s.split("B", "i", [64])
    prog = check(s)
    fors = _fors(prog)
    assert [f.extent for f in fors] == [16, 64]
    guards = [x for x in walk_stmts(prog.body) if isinstance(x, If)]
    assert len(guards) == 1 and "<1000" in str(guards[0].cond)


def test_divisible_split_has_no_guard_and_three_way_split():
    dag = elementwise(96)
    s = State(dag)
    s.split("B", "i", [4, 8])
    prog = check(s)
    assert [f.extent for f in _fors(prog)] == [3, 4, 8]
    assert not [x for x in walk_stmts(prog.body) if isinstance(x, If)]


def test_split_10_by_3_both_spatial_and_reduce():
    dag = matmul(10, 10, 10)
    s = State(dag)
    s.split("C", "i", [3])
    s.split("C", "k", [3])
    prog = check(s)
    assert "3" in str(prog)


def test_reorder_reduce_outermost_puts_init_nest_first():
    dag = matmul()
    s = State(dag)
    s.reorder("C", ["k", "i", "j"])
    prog = check(s)
    top = prog.body.stmts if isinstance(prog.body, Seq) else (prog.body,)
    # init nest (over i, j) comes before the k loop
    assert isinstance(top[0], For) and top[1].var.name == "k"


def test_split_reorder_tiles_matmul():
    dag = matmul_relu()
    s = State(dag)
    io, ii = s.split("C", "i", [4])
    jo, ji = s.split("C", "j", [5])
    ko, ki = s.split("C", "k", [3])
    s.reorder("C", [io, jo, ko, ii, ki, ji])
    check(s)


def test_fuse_and_split_fused():
    dag = matmul_relu()
    s = State(dag)
    f = s.fuse("D", ["i", "j"])
    s.split("D", f, [7])
    prog = check(s)
    assert "i_j_f" in str(prog)


def test_fuse_spatial_with_reduce_gives_correct_init():
    dag = matmul(6, 5, 4)
    s = State(dag)
    s.reorder("C", ["i", "k", "j"])
    s.fuse("C", ["k", "j"])
    check(s)


def test_fused_spatial_reduce_split_and_reordered():
    # i@k@ split then reordered: an output element is first visited at a nonzero k, so the
    # init must run before the whole nest (regression found by the property test).
    A = te.placeholder((6, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    M = te.compute((6,), lambda i: te.max(A[i, k], axis=k), name="M")
    dag = ComputeDAG([A, M])
    s = State(dag)
    f = s.fuse("M", ["i", "k"])
    o, i = s.split("M", f, [2])
    s.reorder("M", [i, o])
    check(s)


def test_annotations_map_to_loop_kinds():
    dag = matmul_relu()
    s = State(dag)
    io, ii = s.split("D", "i", [4])
    jo, ji = s.split("D", "j", [4])
    s.reorder("D", [io, jo, ii, ji])
    s.parallel("D", io)
    s.unroll("D", ii)
    s.vectorize("D", ji)
    prog = check(s)
    kinds = {f.var.name: f.kind for f in _fors(prog)}
    assert kinds["i_0"] == "parallel" and kinds["i_1"] == "unrolled"
    assert kinds["j_1"] == "vectorized" and kinds["j_0"] == "serial"


def test_bind_runs_serially_with_thread_tags():
    dag = matmul_relu()
    s = State(dag)
    f = s.fuse("D", ["i", "j"])
    bo, bi = s.split("D", f, [32])
    s.bind("D", bo, "blockIdx.x")
    s.bind("D", bi, "threadIdx.x")
    prog = check(s, simt=True)
    tags = [(f.kind, f.thread_tag) for f in _fors(prog) if f.kind == "thread"]
    assert tags == [("thread", "blockIdx.x"), ("thread", "threadIdx.x")]


def test_vthread_kind():
    dag = elementwise(64)
    s = State(dag)
    o, i = s.split("B", "i", [8])
    s.bind("B", o, "vthread")
    prog = check(s)
    assert _fors(prog)[0].kind == "vthread"


def test_pragma_auto_unroll_marks_small_subtrees():
    dag = matmul()
    s = State(dag)
    io, ii = s.split("C", "i", [4])
    ko, ki = s.split("C", "k", [2])
    s.reorder("C", [io, "j", ko, ii, ki])
    s.pragma("C", io, "auto_unroll_max_step$8")
    prog = check(s)
    fors = {f.var.name: f for f in _fors(prog)}
    assert fors["i_0"].annotations == (("auto_unroll_max_step", 8),)
    # ii*ki = 8 <= 8 -> both unrolled; ko (5*8 = 40) stays serial
    assert fors["i_1"].kind == "unrolled" and fors["k_1"].kind == "unrolled"
    assert fors["k_0"].kind == "serial" and fors["j"].kind == "serial"


def test_extent_one_loops_vanish_and_pass_on_their_pragma():
    dag = elementwise(8)
    s = State(dag)
    o, m, i = s.split("B", "i", [1, 8])  # o and m have extent 1
    s.pragma("B", o, "auto_unroll_max_step$4")
    prog = check(s)
    (loop,) = _fors(prog)
    assert loop.var.name == "i_2" and loop.annotations == (("auto_unroll_max_step", 4),)
    assert loop.kind == "serial"  # 8 iterations > 4


def test_unroll_pass_counts_stores_like_tvm():
    from tensorir.expr import Var
    from tensorir.loops import Buffer, Program, Store, seq

    buf = Buffer("a", (64,), "float32")
    v = [Var(f"v{k}") for k in range(4)]
    one = te.const(1.0)

    def nest(kind_inner):
        # for v0 (2): for v1 (2): { a[..] = 1; for v2 (3, kind_inner): a[..] = 1 }
        inner = For(v[2], 3, Store(buf, v[2], one), kind_inner)
        body = seq(Store(buf, v[1], one), inner)
        return For(v[0], 2, For(v[1], 2, body), annotations=(("auto_unroll_max_step", 16),))

    prog = unroll_loops(Program("p", (buf,), (), nest("serial")))
    kinds = [f.kind for f in _fors(prog)]
    # v2: 3 stores; v1: 2 * (1 + 3) = 8; v0: 2 * 8 = 16 -> all unrolled
    assert kinds == ["unrolled", "unrolled", "unrolled"]
    prog = unroll_loops(Program("p", (buf,), (), nest("vectorized")))
    # a vectorized loop inside keeps the loops around it rolled
    assert [f.kind for f in _fors(prog)] == ["serial", "serial", "vectorized"]


def test_unroll_pass_leaves_programs_without_pragma_alone():
    prog = lower(matmul())
    assert unroll_loops(prog) is prog


# ----------------------------------------------------------------------------- compute_at


@pytest.mark.parametrize("level", [0, 1, 2])
def test_compute_at_each_level_of_tiled_consumer(level):
    dag = matmul_relu()
    s = State(dag)
    io, ii = s.split("D", "i", [4])
    jo, ji = s.split("D", "j", [5])
    s.reorder("D", [io, jo, ii, ji])
    target = [io, jo, ii][level]
    s.compute_at("C", "D", target)
    prog = check(s)
    allocs = [x for x in walk_stmts(prog.body) if isinstance(x, Allocate)]
    assert len(allocs) == 1
    assert allocs[0].buffer.size == [4 * 12, 4 * 5, 5][level]
    assert not prog.workspaces


def test_compute_at_with_tiled_producer_and_tail():
    dag = matmul_relu(10, 12, 10)
    s = State(dag)
    io, ii = s.split("D", "i", [3])  # non-divisible consumer tiles
    s.compute_at("C", "D", io)
    s.split("C", "k", [4])  # non-divisible producer reduce split
    s.split("C", "j", [5])
    check(s)
    bounds = {x.name: x for x in infer_bound(s)}
    assert [it.extent for it in bounds["C"].root_iters] == [3, 12, 10]


def test_compute_at_chain_elementwise():
    dag = elementwise_chain()
    s = State(dag)
    io, ii = s.split("D", "i", [4])
    s.compute_at("C", "D", io)
    s.compute_at("B", "C", "j")
    prog = check(s)
    sizes = sorted(x.buffer.size for x in walk_stmts(prog.body) if isinstance(x, Allocate))
    assert sizes == [1, 24]


def test_infer_bound_fills_extents_of_attached_stages():
    dag = matmul_relu()
    s = State(dag)
    io, ii = s.split("D", "i", [4])
    s.compute_at("C", "D", io)
    stages = {x.name: x for x in infer_bound(s)}
    assert [it.extent for it in stages["C"].iters] == [4, 12, 10]
    assert all(it.extent is not None for st in stages.values() for it in st.iters)


def test_attach_outside_a_consumer_is_an_error():
    dag = elementwise_chain()
    s = State(dag)
    # B is read by C only; attaching B to D's loop while C runs at the root is invalid.
    stages = list(s.stages)
    k = [x.name for x in stages].index("B")
    stages[k] = stages[k].with_(compute_at="iter", attach=("D", "i"))
    with pytest.raises(LowerError, match="consumer 'C'"):
        lower((tuple(stages), dag))


def test_attach_to_an_inlined_stage_is_an_error():
    dag = elementwise_chain()
    stages = list(State(dag).stages)
    names = [x.name for x in stages]
    stages[names.index("B")] = stages[names.index("B")].with_(compute_at="iter", attach=("C", "i"))
    stages[names.index("C")] = stages[names.index("C")].with_(compute_at="inline")
    with pytest.raises(LowerError, match="no loops"):
        lower((tuple(stages), dag))


# ----------------------------------------------------------------------------- inline


def test_inline_padding_of_conv2d():
    dag = conv2d_nhwc()
    s = State(dag)
    s.compute_inline("pad")
    prog = check(s)
    assert not prog.workspaces
    assert "pad" not in str(prog)


def test_inline_chain_and_compute_root():
    dag = elementwise_chain()
    s = State(dag)
    s.compute_inline("B")
    s.compute_inline("C")
    prog = check(s)
    assert len(_fors(prog)) == 2
    s.compute_root("C")
    prog = check(s)
    assert [b.name for b in prog.workspaces] == ["C"]


def test_conv2d_tiled_with_pad_attached():
    dag = conv2d_nhwc(h=7, w=7)
    s = State(dag)
    b, y, x, f = s["conv"].iters[:4]
    yo, yi = s.split("conv", y, [3])
    xo, xi = s.split("conv", x, [2])
    s.reorder("conv", [b, yo, xo, f, yi, xi, "ry", "rx", "rc"])
    s.compute_at("pad", "conv", xo)
    prog = check(s)
    alloc = next(x for x in walk_stmts(prog.body) if isinstance(x, Allocate))
    assert alloc.buffer.shape == (1, 5, 4, 3)  # (3-1)+3 rows, (2-1)+3 cols


def test_softmax_scheduled():
    dag = softmax()
    s = State(dag)
    s.compute_inline("e")
    s.compute_at("mx", "out", "i")
    s.compute_at("s", "out", "i")
    s.split("out", "j", [4])
    prog = check(s)
    assert len([x for x in walk_stmts(prog.body) if isinstance(x, Allocate)]) == 2


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
    assert len([x for x in walk_stmts(prog.body) if isinstance(x, Barrier)]) == 2


def test_cross_thread_reduction_needs_spatial_loops_outside():
    dag = matmul(4, 4, 8)
    s = State(dag)
    ko, ki = s.split("C", "k", [4])
    s.reorder("C", ["i", ko, ki, "j"])
    s.bind("C", ki, "threadIdx.x")
    with pytest.raises(LowerError, match="reorder"):
        lower(s)


# ----------------------------------------------------------------------------- te corners


def test_reduce_with_condition_and_offset_axis():
    A = te.placeholder((6, 8), name="A")
    k = te.reduce_axis((2, 7), name="k")
    B = te.compute((6,), lambda i: te.sum(A[i, k], axis=k, where=A[i, k] > 0.0), name="B")
    dag = ComputeDAG([A, B])
    s = State(dag)
    s.split("B", "k", [2])
    check(s)
    a = random_inputs(dag)[0]
    (b,) = run_lowered(lower(dag), dag, [a])
    sub = a[:, 2:7]
    np.testing.assert_allclose(b, np.where(sub > 0, sub, 0).sum(1), rtol=1e-5)


def test_max_reduction_and_int_dtype():
    A = te.placeholder((5, 7), dtype="int32", name="A")
    k = te.reduce_axis((0, 7), name="k")
    B = te.compute((5,), lambda i: te.max(A[i, k] * 3 // 2, axis=k), name="B")
    dag = ComputeDAG([A, B])
    a = np.random.default_rng(1).integers(-50, 50, (5, 7)).astype("int32")
    s = State(dag)
    s.split("B", "k", [3])
    (b,) = run_lowered(lower(s), dag, [a])
    np.testing.assert_array_equal(b, (a * 3 // 2).max(1))


def test_two_outputs_keep_dag_param_order():
    A = te.placeholder((6,), name="A")
    B = te.compute((6,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((6,), lambda i: B[i] * 2.0, name="C")
    dag = ComputeDAG([A, B, C])
    prog = check(State(dag))
    assert [b.name for b in prog.params] == ["A", "B", "C"] and not prog.workspaces


def test_stencil_compute_at_unions_accesses():
    A = te.placeholder((9,), name="A")
    B = te.compute((9,), lambda i: A[i] * 3.0, name="B")
    C = te.compute(
        (9,),
        lambda i: (
            te.if_then_else(i >= 1, B[i - 1], 0.0) + B[i] + te.if_then_else(i < 8, B[i + 1], 0.0)
        ),
        name="C",
    )
    dag = ComputeDAG([A, C])
    s = State(dag)
    o, _ = s.split("C", "i", [4])
    s.compute_at("B", "C", o)
    prog = check(s)
    alloc = next(x for x in walk_stmts(prog.body) if isinstance(x, Allocate))
    assert alloc.buffer.shape == (6,)  # 4 + halo of 1 on each side


def test_names_are_unique_c_identifiers():
    dag = matmul_relu()
    s = State(dag)
    s.fuse("D", ["i", "j"])
    s.split("C", "i", [2, 2])
    prog = lower(s)
    names = [f.var.name for f in _fors(prog)]
    assert len(names) == len(set(names))
    assert all(n.isidentifier() for n in names)


@pytest.mark.parametrize("two_reads", [False, True])
def test_compute_at_under_data_dependent_reads(two_reads):
    A = te.placeholder((6,), name="A")
    idx = te.placeholder((5,), dtype="int32", name="I")
    B = te.compute((6,), lambda i: A[i] * 2.0, name="B")

    def body(i):
        v = B[te.floormod(idx[i] * idx[i], 6)]
        return v + B[te.floormod(idx[i], 6)] if two_reads else v

    C = te.compute((5,), body, name="C")
    dag = ComputeDAG([A, idx, C])
    s = State(dag)
    s.compute_at("B", "C", "i")
    prog = lower(s)
    a = random_inputs(dag)[0]
    ind = np.array([0, 5, 3, 2, 1], "int32")
    (c,) = run_lowered(prog, dag, [a, ind])
    want = (a * 2)[(ind * ind) % 6] + ((a * 2)[ind % 6] if two_reads else 0)
    np.testing.assert_allclose(c, want, rtol=1e-6)


def test_loop_vars_never_shadow_buffers():
    X = te.placeholder((4, 3), name="j")
    Y = te.compute((4, 3), lambda i, j: X[i, j] + 1.0, name="i")
    dag = ComputeDAG([X, Y])
    prog = check(dag)
    var_names = {f.var.name for f in _fors(prog)}
    assert not var_names & {"i", "j"} and len(var_names) == 2


def _seed_workloads():
    W = pytest.importorskip("autosched.workloads")
    return {
        "matmul_relu": lambda: W.matmul_relu(5, 6, 4),
        "dense_bias": lambda: W.dense_bias(3, 5, 4),
        "softmax": lambda: W.softmax(3, 7),
        "conv2d_nhwc": lambda: W.conv2d_nhwc_bias_relu(1, 5, 5, 2, 3),
        "conv2d_stride2": lambda: W.conv2d_nhwc_bias_relu(1, 7, 7, 2, 3, stride=2),
        "depthwise": lambda: W.depthwise_conv2d_nhwc(1, 5, 5, 3),
        "max_pool": lambda: W.max_pool_bias_relu(1, 7, 7, 2),
        "conv2d_nchw": lambda: W.conv2d_nchw(1, 2, 5, 5, 3),
        "winograd": lambda: W.winograd_conv2d_nhwc_3x3(1, 4, 4, 2, 3),
    }


SEEDS = [
    "matmul_relu", "dense_bias", "softmax", "conv2d_nhwc", "conv2d_stride2", "depthwise",
    "max_pool", "conv2d_nchw", "winograd",
]  # fmt: skip


@pytest.mark.parametrize("name", SEEDS)
def test_seed_workloads_unscheduled_and_inlined_attached(name):
    from tensorir.expr import Reduce

    dag = ComputeDAG(_seed_workloads()[name]())
    check(dag, rtol=1e-3, atol=1e-3)
    s = State(dag)
    outs = {t.name for t in dag.output_tensors}
    for st in s.stages:  # inline every element-wise intermediate (Ansor's CPU default)
        if not st.is_placeholder and st.name not in outs and not isinstance(st.op.body, Reduce):
            s.compute_inline(st.name)
    for st in reversed(s.stages):  # attach reductions in the middle of their consumer
        if st.is_placeholder or st.name in outs or st.compute_at != "root":
            continue
        cons = [
            c
            for c in s.stages
            if not c.is_placeholder
            and c.compute_at != "inline"
            and any(x.name == st.name for x in c.op.input_tensors)
        ]
        if len(cons) == 1:
            sp = [it for it in cons[0].iters if it.kind == "spatial"]
            s.compute_at(st.name, cons[0].name, sp[len(sp) // 2])
    check(s, rtol=1e-3, atol=1e-3)


# ----------------------------------------------------------------------------- helpers


def _fors(prog):
    return [x for x in walk_stmts(prog.body) if isinstance(x, For)]
