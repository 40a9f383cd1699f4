"""fuse_ops: Relay FuseOps rules on small graphs, and golden task lists for whole networks."""

from __future__ import annotations

from collections import Counter
from functools import cache

import numpy as np
import pytest

from tensorir.graph import Call, Function, get_network, make_call, nn, op
from tensorir.graph.passes import (
    MAX_FUSED_OPS,
    count_by_signature,
    fuse_ops,
    group_ops,
    group_signature,
    optimize,
    print_groups,
)
from tensorir.graph.shapes import BROADCAST, INJECTIVE, OPAQUE, OUT_ELEMWISE_FUSABLE

WINO = "nn.contrib_conv2d_winograd_without_weight_transform"
CONV = "nn.conv2d"


def _ops(groups):
    return [group_ops(g) for g in groups]


def _conv(x, cout, k=3, name="w", **kw):
    w = op.var(name, (k, k, x.shape[3], cout))
    return nn.conv2d(x, w, padding=k // 2, data_layout="NHWC", **kw)


def _check_partition(func, groups):
    # Every call in exactly one group, groups in topological order, one output each.
    seen = [c for g in groups for c in g.calls]
    assert len(seen) == len(set(seen))
    assert set(seen) == {n for n in _all_calls(func)}
    done = set()
    for g in groups:
        for a in g.inputs:
            if isinstance(a, Call):
                assert a in done  # produced by an earlier group, as its output
        done.add(g.output)


def _all_calls(func):
    from tensorir.graph import calls

    return calls(func)


def test_conv_absorbs_elemwise_chain():
    x = op.var("x", (1, 8, 8, 4))
    y = _conv(x, 4)
    b = op.const(np.full((1, 1, 1, 4), 0.5, "float32"))
    z = nn.relu(op.add(op.multiply(y, op.const(np.ones((1, 1, 1, 4), "float32"))), b))
    f = Function(tuple(v for v in (x, y.args[1])), z)
    groups = fuse_ops(f)
    assert _ops(groups) == [(CONV, "multiply", "add", "nn.relu")]
    g = groups[0]
    assert g.anchor is y and g.output is z and g.pattern == OUT_ELEMWISE_FUSABLE
    assert g.inputs[:2] == (x, y.args[1])
    _check_partition(f, groups)


def test_value_with_two_users_ends_the_group():
    x = op.var("x", (1, 8, 8, 4))
    y = op.add(_conv(x, 4), op.const(1.0))
    # y feeds relu and softmax, which meet nowhere: no post-dominator, the group ends at y.
    f = Function((x, y.args[0].args[1]), (nn.relu(y), nn.softmax(y)))
    groups = fuse_ops(f)
    assert _ops(groups) == [(CONV, "add"), ("nn.relu",), ("nn.softmax",)]
    assert groups[1].inputs == (y,)
    _check_partition(f, groups)


def test_elemwise_diamond_is_one_group():
    # y feeds relu and the final add, which post-dominates it along elemwise paths: Relay
    # fuses the whole diamond (one output, the final add).
    x = op.var("x", (1, 8, 8, 4))
    y = op.add(_conv(x, 4), op.const(1.0))
    f = Function((x, y.args[0].args[1]), op.add(nn.relu(y), y))
    groups = fuse_ops(f)
    assert _ops(groups) == [(CONV, "add", "nn.relu", "add")]
    _check_partition(f, groups)


def test_residual_add_post_dominates_both_branches():
    # conv -> add(conv, x): the add post-dominates the conv, x comes from outside.
    x = op.var("x", (1, 8, 8, 4))
    c1 = _conv(x, 4, name="w1")
    c2 = _conv(nn.relu(c1), 4, name="w2")
    out = nn.relu(op.add(c2, c1))
    f = Function((x, c1.args[1], c2.args[1]), out)
    groups = fuse_ops(f)
    # c1 has two users (relu, the residual add): its group is the conv alone.
    assert _ops(groups) == [(CONV,), ("nn.relu",), (CONV, "add", "nn.relu")]
    _check_partition(f, groups)


def test_elemwise_fuses_into_injective_and_injectives_chain():
    x = op.var("x", (2, 3, 4, 5))
    y = op.reshape(op.transpose(nn.relu(op.exp(x)), (0, 2, 1, 3)), (2, -1))
    f = Function((x,), nn.softmax(y))
    groups = fuse_ops(f)
    assert _ops(groups) == [("exp", "nn.relu", "transpose", "reshape"), ("nn.softmax",)]
    assert groups[0].pattern == INJECTIVE and groups[0].anchor is None
    assert groups[1].pattern == OPAQUE and groups[1].anchor is groups[1].output


def test_elemwise_does_not_fuse_into_a_following_conv_and_injective_not_into_conv():
    x = op.var("x", (1, 8, 8, 4))
    p = nn.pad(nn.relu(x), ((0, 0), (1, 1), (1, 1), (0, 0)))
    y = _conv(p, 4, k=3)
    f = Function((x, y.args[1]), y)
    groups = fuse_ops(f)
    assert _ops(groups) == [("nn.relu", "nn.pad"), (CONV,)]


def test_conv_does_not_absorb_injective_consumer():
    x = op.var("x", (1, 4, 4, 2))
    y = nn.relu(_conv(x, 2))
    f = Function((x, y.args[0].args[1]), nn.batch_flatten(y))
    assert _ops(fuse_ops(f)) == [(CONV, "nn.relu"), ("nn.batch_flatten",)]


def test_concat_takes_elemwise_producers_not_conv_groups():
    x = op.var("x", (1, 4, 4, 2))
    a = nn.relu(_conv(x, 2, name="wa"))
    b = op.sigmoid(x)
    f = Function((x, a.args[0].args[1]), op.concatenate([a, b], axis=3))
    groups = fuse_ops(f)
    assert _ops(groups) == [(CONV, "nn.relu"), ("sigmoid", "concatenate")]


def test_function_output_is_never_fused_over():
    x = op.var("x", (1, 4, 4, 2))
    c = _conv(x, 2)
    r = nn.relu(c)
    f = Function((x, c.args[1]), (c, r))
    assert _ops(fuse_ops(f)) == [(CONV,), ("nn.relu",)]


def test_broadcast_with_bigger_output_is_not_elemwise_for_the_anchor():
    # add(conv (1,4,4,2), y (3,4,4,2)) broadcasts the conv's value: a broadcast edge, so the
    # conv (needs an elemwise path) does not absorb it; the add stays on its own.
    x = op.var("x", (1, 4, 4, 2))
    c = _conv(x, 2)
    y = op.var("y", (3, 4, 4, 2))
    out = op.add(c, y)
    f = Function((x, c.args[1], y), out)
    groups = fuse_ops(f)
    assert _ops(groups) == [(CONV,), ("add",)]
    assert groups[1].pattern == BROADCAST


def test_groups_stop_at_max_fused_ops():
    x = op.var("x", (4,))
    y = x
    for _ in range(300):
        y = nn.relu(y)
    groups = fuse_ops(Function((x,), y))
    assert [len(g.calls) for g in groups] == [MAX_FUSED_OPS, 300 - MAX_FUSED_OPS]
    assert groups[1].inputs == (groups[0].output,)


def test_unknown_op_pattern_is_named():
    x = op.var("x", (2, 2))
    bogus = Call("my.custom_op", (x,), nn.relu(x).attrs, (2, 2), "float32")
    with pytest.raises(ValueError, match="my.custom_op"):
        fuse_ops(Function((x,), bogus))


def test_signature_sees_input_sharing_attrs_and_scalars():
    x = op.var("x", (2, 3))
    y = op.var("y", (2, 3))
    f1 = Function((x, y), op.add(op.exp(x), y))
    f2 = Function((x,), op.add(op.exp(x), x))  # same ops, but one input used twice
    s1 = group_signature(fuse_ops(f1)[0])
    s2 = group_signature(fuse_ops(f2)[0])
    assert s1 != s2
    f3 = Function((x, y), op.add(op.exp(y), x))  # renamed inputs: same structure
    assert group_signature(fuse_ops(f3)[0]) == s1
    c1 = group_signature(fuse_ops(Function((x,), op.multiply(x, 2.0)))[0])
    c2 = group_signature(fuse_ops(Function((x,), op.multiply(x, 3.0)))[0])
    assert c1 != c2
    p1 = make_call("clip", (x,), {"a_min": 0.0, "a_max": 6.0})
    p2 = make_call("clip", (x,), {"a_min": 0.0, "a_max": 1.0})
    s_p1 = group_signature(fuse_ops(Function((x,), p1))[0])
    assert s_p1 != group_signature(fuse_ops(Function((x,), p2))[0])


def test_print_groups_is_readable():
    x = op.var("x", (1, 4, 4, 2))
    y = nn.relu(_conv(x, 2))
    text = print_groups(fuse_ops(Function((x, y.args[0].args[1]), nn.softmax(y))))
    assert "group0 [out-elemwise-fusable] (%x, %w)" in text
    assert "group1 [opaque] (group0)" in text
    assert "nn.conv2d(%x, %w)" in text


# --- golden task lists ------------------------------------------------------------------------


@cache
def _optimized(name, layout="NHWC"):
    mod, params, _, _ = get_network(name, batch_size=1, layout=layout)
    return optimize(mod, params)


def _tasks(func, with_output=False):
    """[(ops, data shape, weight shape or None, [output shape,] count)] of the groups with a
    reduction, one per distinct signature."""
    out = []
    for g, n in count_by_signature(fuse_ops(func)):
        w = g.inputs[1].shape if len(g.inputs) > 1 and g.anchor.op != "nn.max_pool2d" else None
        extra = (g.output.shape,) if with_output else ()
        out.append((group_ops(g), g.inputs[0].shape, w, *extra, n))
    return out


# The 24 tasks of the seed (tune_network_cuda, resnet-18 NHWC batch 1), by task number:
# op sequence as our ops, the data and weight placeholders, and the weight (use count).
# TVM's te names map: Conv2dOutput -> nn.conv2d, conv2d_winograd -> WINO, tensor (pool) ->
# pool op, T_dense -> nn.dense, T_add/T_multiply/T_relu -> add/multiply/nn.relu.
R = "nn.relu"
RESNET18_SEED = [
    (("nn.softmax",), (1, 1000), None, 1),  # 0
    (("nn.dense", "add"), (1, 512), (1000, 512), 1),  # 1
    (("nn.global_avg_pool2d",), (1, 7, 7, 512), None, 1),  # 2
    ((WINO, "add", "multiply", "add", R), (1, 7, 7, 512), (4, 4, 512, 512), 1),  # 3
    ((WINO, "add", R), (1, 7, 7, 512), (4, 4, 512, 512), 1),  # 4
    ((WINO, "add"), (1, 7, 7, 512), (4, 4, 512, 512), 1),  # 5
    ((CONV, "add", R), (1, 14, 14, 256), (3, 3, 256, 512), 1),  # 6
    ((WINO, "add", "add", R), (1, 14, 14, 256), (4, 4, 256, 256), 1),  # 7
    ((WINO, "add", R), (1, 14, 14, 256), (4, 4, 256, 256), 1),  # 8
    ((WINO, "add"), (1, 14, 14, 256), (4, 4, 256, 256), 1),  # 9
    ((CONV, "add", R), (1, 28, 28, 128), (3, 3, 128, 256), 1),  # 10
    ((WINO, "add", "add", R), (1, 28, 28, 128), (4, 4, 128, 128), 1),  # 11
    ((WINO, "add", R), (1, 28, 28, 128), (4, 4, 128, 128), 1),  # 12
    ((WINO, "add"), (1, 28, 28, 128), (4, 4, 128, 128), 1),  # 13
    ((CONV, "add", R), (1, 56, 56, 64), (3, 3, 64, 128), 1),  # 14
    ((WINO, "add", "add", R), (1, 56, 56, 64), (6, 6, 64, 64), 1),  # 15
    ((WINO, "add", R), (1, 56, 56, 64), (6, 6, 64, 64), 2),  # 16
    ((WINO, "add"), (1, 56, 56, 64), (6, 6, 64, 64), 1),  # 17
    (("nn.max_pool2d", "add", R), (1, 112, 112, 64), None, 1),  # 18
    ((CONV, "add", R), (1, 224, 224, 3), (7, 7, 3, 64), 1),  # 19
    ((CONV,), (1, 56, 56, 64), (1, 1, 64, 64), 1),  # 20
    ((CONV,), (1, 56, 56, 64), (1, 1, 64, 128), 1),  # 21
    ((CONV,), (1, 28, 28, 128), (1, 1, 128, 256), 1),  # 22
    ((CONV,), (1, 14, 14, 256), (1, 1, 256, 512), 1),  # 23
]


def _same_tasks(got, want):
    key = lambda t: repr(t)  # noqa: E731 - a sort key for heterogeneous tuples
    assert sorted(got, key=key) == sorted(want, key=key)


def test_resnet18_nhwc_matches_the_seed_tasks():
    got = _tasks(_optimized("resnet-18"))
    assert len(got) == 24
    assert sum(t[3] for t in got) == 25
    _same_tasks(got, RESNET18_SEED)


def _mobilenet_tasks():
    # TVM (tune_network_x86/cuda, mobilenet NHWC): 22 tasks, weights sum to 30. Every conv
    # (depthwise HWOI or not) keeps its BN as add + relu after backward scale folding.
    tasks = [((CONV, "add", R), (1, 224, 224, 3), (3, 3, 3, 32), (1, 112, 112, 32), 1)]
    blocks = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1),
              (256, 512, 2)] + [(512, 512, 1)] * 5 + [(512, 1024, 2), (1024, 1024, 1)]  # fmt: skip
    hw = 112
    seen = Counter()
    for dw, pw, stride in blocks:
        out = hw // stride
        seen[((CONV, "add", R), (1, hw, hw, dw), (3, 3, dw, 1), (1, out, out, dw))] += 1
        seen[((CONV, "add", R), (1, out, out, dw), (1, 1, dw, pw), (1, out, out, pw))] += 1
        hw = out
    tasks += [(*k, n) for k, n in seen.items()]
    tasks += [
        (("nn.global_avg_pool2d",), (1, 7, 7, 1024), None, (1, 1, 1, 1024), 1),
        (("nn.dense", "add"), (1, 1024), (1000, 1024), (1, 1000), 1),
        (("nn.softmax",), (1, 1000), None, (1, 1000), 1),
    ]
    return tasks


def test_mobilenet_nhwc_matches_tvm_task_count():
    got = _tasks(_optimized("mobilenet"), with_output=True)
    assert len(got) == 22
    assert sum(t[-1] for t in got) == 30
    _same_tasks(got, _mobilenet_tasks())


def test_resnet50_nhwc_tasks():
    # Ours: 29 distinct tasks, weights sum 57 (53 convs + max pool + global pool + dense +
    # softmax). The bottleneck's 3x3 convs (stride 1 in relay.testing) become winograd.
    got = _tasks(_optimized("resnet-50"))
    assert len(got) == 29
    assert sum(t[3] for t in got) == 57
    wino = [t for t in got if t[0][0] == WINO]
    assert sorted((t[1][1], t[3]) for t in wino) == [(7, 3), (14, 6), (28, 4), (56, 3)]
    assert all(t[0] == (WINO, "add", R) for t in wino)
    last = [t for t in got if "multiply" in t[0]]
    assert last == [((CONV, "add", "multiply", "add", R), (1, 7, 7, 512), (1, 1, 512, 2048), 1)]


# The workload keys of the seed tune_network_mali (mobilenet NHWC batch 1): each task's
# placeholder shapes then its output shape, in the seed's task order. Task 16 is the first
# conv: relay.testing's mobilenet normalises it on axis 1 even in NHWC (shape [1, 112, 1, 1]
# scale and shift that cannot fold into the conv); our zoo uses the channel axis (see
# docs/graph-ir.md), so that one task differs: conv + add(1, 1, 1, 32) + relu.
MOBILENET_SEED_KEYS = [
    [[1, 7, 7, 1024], [1, 1, 1024, 1024], [1, 1, 1, 1024], [1, 7, 7, 1024]],
    [[1, 14, 14, 256], [1, 1, 256, 512], [1, 1, 1, 512], [1, 14, 14, 512]],
    [[1, 28, 28, 256], [3, 3, 256, 1], [1, 1, 1, 256], [1, 28, 28, 256]],
    [[1, 28, 28, 128], [1, 1, 128, 256], [1, 1, 1, 256], [1, 28, 28, 256]],
    [[1, 7, 7, 512], [1, 1, 512, 1024], [1, 1, 1, 1024], [1, 7, 7, 1024]],
    [[1, 7, 7, 1024], [1, 1, 1, 1024]],
    [[1, 1000], [1, 1000]],
    [[1, 56, 56, 128], [1, 1, 128, 128], [1, 1, 1, 128], [1, 56, 56, 128]],
    [[1, 7, 7, 1024], [3, 3, 1024, 1], [1, 1, 1, 1024], [1, 7, 7, 1024]],
    [[1, 56, 56, 64], [1, 1, 64, 128], [1, 1, 1, 128], [1, 56, 56, 128]],
    [[1, 14, 14, 512], [3, 3, 512, 1], [1, 1, 1, 512], [1, 7, 7, 512]],
    [[1, 28, 28, 256], [1, 1, 256, 256], [1, 1, 1, 256], [1, 28, 28, 256]],
    [[1, 56, 56, 128], [3, 3, 128, 1], [1, 1, 1, 128], [1, 56, 56, 128]],
    [[1, 112, 112, 64], [3, 3, 64, 1], [1, 1, 1, 64], [1, 56, 56, 64]],
    [[1, 112, 112, 32], [3, 3, 32, 1], [1, 1, 1, 32], [1, 112, 112, 32]],
    [[1, 56, 56, 128], [3, 3, 128, 1], [1, 1, 1, 128], [1, 28, 28, 128]],
    [[1, 224, 224, 3], [3, 3, 3, 32], [1, 112, 1, 1], [1, 112, 1, 1], [1, 112, 112, 32]],
    [[1, 14, 14, 512], [1, 1, 512, 512], [1, 1, 1, 512], [1, 14, 14, 512]],
    [[1, 1024], [1000, 1024], [1, 1000], [1, 1000]],
    [[1, 14, 14, 512], [3, 3, 512, 1], [1, 1, 1, 512], [1, 14, 14, 512]],
    [[1, 28, 28, 256], [3, 3, 256, 1], [1, 1, 1, 256], [1, 14, 14, 256]],
    [[1, 112, 112, 32], [1, 1, 32, 64], [1, 1, 1, 64], [1, 112, 112, 64]],
]


def test_mobilenet_placeholders_match_the_mali_seed():
    ours = sorted(
        [list(a.shape) for a in g.inputs] + [list(g.output.shape)]
        for g, _ in count_by_signature(fuse_ops(_optimized("mobilenet")))
    )
    want = [k for k in MOBILENET_SEED_KEYS if [1, 112, 1, 1] not in k]
    want += [[[1, 224, 224, 3], [3, 3, 3, 32], [1, 1, 1, 32], [1, 112, 112, 32]]]
    # TVM's dense bias reads [1, 1000] (bias_add canonicalised with an expand_dims in that
    # TVM version); the resnet-18 seed (newer) shows [1000], which is what we produce.
    want = [[[1000] if s == [1, 1000] and k[0] == [1, 1024] and i == 2 else s
             for i, s in enumerate(k)] for k in want]  # fmt: skip
    assert ours == sorted(want)
