"""Adversarial hand-written schedules for the fuzz test: what a hostile or careless user writes.

Each case is ``(id, workload, schedule, refusal)``: ``schedule(state)`` applies State API calls
to the initial state of ``fuzz_cases.WORKLOADS[workload]``. With ``refusal`` None the state
must build on LLVM and match the reference. ``(STEP, regex)``: one of the calls must raise a
ScheduleError whose one-line message matches ``regex`` (naming the stage and iterator), and
the steps before it must still build and match. ``(LOWER, regex)``: the steps are accepted
and lowering refuses the state with a one-line LowerError matching ``regex``.
"""

from __future__ import annotations

STEP, LOWER = "step", "lower"


def _it(s, stage, name):
    return s[stage].iters[s.iter_id(stage, name)]


# ----------------------------------------------------------------------------- loop steps


def split_by_one(s):
    s.split("C", "i", [1])
    s.split("C", "j", [1, 1])


def split_longer_than_extent(s):
    s.split("C", "i", [64])  # 30 -> 1 x 64: the inner loop runs past the end, guarded
    s.split("C", "k", [8, 2])


def split_not_dividing(s):
    s.split("C", "i", [4, 3])  # 30 = 3 x 4 x 3 (rounded up), 13 and 7 are prime
    s.split("C", "j", [5])
    s.split("C", "k", [2])


def split_nparts(s):
    s.split("C", "i", [4], inner_to_outer=False)  # 4 outer parts of 30
    s.split("C", "j", [3, 2], inner_to_outer=False)


def fuse_then_split(s):
    f = s.fuse("C", ["i", "j"])  # 390 iterations
    s.split("C", f, [8, 7])  # 390 = 7 x 8 x 7, with tails at both levels


def fuse_reduce_then_split(s):
    s.split("C", "j", [4])
    s.reorder("C", ["i", "j.0", "k", "j.1"])
    s.split("C", "i", [7])


def reorder_everything(s):
    i0, i1 = s.split("C", "i", [7])
    j0, j1 = s.split("C", "j", [4])
    k0, k1 = s.split("C", "k", [3])
    s.reorder("C", [k1, j1, i1, k0, j0, i0])


def vectorize_tail(s):
    j0, j1 = s.split("C", "j", [4])  # 13 = 4 x 4 with a tail of 1
    s.reorder("C", ["i", j0, "k", j1])
    s.vectorize("C", j1)


def vectorize_odd_whole_axis(s):
    s.reorder("C", ["i", "k", "j"])
    s.vectorize("C", "j")  # 13 lanes


def vectorize_outer_loop(s):
    s.vectorize("C", "i")  # not innermost: must still compute the right thing


def parallel_inner_loop(s):
    s.parallel("C", "j")  # under a serial i


def parallel_nested(s):
    i0, i1 = s.split("C", "i", [7])
    s.parallel("C", i0)
    s.parallel("C", i1)


def unroll_small_loops(s):
    s.reorder("C", ["i", "k", "j"])
    s.unroll("C", "k")
    j0, j1 = s.split("C", "j", [3])
    s.unroll("C", j1)
    s.pragma("C", "i", "auto_unroll_max_step$16")


def vectorize_fused_spatial(s):
    s.reorder("C", ["k", "i", "j"])  # reduction outermost: 390 independent lanes inside
    f = s.fuse("C", ["i", "j"])
    s.vectorize("C", f)


def unroll_nested_loops(s):
    s.unroll("C", "j")  # 13 x 7 bodies unrolled under a serial i
    s.unroll("C", "k")


def everything_annotated(s):
    i0, i1 = s.split("C", "i", [4])
    j0, j1 = s.split("C", "j", [8])
    s.reorder("C", [i0, j0, "k", i1, j1])
    s.parallel("C", i0)
    s.unroll("C", i1)
    s.vectorize("C", j1)
    s.pragma("C", i0, "auto_unroll_max_step$64")


# ----------------------------------------------------------------------------- placement


def compute_at_innermost(s):
    _, j1 = s.split("T_relu", "ax1", [7])  # 30 = 5 x 7 with a tail
    s.compute_at("C", "T_relu", j1)


def compute_at_outer_of_nondividing(s):
    i0, _ = s.split("T_relu", "ax0", [4])  # 13 = 4 x 4 with a tail
    s.compute_at("C", "T_relu", i0)


def compute_at_fused(s):
    f = s.fuse("T_relu", ["ax0", "ax1"])
    f0, _ = s.split("T_relu", f, [11])
    s.parallel("T_relu", f0)
    s.compute_at("C", "T_relu", f0)


def compute_at_then_root(s):
    s.compute_at("C", "T_relu", "ax1")
    s.compute_root("C")


def conv_compute_at_reduce_iter(s):
    s.compute_at("PaddedInput", "Conv2dOutput", "rx")  # a reduce loop: recomputed per tap


def conv_inline_and_tile(s):
    s.compute_inline("PaddedInput")
    s.compute_inline("T_add")
    xx0, xx1 = s.split("T_relu", "ax2", [3])
    f0, f1 = s.split("T_relu", "ax3", [4])
    s.reorder("T_relu", ["ax0", "ax1", xx0, f0, xx1, f1])
    s.vectorize("T_relu", f1)
    s.compute_at("Conv2dOutput", "T_relu", f0)


def depthwise_fuse_all(s):
    f = s.fuse("DepthwiseConv2d", ["b", "i", "j", "c"])
    f0, f1 = s.split("DepthwiseConv2d", f, [5])
    s.parallel("DepthwiseConv2d", f0)
    s.compute_at("PaddedInput", "DepthwiseConv2d", f1)


def pool_compute_at_window(s):
    dh0, dh1 = s.split("tensor", "dh", [2])  # window 3: a tail
    s.unroll("tensor", dh1)
    s.compute_at("pad_temp", "tensor", "dw")


def avg_pool_compute_at(s):
    s.compute_inline("pad_temp")
    s.compute_at("pool_sum", "tensor", "ax3")


def broadcast_chain_flatten(s):
    for name in ("T_add", "T_multiply", "T_subtract", "T_relu"):
        s.compute_inline(name)
    f = s.fuse("T_tanh", ["ax0", "ax1", "ax2"])
    f0, f1 = s.split("T_tanh", f, [16])  # 546 = 35 x 16 with a tail
    s.parallel("T_tanh", f0)
    s.vectorize("T_tanh", f1)


def broadcast_chain_compute_at(s):
    # each stage into its only consumer, at a different depth; T_add has two consumers
    s.compute_inline("T_subtract")
    s.compute_at("T_relu", "T_tanh", "ax1")
    s.compute_at("T_multiply", "T_relu", "ax2")
    s.compute_at("T_add", "T_multiply", "ax0")


def conv3d_split_reorder_all(s):
    names = [it.name for it in s["conv3d_ncdhw"].iters]
    outer, inner = [], []
    for n in names:
        a, b = s.split("conv3d_ncdhw", n, [2])
        outer.append(a)
        inner.append(b)
    s.reorder("conv3d_ncdhw", inner[::-1] + outer[::-1])


def conv_nchw_stride_tiles(s):
    s.compute_inline("pad_temp")
    y0, y1 = s.split("conv2d_nchw", "yy", [2])  # 7: a tail; stride 2 reads
    x0, x1 = s.split("conv2d_nchw", "xx", [4])  # 6: a tail
    s.reorder("conv2d_nchw", ["nn", "ff", y0, x0, "rc", "ry", "rx", y1, x1])
    s.unroll("conv2d_nchw", "rx")
    s.vectorize("conv2d_nchw", x1)


def conv_dilated_compute_at(s):
    f0, _ = s.split("Conv2dOutput", "ff", [3])  # 7 = 3 x 3 with a tail
    s.reorder("Conv2dOutput", ["nn", "yy", f0, "xx", "ry", "rx", "rc", "ff.1"])
    s.compute_at("PaddedInput", "Conv2dOutput", "xx")


def winograd_inline_and_attach(s):
    s.compute_inline("data_pad")
    s.compute_inline("input_tile")
    s.compute_at("bgemm", "inverse", "p")
    _, c1 = s.split("conv2d_winograd", "co", [4])
    s.vectorize("conv2d_winograd", c1)


def batch_matmul_fuse_parallel(s):
    f = s.fuse("T_batch_matmul", ["b", "i"])  # 21 rows
    s.parallel("T_batch_matmul", f)
    k0, k1 = s.split("T_batch_matmul", "k", [16])  # longer than 13
    s.reorder("T_batch_matmul", [f, k0, k1, "j"])
    s.vectorize("T_batch_matmul", "j")


# ----------------------------------------------------------------------------- dataflow


def cache_write_local(s):
    s.cache_write("C", "local")
    i0, _ = s.split("C", "i", [4])
    j0, _ = s.split("C", "j", [8])
    s.reorder("C", [i0, j0, "i.1", "j.1"])
    s.compute_at("C.local", "C", j0)


def cache_read_compute_at(s):
    s.cache_read("A", "local", ["C"])
    s.compute_at("A.local", "C", "k")


def cache_read_and_write(s):
    s.cache_read("B", "shared", ["C"])
    s.cache_write("C", "local")
    s.compute_at("B.shared", "C.local", "i.c")
    s.parallel("C", "i")


def rfactor_split_reduce(s):
    _, k1 = s.split("C", "k", [2])  # 7 = 4 x 2 with a tail
    s.rfactor("C", k1, 2)


def rfactor_vectorize(s):
    _, k1 = s.split("x_red", "k", [8])  # 30 = 4 x 8 with a tail
    rf = s.rfactor("x_red", k1, 0)  # x_red.rf: k.1, i, j, k.0
    s.reorder(rf, ["i", "k.0", "j", "k.1"])
    s.vectorize(rf, "k.1")  # the factored reduction part, now spatial: 8 lanes over 30
    s.parallel("x_red", "i")


def rfactor_whole_axis(s):
    s.rfactor("x_red", "k", 2)


def softmax_rfactor_and_cache(s):
    _, k1 = s.split("T_softmax_expsum", "k", [7])
    s.rfactor("T_softmax_expsum", k1, 1)
    s.cache_write("T_softmax_maxelem", "local")


def softmax_compute_at_one_of_two_consumers(s):
    # T_softmax_exp feeds T_softmax_expsum and T_softmax_norm: attached to norm's rows, it
    # must still be complete for expsum
    s.compute_at("T_softmax_exp", "T_softmax_norm", "i1")


def softmax_compute_at(s):
    s.compute_at("T_softmax_maxelem", "T_softmax_exp", "i0")
    s.compute_at("T_softmax_expsum", "T_softmax_norm", "i0")


def storage_align_intermediate(s):
    s.storage_align("C", "j", 16, 3)  # C is an intermediate of matmul_relu


def storage_align_cache(s):
    s.cache_write("C", "local")
    s.storage_align("C.local", "j.c", 8, 1)
    s.compute_at("C.local", "C", "i")


def storage_align_output(s):
    s.storage_align("C", "j", 16, 1)  # C is the output: its layout is fixed by the caller


# ----------------------------------------------------------------------------- refusals


def split_zero_length(s):
    s.split("C", "i", [0])


def split_annotated(s):
    s.parallel("C", "i")
    s.split("C", "i", [2])


def annotate_twice(s):
    s.parallel("C", "i")
    s.vectorize("C", "i")


def vectorize_reduce(s):
    s.vectorize("C", "k")


def parallel_reduce(s):
    s.parallel("C", "k")


def fuse_not_adjacent(s):
    s.fuse("C", ["i", "k"])


def reorder_missing(s):
    s.reorder("C", ["k", "i"])


def compute_at_non_consumer(s):
    s.compute_at("T_relu", "C", "i")  # the consumer into its producer


def compute_at_self(s):
    s.compute_at("C", "C", "i")


def inline_reduction(s):
    s.compute_inline("C")


def inline_output(s):
    s.compute_inline("T_relu")


def rfactor_spatial(s):
    s.rfactor("C", "i", 0)


def storage_align_split_part(s):
    s.split("C", "j", [4])
    s.storage_align("C", "j.1", 8, 0)


def unknown_iterator(s):
    s.split("C", "jj", [4])


CASES = [
    # (id, workload, schedule, refusal regex or None)
    ("split_by_one", "matmul", split_by_one, None),
    ("split_longer_than_extent", "matmul", split_longer_than_extent, None),
    ("split_not_dividing", "matmul", split_not_dividing, None),
    ("split_nparts", "matmul", split_nparts, None),
    ("fuse_then_split", "matmul", fuse_then_split, None),
    ("fuse_reduce_then_split", "matmul", fuse_reduce_then_split, None),
    ("reorder_everything", "matmul", reorder_everything, None),
    ("vectorize_tail", "matmul", vectorize_tail, None),
    ("vectorize_odd_whole_axis", "matmul", vectorize_odd_whole_axis, None),
    ("vectorize_outer_loop", "matmul", vectorize_outer_loop, None),
    ("parallel_inner_loop", "matmul", parallel_inner_loop, None),
    ("parallel_nested", "matmul", parallel_nested, None),
    ("unroll_small_loops", "matmul", unroll_small_loops, None),
    ("vectorize_fused_spatial", "matmul", vectorize_fused_spatial, None),
    ("unroll_nested_loops", "matmul", unroll_nested_loops, None),
    ("everything_annotated", "matmul", everything_annotated, None),
    ("compute_at_innermost", "matmul_relu", compute_at_innermost, None),
    ("compute_at_outer_of_nondividing", "matmul_relu", compute_at_outer_of_nondividing, None),
    ("compute_at_fused", "matmul_relu", compute_at_fused, None),
    ("compute_at_then_root", "matmul_relu", compute_at_then_root, None),
    ("conv_compute_at_reduce_iter", "conv2d_nhwc_bias_relu", conv_compute_at_reduce_iter, None),
    ("conv_inline_and_tile", "conv2d_nhwc_bias_relu", conv_inline_and_tile, None),
    ("depthwise_fuse_all", "depthwise_conv2d", depthwise_fuse_all, None),
    ("pool_compute_at_window", "max_pool", pool_compute_at_window, None),
    ("avg_pool_compute_at", "avg_pool", avg_pool_compute_at, None),
    ("broadcast_chain_flatten", "broadcast_chain", broadcast_chain_flatten, None),
    ("broadcast_chain_compute_at", "broadcast_chain", broadcast_chain_compute_at, None),
    ("conv3d_split_reorder_all", "conv3d", conv3d_split_reorder_all, None),
    ("conv_nchw_stride_tiles", "conv2d_nchw_stride", conv_nchw_stride_tiles, None),
    ("conv_dilated_compute_at", "conv2d_dilated", conv_dilated_compute_at, None),
    ("winograd_inline_and_attach", "winograd_conv2d", winograd_inline_and_attach, None),
    ("batch_matmul_fuse_parallel", "batch_matmul", batch_matmul_fuse_parallel, None),
    ("cache_write_local", "matmul", cache_write_local, None),
    ("cache_read_compute_at", "matmul", cache_read_compute_at, None),
    ("cache_read_and_write", "matmul", cache_read_and_write, None),
    ("rfactor_split_reduce", "matmul", rfactor_split_reduce, None),
    ("rfactor_vectorize", "sum_axis", rfactor_vectorize, None),
    ("rfactor_whole_axis", "sum_axis", rfactor_whole_axis, None),
    ("softmax_rfactor_and_cache", "softmax", softmax_rfactor_and_cache, None),
    ("softmax_compute_at", "softmax", softmax_compute_at, None),
    (
        "softmax_compute_at_one_of_two_consumers",
        "softmax",
        softmax_compute_at_one_of_two_consumers,
        (LOWER, r"'T_softmax_exp' .*T_softmax_norm\.i1.*'T_softmax_expsum'"),
    ),
    ("storage_align_intermediate", "matmul_relu", storage_align_intermediate, None),
    ("storage_align_cache", "matmul", storage_align_cache, None),
    ("storage_align_output", "matmul", storage_align_output, None),
    ("split_zero_length", "matmul", split_zero_length, (STEP, r"C\.i")),
    ("split_annotated", "matmul", split_annotated, (STEP, r"C\.i")),
    ("annotate_twice", "matmul", annotate_twice, (STEP, r"C\.i")),
    ("vectorize_reduce", "matmul", vectorize_reduce, (STEP, r"C\.k")),
    ("parallel_reduce", "matmul", parallel_reduce, (STEP, r"C\.k")),
    ("fuse_not_adjacent", "matmul", fuse_not_adjacent, (STEP, r"'C'")),
    ("reorder_missing", "matmul", reorder_missing, (STEP, r"'C'")),
    ("compute_at_non_consumer", "matmul_relu", compute_at_non_consumer, (STEP, r"T_relu")),
    ("compute_at_self", "matmul_relu", compute_at_self, (STEP, r"'C'")),
    ("inline_reduction", "matmul_relu", inline_reduction, (STEP, r"'C'")),
    ("inline_output", "matmul_relu", inline_output, (STEP, r"T_relu")),
    ("rfactor_spatial", "matmul", rfactor_spatial, (STEP, r"C\.i")),
    ("storage_align_split_part", "matmul", storage_align_split_part, (STEP, r"C\.j\.1")),
    ("unknown_iterator", "matmul", unknown_iterator, (STEP, r"'C'.*'jj'")),
]
