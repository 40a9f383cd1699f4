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


# ----------------------------------------------------------------------------- more DAGs


def conv2d_nhwc(n=1, h=8, w=8, ci=4, co=8, kh=3, kw=3, pad=1):
    data = te.placeholder((n, h, w, ci), name="data")
    kernel = te.placeholder((kh, kw, ci, co), name="kernel")
    ph, pw = h + 2 * pad, w + 2 * pad
    padded = te.compute(
        (n, ph, pw, ci),
        lambda b, y, x, c: te.if_then_else(
            te.all(y >= pad, y < h + pad, x >= pad, x < w + pad),
            data[b, y - pad, x - pad, c],
            0.0,
        ),
        name="pad",
    )
    rh = te.reduce_axis((0, kh), name="rh")
    rw = te.reduce_axis((0, kw), name="rw")
    rc = te.reduce_axis((0, ci), name="rc")
    conv = te.compute(
        (n, h, w, co),
        lambda b, y, x, f: te.sum(
            padded[b, y + rh, x + rw, rc] * kernel[rh, rw, rc, f], axis=[rh, rw, rc]
        ),
        name="conv",
    )
    relu = te.compute((n, h, w, co), lambda b, y, x, f: te.max(conv[b, y, x, f], 0.0), "relu")
    return ComputeDAG([data, kernel, relu])


def softmax(m=4, n=16):
    A = te.placeholder((m, n), name="A")
    k1 = te.reduce_axis((0, n), name="k1")
    mx = te.compute((m,), lambda i: te.max(A[i, k1], axis=k1), name="mx")
    ex = te.compute((m, n), lambda i, j: te.exp(A[i, j] - mx[i]), name="ex")
    k2 = te.reduce_axis((0, n), name="k2")
    sm = te.compute((m,), lambda i: te.sum(ex[i, k2], axis=k2), name="sm")
    out = te.compute((m, n), lambda i, j: ex[i, j] / sm[i], name="out")
    return ComputeDAG([A, out])


def test_compute_at_makes_extents_unknown_and_follows_splits_and_fuses():
    dag = softmax()
    s = State(dag)
    s.compute_at("ex", "out", "i")
    assert s["ex"].attach == ("out", "i") and s["ex"].compute_at == "iter"
    assert [it.extent for it in s["ex"].iters] == [None, None]
    s.split("ex", "j", [4])
    assert [it.extent for it in s["ex"].iters] == [None, None, None]
    s.split("out", "i", [2])
    assert s["ex"].attach == ("out", "i.1")  # moved to the innermost child
    s.fuse("out", ["i.1", "j"])
    assert s["ex"].attach == ("out", "i.1@j@")
    s.reorder("out", ["i.1@j@", "i.0"])
    assert s["ex"].attach == ("out", "i.1@j@")  # reorder keeps it by name
    s.compute_root("ex")
    assert s["ex"].attach is None
    assert [(it.name, it.extent) for it in s["ex"].iters] == [("i", 4), ("j.0", 4), ("j.1", 4)]


def test_softmax_schedule_prints_attached_stages_under_their_loop():
    dag = softmax()
    s = State(dag)
    s.compute_at("ex", "out", "i")
    s.compute_at("mx", "ex", "i")
    s.compute_at("sm", "out", "i")
    s.vectorize("out", "j")
    assert str(s) == (
        "Placeholder: A\n"
        "for i (0,4)\n"
        "  for i (None)\n"
        "    for i (None)\n"
        "      for k1 (None)\n"
        "        mx = ...\n"
        "    for j (None)\n"
        "      ex = ...\n"
        "  for i (None)\n"
        "    for k2 (None)\n"
        "      sm = ...\n"
        "  vectorize j (0,16)\n"
        "    out = ...\n"
    )


def test_compute_at_through_an_inlined_stage():
    dag = conv2d_nhwc()
    s = State(dag)
    s.compute_inline("pad")
    assert s["pad"].compute_at == "inline"
    s.compute_at("conv", "relu", "x")
    s.compute_at("conv", "relu", "y")  # re-attaching is allowed
    assert s["conv"].attach == ("relu", "y")
    assert "pad = ..." not in str(s)
    s.compute_root("pad")
    assert s["pad"].compute_at == "root"
    assert [it.extent for it in s["pad"].iters] == [1, 10, 10, 4]


def test_conv2d_tiling_iterators():
    dag = conv2d_nhwc()
    s = State(dag)
    conv = s["conv"]
    assert [(it.name, it.kind) for it in conv.iters] == [
        ("b", "spatial"), ("y", "spatial"), ("x", "spatial"), ("f", "spatial"),
        ("rh", "reduce"), ("rw", "reduce"), ("rc", "reduce"),
    ]  # fmt: skip
    y = s.split("conv", "y", [2, 2])
    f = s.split("conv", "f", [4])
    rc = s.split("conv", "rc", [2])
    assert [it.extent for it in y + f + rc] == [2, 2, 2, 2, 4, 2, 2]
    s.reorder("conv", ["b", "y.0", "x", "f.0", "rh", "rw", "rc.0", "y.1", "rc.1", "y.2", "f.1"])
    s.compute_at("pad", "conv", "rc.0")
    assert s["pad"].attach == ("conv", "rc.0")


def test_cache_write_inserts_the_cache_stage_before_the_original():
    dag = conv2d_nhwc()
    s = State(dag)
    out = s.cache_write("conv", "local")
    assert out.name == "conv.local"
    assert [st.name for st in s.stages] == [
        "data", "pad", "kernel", "conv.local", "conv", "relu"
    ]  # fmt: skip
    assert s["conv.local"].scope == "local" and s["conv"].scope == "global"
    assert [it.name for it in s["conv.local"].iters] == [
        "b.c", "y.c", "x.c", "f.c", "rh", "rw", "rc"
    ]  # fmt: skip
    assert [it.name for it in s["conv"].iters] == ["b", "y", "x", "f"]
    assert op_lines(s)[3:] == [
        "conv.local[b.c, y.c, x.c, f.c] = sum(rh:3, rw:3, rc:4; "
        "(pad[b.c, (y.c+rh), (x.c+rw), rc]*kernel[rh, rw, rc, f.c]))",
        "conv[b, y, x, f] = conv.local[b, y, x, f]",
        "relu[b, y, x, f] = max(conv[b, y, x, f], 0.0f)",
    ]
    # the consumer reads the new op, not the replaced one
    assert s["relu"].op.input_tensors[0].op is s["conv"].op
    assert s.tensors[3] is out


def test_cache_write_keeps_the_spatial_structure_of_an_elementwise_stage():
    dag = softmax()
    s = State(dag)
    s.split("out", "j", [4])
    s.parallel("out", "i")
    s.cache_write("out", "global")
    assert [st.name for st in s.stages][-2:] == ["out.global", "out"]
    assert [(it.name, it.annotation) for it in s["out"].iters] == [
        ("i", "parallel"), ("j.0", "none"), ("j.1", "none")
    ]  # fmt: skip


def test_cache_read_only_redirects_the_given_readers():
    dag = softmax()
    s = State(dag)
    t = s.cache_read("A", "shared", ["ex"])
    assert t.name == "A.shared"
    assert [st.name for st in s.stages] == ["A", "A.shared", "mx", "ex", "sm", "out"]
    assert s["A.shared"].scope == "shared"
    assert [it.name for it in s["A.shared"].iters] == ["ax0", "ax1"]
    lines = op_lines(s)
    assert lines[1] == "A.shared[ax0, ax1] = A[ax0, ax1]"
    assert lines[2] == "mx[i] = max(k1:16; A[i, k1])"
    assert lines[3] == "ex[i, j] = tir.exp((A.shared[i, j]-mx[i]))"
    # a second cache of the same tensor gets a fresh name
    s.cache_read("A", "shared", ["mx"])
    assert [st.name for st in s.stages][:3] == ["A", "A.shared1", "A.shared"]


def test_rfactor_of_a_split_reduction():
    A = te.placeholder((8, 1000), name="A")
    k = te.reduce_axis((0, 1000), name="k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = State(ComputeDAG([A, B]))
    ko, ki = s.split(B, "k", [64])
    rf = s.rfactor(B, ki, 1)
    assert rf.name == "B.rf" and rf.shape == (8, 64)
    assert [st.name for st in s.stages] == ["A", "B.rf", "B"]
    assert op_lines(s)[1:] == [
        "B.rf[i, k.1] = sum(k.0:16; A[i, ((k.0*64)+k.1)] if (((k.0*64)+k.1)<1000))",
        "B[i] = sum(k.1.v:64; B.rf[i, k.1.v])",
    ]
    assert [(it.name, it.extent, it.kind) for it in s["B.rf"].iters] == [
        ("i", 8, "spatial"), ("k.1", 64, "spatial"), ("k.0", 16, "reduce")
    ]  # fmt: skip
    assert [(it.name, it.kind) for it in s["B"].iters] == [("i", "spatial"), ("k.1.v", "reduce")]
    s.vectorize("B.rf", "k.1")  # the factored axis is spatial now


def test_rfactor_of_a_whole_reduce_axis_at_position_zero():
    dag = softmax()
    s = State(dag)
    s.rfactor("sm", "k2", 0)
    assert op_lines(s)[3:5] == [
        "sm.rf[k2, i] = ex[i, k2]",
        "sm[i] = sum(k2.v:16; sm.rf[k2.v, i])",
    ]


def test_follow_split_and_follow_fused_split():
    dag = softmax(8, 64)
    s = State(dag)
    s.split("ex", "j", [4, 2, 2])  # step 0
    parts = s.follow_split("out", "j", 0, 2)
    assert [p.extent for p in parts] == [4, 4, 4]  # lengths [4, 2*2]
    s.split("ex", "i", [2, 2])  # step 2
    parts = s.follow_fused_split("sm", "i", [0, 2], 0, True)
    assert [p.extent for p in parts] == [1, 8]  # one length: 4 * 2
    parts = s.follow_fused_split("mx", "i", [0, 2], 1, False)
    assert [p.extent for p in parts] == [4, 2]  # nparts 2 * 2


def test_storage_align_records_the_dimension():
    dag = softmax()
    s = State(dag)
    s.cache_read("A", "shared", ["ex"])
    s.storage_align("A.shared", "ax0", 16, 1)
    assert s["A.shared"].storage_align == ((0, 16, 1),)
    assert "A.shared storage_offset: 1" in str(s)


def test_state_tensors_follow_the_current_ops():
    dag = softmax()
    s = State(dag)
    s.cache_write("sm", "local")
    assert [t.name for t in s.tensors] == ["A", "mx", "ex", "sm.local", "sm", "out"]
    assert all(t.op is st.op for t, st in zip(s.tensors, s.stages))
    assert s.dag is dag and len(dag.ops) == 5


def op_lines(state):
    from tensorir.state_printer import op_str

    return [op_str(op) for op in state.current_ops]


def test_print_python_code_gpu_sketch_with_cache_stages():
    dag, A, B, C = matmul(16, 16, 16)
    s = State(dag)
    CL = s.cache_write(C, "local")
    s.split(CL, "i.c", [2, 2])  # step 1
    s.split(CL, "j.c", [2, 2])  # step 2
    s.reorder(CL, ["i.c.0", "j.c.0", "k", "i.c.1", "j.c.1", "i.c.2", "j.c.2"])
    s.follow_split(C, "i", 1, 1)
    s.compute_at(CL, C, "i.0")
    AS = s.cache_read(A, "shared", [CL])
    s.compute_at(AS, CL, "k")
    s.follow_fused_split(AS, s.fuse(AS, ["ax0", "ax1"]), [1, 2], 1, True)
    s.bind(AS, "ax0@ax1@.1", "threadIdx.x")
    s.bind(C, "i.0", "blockIdx.x")
    assert print_python_code(s) == (
        "C_i, C_j, C_k = tuple(C.op.axis) + tuple(C.op.reduce_axis)\n"
        'C_local = s.cache_write(C, "local")\n'
        "C_local_i_c, C_local_j_c, C_local_k = tuple(C_local.op.axis) + "
        "tuple(C_local.op.reduce_axis)\n"
        "C_i, C_j = tuple(C.op.axis) + tuple(C.op.reduce_axis)\n"
        "C_local_i_c_1, C_local_i_c_2 = s[C_local].split(C_local_i_c, factor=2)\n"
        "C_local_i_c_0, C_local_i_c_1 = s[C_local].split(C_local_i_c_1, factor=2)\n"
        "C_local_j_c_1, C_local_j_c_2 = s[C_local].split(C_local_j_c, factor=2)\n"
        "C_local_j_c_0, C_local_j_c_1 = s[C_local].split(C_local_j_c_1, factor=2)\n"
        "s[C_local].reorder(C_local_i_c_0, C_local_j_c_0, C_local_k, C_local_i_c_1, "
        "C_local_j_c_1, C_local_i_c_2, C_local_j_c_2)\n"
        "C_i_0, C_i_1 = s[C].split(C_i, factor=4)\n"
        "s[C_local].compute_at(s[C], C_i_0)\n"
        'A_shared = s.cache_read(A, "shared", [C_local])\n'
        "A_shared_ax0, A_shared_ax1 = tuple(A_shared.op.axis) + tuple(A_shared.op.reduce_axis)\n"
        "s[A_shared].compute_at(s[C_local], C_local_k)\n"
        "A_shared_ax0_ax1_fused = s[A_shared].fuse(A_shared_ax0, A_shared_ax1)\n"
        "A_shared_ax0_ax1_fused_0, A_shared_ax0_ax1_fused_1 = "
        "s[A_shared].split(A_shared_ax0_ax1_fused, factor=4)\n"
        's[A_shared].bind(A_shared_ax0_ax1_fused_1, te.thread_axis("threadIdx.x"))\n'
        's[C].bind(C_i_0, te.thread_axis("blockIdx.x"))\n'
    )
    assert str(s) == (
        "Placeholder: A, B\n"
        "blockIdx.x i.0 (0,4)\n"
        "  for i.c.0 (None)\n"
        "    for j.c.0 (None)\n"
        "      for k (None)\n"
        "        for ax0@ax1@.0 (None)\n"
        "          threadIdx.x ax0@ax1@.1 (None)\n"
        "            A.shared = ...\n"
        "        for i.c.1 (None)\n"
        "          for j.c.1 (None)\n"
        "            for i.c.2 (None)\n"
        "              for j.c.2 (None)\n"
        "                C.local = ...\n"
        "  for i.1 (0,4)\n"
        "    for j (0,16)\n"
        "      C = ...\n"
    )
