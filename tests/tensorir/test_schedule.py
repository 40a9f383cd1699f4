"""Bookkeeping of the scheduling language: iterator lists, extents, relations, printing."""

import pytest

from tensorir import ComputeDAG, te
from tensorir.schedule import ScheduleError, State
from tensorir.stage import FuseRel, SplitRel
from tensorir.state_printer import print_python_code


def matmul(n=512, m=512, kk=512):
    A = te.placeholder((n, kk), name="A")
    B = te.placeholder((kk, m), name="B")
    k = te.reduce_axis((0, kk), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return ComputeDAG([A, B, C]), A, B, C


def names(stage):
    return [(it.name, it.extent, it.kind, it.annotation) for it in stage.iters]


def test_initial_state_has_axes_then_reduce_axes():
    dag, A, B, C = matmul()
    s = State(dag)
    assert [st.name for st in s.stages] == ["A", "B", "C"]
    assert names(s[C]) == [
        ("i", 512, "spatial", "none"),
        ("j", 512, "spatial", "none"),
        ("k", 512, "reduce", "none"),
    ]
    assert s.stage_id(C) == 2 and s.stage_id("C") == 2 and s.stage_id(2) == 2
    assert s.concrete


def test_split_fuse_reorder_annotate_matmul():
    dag, A, B, C = matmul()
    s = State(dag)
    i, j, k = s[C].iters
    i0, i1, i2 = s.split(C, i, [8, 4])
    assert (i0.name, i0.extent, i1.extent, i2.extent) == ("i.0", 16, 8, 4)
    j0, j1 = s.split(C, "j", [16])
    k0, k1 = s.split(C, k, [4])
    assert k0.kind == k1.kind == "reduce"
    s.reorder(C, [i0, j0, k0, i1, j1, k1, i2])
    f = s.fuse(C, [i0, j0])
    assert (f.name, f.extent, f.kind) == ("i.0@j.0@", 16 * 32, "spatial")
    s.parallel(C, f)
    s.vectorize(C, i2)
    s.unroll(C, k1)
    assert names(s[C]) == [
        ("i.0@j.0@", 512, "spatial", "parallel"),
        ("k.0", 128, "reduce", "none"),
        ("i.1", 8, "spatial", "none"),
        ("j.1", 16, "spatial", "none"),
        ("k.1", 4, "reduce", "unroll"),
        ("i.2", 4, "spatial", "vectorize"),
    ]
    assert s[C].relations == (
        SplitRel("i", ("i.0", "i.1", "i.2"), (8, 4)),
        SplitRel("j", ("j.0", "j.1"), (16,)),
        SplitRel("k", ("k.0", "k.1"), (4,)),
        FuseRel(("i.0", "j.0"), "i.0@j.0@"),
    )
    assert [r.name for r in s[C].root_iters] == ["i", "j", "k"]
    assert len(s.steps) == 8


def test_fuse_of_reduce_and_spatial_is_mixed():
    dag, A, B, C = matmul(8, 8, 8)
    s = State(dag)
    s.reorder(C, ["i", "k", "j"])
    f = s.fuse(C, ["i", "k"])
    assert (f.name, f.kind, f.extent) == ("i@k@", "mixed", 64)


def test_non_divisible_split():
    A = te.placeholder((1000,), name="A")
    B = te.compute((1000,), lambda i: A[i] * 2.0, name="B")
    s = State(ComputeDAG([A, B]))
    outer, inner = s.split(B, "i", [64])
    assert (outer.extent, inner.extent) == (16, 64)
    assert s[B].relations == (SplitRel("i", ("i.0", "i.1"), (64,)),)


def test_nparts_split_derives_the_innermost_extent():
    A = te.placeholder((1000,), name="A")
    B = te.compute((1000,), lambda i: A[i] * 2.0, name="B")
    s = State(ComputeDAG([A, B]))
    parts = s.split(B, "i", [4, 5], inner_to_outer=False)
    assert [p.extent for p in parts] == [4, 5, 50]
    assert s[B].relations == (SplitRel("i", ("i.0", "i.1", "i.2"), (5, 50)),)


def test_undefined_split_lengths_make_the_state_not_concrete():
    dag, A, B, C = matmul()
    s = State(dag)
    parts = s.split(C, "i", [None, 4])
    assert [p.extent for p in parts] == [None, None, 4]
    assert not s.concrete
    assert "for i.0 (None)" in str(s)


def test_bind_and_pragma():
    dag, A, B, C = matmul(64, 64, 64)
    s = State(dag)
    i0, i1 = s.split(C, "i", [8])
    s.bind(C, i0, "blockIdx.x")
    s.bind(C, i1, "threadIdx.x")
    s.bind(C, "k", "threadIdx.y")  # cross-thread reduction is allowed
    s.pragma(C, i0, "auto_unroll_max_step$16")
    s.pragma(C, i0, "debug_skip_region")
    assert s[C].auto_unroll_max_step == 16
    assert [it.annotation for it in s[C].iters] == [
        "blockIdx.x", "threadIdx.x", "none", "threadIdx.y"
    ]  # fmt: skip


def test_state_string_matches_tvm_format():
    dag, A, B, C = matmul()
    s = State(dag)
    i, j, k = s[C].iters
    io, ii = s.split(C, i, [32])
    jo, ji = s.split(C, j, [32])
    s.reorder(C, [io, jo, k, ii, ji])
    s.parallel(C, s.fuse(C, [io, jo]))
    s.vectorize(C, ji)
    s.pragma(C, "i.0@j.0@", "auto_unroll_max_step$64")
    s.split(C, "k", [1])  # the extent-1 loop is omitted
    assert str(s) == (
        "Placeholder: A, B\n"
        "C auto_unroll: 64\n"
        "parallel i.0@j.0@ (0,256)\n"
        "  for k.0 (0,512)\n"
        "    for i.1 (0,32)\n"
        "      vectorize j.1 (0,32)\n"
        "        C = ...\n"
    )


def test_failed_step_leaves_state_unchanged():
    dag, A, B, C = matmul()
    s = State(dag)
    s.split(C, "i", [8])
    before, steps = str(s), s.steps
    with pytest.raises(ScheduleError):
        s.fuse(C, ["i.0", "j"])
    assert str(s) == before and s.steps == steps


def test_copy_is_independent():
    dag, A, B, C = matmul()
    s = State(dag)
    t = s.copy()
    t.split(C, "i", [8])
    assert len(s.steps) == 0 and len(t.steps) == 1
    assert [it.name for it in s[C].iters] == ["i", "j", "k"]


def test_print_python_code_tiled_matmul():
    dag, A, B, C = matmul()
    s = State(dag)
    i, j, k = s[C].iters
    i0, i1, i2 = s.split(C, i, [8, 4])
    j0, j1 = s.split(C, j, [16])
    s.reorder(C, [i0, j0, k, i1, j1, i2])
    f = s.fuse(C, [i0, j0])
    s.parallel(C, f)
    s.vectorize(C, i2)
    s.pragma(C, f, "auto_unroll_max_step$16")
    assert print_python_code(s) == (
        "C_i, C_j, C_k = tuple(C.op.axis) + tuple(C.op.reduce_axis)\n"
        "C_i_1, C_i_2 = s[C].split(C_i, factor=4)\n"
        "C_i_0, C_i_1 = s[C].split(C_i_1, factor=8)\n"
        "C_j_0, C_j_1 = s[C].split(C_j, factor=16)\n"
        "s[C].reorder(C_i_0, C_j_0, C_k, C_i_1, C_j_1, C_i_2)\n"
        "C_i_0_j_0_fused = s[C].fuse(C_i_0, C_j_0)\n"
        "s[C].parallel(C_i_0_j_0_fused)\n"
        "s[C].vectorize(C_i_2)\n"
        's[C].pragma(C_i_0_j_0_fused, "auto_unroll_max_step", 16)\n'
        's[C].pragma(C_i_0_j_0_fused, "unroll_explicit", True)\n'
    )
