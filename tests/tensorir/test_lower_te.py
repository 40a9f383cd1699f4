"""Lowering of te corners (conditional and offset reductions, int dtypes, two outputs, stencils,
unique names, data-dependent reads, shadowing) and of the seed workloads, checked by running
loop_interp vs the reference."""

import numpy as np
import pytest
from lower_workloads import _fors, check, matmul_relu, random_inputs, run_lowered

from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.loops import Allocate, walk_stmts
from tensorir.lower import lower
from tensorir.schedule import State

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
