"""Lowering: each step kind alone and combined, checked by running loop_interp vs the reference:
root stages (split, reorder, fuse, annotations, pragmas, the unroll pass). compute_at and
inline: test_lower_attach.py; caches, rfactor and GPU kernels: test_lower_storage.py; te corners
and the seed workloads: test_lower_te.py; the workloads: lower_workloads.py."""

import numpy as np
import pytest
from lower_workloads import (
    _fors,
    check,
    conv2d_nhwc,
    elementwise,
    elementwise_chain,
    matmul,
    matmul_relu,
    random_inputs,
    run_lowered,
    softmax,
)

from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.loops import For, If, Seq, walk_stmts
from tensorir.lower import lower, lower_unscheduled
from tensorir.passes.unroll import unroll_loops
from tensorir.schedule import State

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
