"""combine_parallel_dense, split_k_dense and the GPU partition's group moves
(tensorir/graph/passes/transformer.py)."""

import numpy as np
import pytest

from tensorir.graph import evaluate
from tensorir.graph.ir import Function, Module, bind_params, calls, free_vars
from tensorir.graph.passes import (
    combine_parallel_dense,
    fuse_layout_producers,
    fuse_normalization_prologues,
    fuse_ops,
    group_ops,
    optimize,
    split_k_dense,
)
from tensorir.graph.passes.transformer import LAYOUT_OPS
from tensorir.graph.zoo.layers import NetBuilder
from tensorir.graph.zoo.transformer import attention


def small_attention(seq=8, hidden=32, heads=2, seed=0):
    """One attention block of a BERT layer (random weights) and its random input."""
    from tensorir.graph import op

    b = NetBuilder("NHWC")
    x = op.var("x", (seq, hidden), "float32")
    mask = np.random.default_rng(seed).standard_normal((seq, seq)).astype(np.float32)
    out = attention(b, x, 1, seq, heads, mask, "attn")
    params = b.params(seed)
    ws = [v for v in free_vars(out) if v.name in params]
    func = Function((x, *ws), out)
    data = np.random.default_rng(seed + 1).standard_normal((seq, hidden)).astype(np.float32)
    return func, params, data


def test_combine_parallel_dense_keeps_values_and_makes_one_dense():
    func, params, data = small_attention()
    opt = optimize(func, params)
    combined = combine_parallel_dense(opt)
    dense = [c for c in calls(combined) if c.op == "nn.dense"]
    # query/key/value -> one (hidden -> 3 hidden) dense; the output dense stays
    assert sorted(c.shape[1] for c in dense) == [32, 96]
    assert sum(c.op == "strided_slice" for c in calls(combined)) == 3
    want = evaluate(Module.from_function(opt), {"x": data}, {})
    got = evaluate(Module.from_function(combined), {"x": data}, {})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_combine_parallel_dense_takes_mixed_precision_branches():
    """to_mixed_precision writes each projection as add(cast(dense(x16, W16) -> float32, 16
    bits), b16): the three still become one dense, its cast and one bias add."""
    from tensorir.graph.passes.mixed_precision import to_mixed_precision

    func, params, data = small_attention(seq=16, hidden=32, heads=2)
    opt = optimize(to_mixed_precision(bind_params(func, params), "float16"), {})
    combined = combine_parallel_dense(opt)
    dense = [c for c in calls(combined) if c.op == "nn.dense"]
    assert sorted(c.shape[1] for c in dense) == [32, 96]
    wide = next(c for c in dense if c.shape[1] == 96)
    assert wide.attrs["out_dtype"] == "float32" and wide.args[1].dtype == "float16"
    want = evaluate(Module.from_function(opt), {"x": data}, {})
    got = evaluate(Module.from_function(combined), {"x": data}, {})
    np.testing.assert_array_equal(got, want)  # the same products, sums and roundings


def test_combine_parallel_dense_leaves_a_lone_dense_and_weight_vars():
    func, params, _ = small_attention()
    opt = optimize(func, params)
    assert combine_parallel_dense(opt, min_branches=4) is opt
    # unbound weights (Vars) are not combined: their values are not known
    unbound = optimize(func, {})
    assert combine_parallel_dense(unbound) is unbound


def test_fuse_layout_producers_moves_head_split_and_merge_into_matmuls():
    func, params, data = small_attention()
    opt = combine_parallel_dense(optimize(func, params))
    before = fuse_ops(opt)
    layout_only = [g for g in before if all(c.op in LAYOUT_OPS for c in g.calls)]
    assert len(layout_only) == 4  # q, k, v head splits and the merge
    after = fuse_layout_producers(opt, before)
    assert not [g for g in after if all(c.op in LAYOUT_OPS for c in g.calls)]
    assert len(after) == len(before) - 4
    ops = [group_ops(g) for g in after]
    bmm = [o for o in ops if "nn.batch_matmul" in o]
    assert len(bmm) == 2 and all(o[0] == "strided_slice" for o in bmm)
    out_dense = [o for o in ops if "nn.dense" in o and o[0] == "reshape"]
    assert len(out_dense) == 1
    # each group still has one output, its last call, and every call is in exactly one group
    assert sorted(id(c) for g in after for c in g.calls) == sorted(id(c) for c in calls(opt))


def test_fuse_layout_producers_keeps_function_outputs_and_shared_values():
    from tensorir.graph import nn, op

    x = op.var("x", (4, 6), "float32")
    w = op.var("w", (5, 6), "float32")
    t = op.reshape(op.transpose(x, (1, 0)), (4, 6))
    # t is read by a dense and by an add: it must stay materialised
    func = Function((x, w), (nn.dense(t, w), op.add(t, t)))
    groups = fuse_ops(func)
    assert fuse_layout_producers(func, groups) is groups
    # a layout group that is a function output stays too
    func2 = Function((x, w), (t, nn.dense(t, w)))
    groups2 = fuse_ops(func2)
    assert fuse_layout_producers(func2, groups2) is groups2


def test_the_split_k_sum_before_a_layer_norm_joins_the_norm():
    """split-K's slices summed with the bias and the residual (an injective group read only
    by the layer norm, as its data) move into the norm's group; a sum also read by another
    group, or a group with a matmul, stays."""
    from tensorir.graph import nn, op

    func, data = small_ffn_output(m=4, n=16, k=64)
    gamma, beta = op.var("g", (16,), "float32"), op.var("b", (16,), "float32")
    split = split_k_dense(func, min_slice=1)
    normed = Function((*split.params, gamma, beta), nn.layer_norm(split.body, gamma, beta))
    groups = fuse_normalization_prologues(normed, fuse_ops(normed))
    # (x's reshape/transpose, then the batch_matmul: fuse_layout_producers joins those)
    assert [group_ops(g)[-1] for g in groups] == ["transpose", "nn.batch_matmul", "nn.layer_norm"]
    assert group_ops(groups[2])[0] == "strided_slice"  # the slices' sum, read in the norm
    assert sorted(id(c) for g in groups for c in g.calls) == sorted(id(c) for c in calls(normed))
    # the residual stream reads the sum too: it stays materialised, in its own group
    ln = nn.layer_norm(split.body, gamma, beta)
    shared = Function((*split.params, gamma, beta), op.add(ln, split.body))
    before = fuse_ops(shared)
    assert fuse_normalization_prologues(shared, before) is before
    # a dense + bias group (a matmul anchor) is not recomputed per read
    plain = Function((*func.params, gamma, beta), nn.layer_norm(func.body, gamma, beta))
    before = fuse_ops(plain)
    assert fuse_normalization_prologues(plain, before) is before


@pytest.mark.parametrize("target,layout_groups", [("cuda", 0), ("llvm", 4)])
def test_partition_fuses_transformer_layout_only_on_gpus(target, layout_groups):
    from autosched.network.partition import partition

    func, params, _ = small_attention()
    _, groups = partition(Module.from_function(bind_params(func, params)), {}, target)
    names = [g.name for g in groups]
    assert sum("batch_matmul" not in n and "dense" not in n and "softmax" not in n
               for n in names) == layout_groups  # fmt: skip


def small_ffn_output(m=8, n=16, k=64, seed=0):
    """``add(add(dense(x, W), b), r)``: BERT's FFN output dense with its residual."""
    from tensorir.graph import nn, op
    from tensorir.graph.ir import Constant

    rng = np.random.default_rng(seed)
    x = op.var("x", (m, k), "float32")
    r = op.var("r", (m, n), "float32")
    w = Constant(rng.standard_normal((n, k)).astype(np.float32))
    b = Constant(rng.standard_normal(n).astype(np.float32))
    func = Function((x, r), op.add(op.add(nn.dense(x, w), b), r))
    data = {"x": rng.standard_normal((m, k)).astype(np.float32),
            "r": rng.standard_normal((m, n)).astype(np.float32)}  # fmt: skip
    return func, data


def test_split_k_dense_keeps_values_and_cuts_k():
    func, data = small_ffn_output()
    split = split_k_dense(func, min_slice=1)
    (bmm,) = [c for c in calls(split) if c.op == "nn.batch_matmul"]
    assert bmm.shape == (4, 8, 16)  # K = 64 = 4 N: four slices of 16
    assert not [c for c in calls(split) if c.op == "nn.dense"]
    want = evaluate(Module.from_function(func), data, {})
    got = evaluate(Module.from_function(split), data, {})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # x's reshape/transpose joins the batch_matmul; the partial sums, bias and residual are one
    # elementwise group
    groups = fuse_layout_producers(split, fuse_ops(split))
    assert [group_ops(g)[-1] for g in groups] == ["nn.batch_matmul", "add"]
    assert group_ops(groups[0])[:2] == ("reshape", "transpose")


def test_split_k_of_a_mixed_precision_dense_accumulates_in_float32():
    """to_mixed_precision's dense reads float16 and sums in float32 (out_dtype): so do its
    slices, and the partial sums stay float32 until the dense's own cast."""
    from tensorir.graph.passes.mixed_precision import to_mixed_precision

    func, data = small_ffn_output(m=16, n=8, k=512)
    mixed = optimize(to_mixed_precision(func, "float16"), {})
    split = split_k_dense(mixed)
    (bmm,) = [c for c in calls(split) if c.op == "nn.batch_matmul"]
    assert bmm.attrs["out_dtype"] == "float32" and bmm.dtype == "float32"
    assert bmm.args[1].dtype == "float16"
    want = evaluate(Module.from_function(mixed), data, {})
    got = evaluate(Module.from_function(split), data, {})
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-2)  # float16 outputs, reassociated


@pytest.mark.parametrize("m,n,k,max_split,min_slice,slices", [
    (8, 16, 64, 8, 1, 4), (8, 16, 64, 2, 1, 2), (8, 16, 24, 8, 1, 1), (512, 16, 64, 8, 1, 1),
    (8, 16, 48, 8, 1, 2),
    (128, 768, 3072, 8, 256, 4),  # BERT's FFN output
    (32, 16, 64, 8, 256, 1),  # K too short for slices of 256: one kernel is enough
    (1, 16, 4096, 8, 256, 1),  # batch 1: the GEMV sketch reduces K across threads
])  # fmt: skip
def test_split_k_dense_only_for_few_rows_and_long_k(m, n, k, max_split, min_slice, slices):
    func, _ = small_ffn_output(m, n, k)
    split = split_k_dense(func, max_split=max_split, min_slice=min_slice)
    bmm = [c for c in calls(split) if c.op == "nn.batch_matmul"]
    assert (bmm[0].shape[0] if bmm else 1) == slices
    if slices == 1:
        assert split is func or not bmm


@pytest.mark.parametrize("n,padded", [(60, 64), (1000, 1008), (10, 10)])
def test_split_k_dense_pads_n_to_whole_fragments_where_cheap(n, padded):
    """A classifier's N = 1000 is padded with zero weights to 1008 (63 tensor-core fragments),
    and the sum reads only the real columns; N = 10 would be mostly padding and stays."""
    func, data = small_ffn_output(m=8, n=n, k=8 * n)
    split = split_k_dense(func, min_slice=1)
    (bmm,) = [c for c in calls(split) if c.op == "nn.batch_matmul"]
    assert bmm.shape == (8, 8, padded)  # 8 slices of n
    padding = bmm.args[1].value[:, n:, :]
    assert padding.shape[1] == padded - n and not padding.any()
    want = evaluate(Module.from_function(func), data, {})
    got = evaluate(Module.from_function(split), data, {})
    assert got.shape == want.shape == (8, n)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
