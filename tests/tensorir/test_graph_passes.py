"""Graph passes keep the network's numbers and produce the forms fusion expects."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from tensorir.graph import (
    Call,
    Constant,
    Function,
    bind_params,
    calls,
    evaluate,
    get_network,
    nn,
    op,
)
from tensorir.graph.passes import (
    alter_op_layout_winograd,
    canonicalize_ops,
    convert_layout,
    count_by_signature,
    fold_constant,
    fold_scale_axis,
    fuse_ops,
    optimize,
    simplify_inference,
)
from tensorir.ops.winograd import winograd_weight_transform_np

WINO = "nn.contrib_conv2d_winograd_without_weight_transform"


def _logits(func: Function) -> Function:
    # Compare before the softmax: probabilities near 1e-3 would hide relative errors.
    assert func.body.op == "nn.softmax"
    return Function(func.params, func.body.args[0], func.name)


@cache
def _net(name, layout="NHWC"):
    mod, params, ishape, _ = get_network(name, batch_size=1, layout=layout)
    x = np.random.default_rng(7).standard_normal(ishape).astype("float32")
    f = _logits(mod["main"])
    return f, params, x, evaluate(f, {"data": x}, params)


def _close(func, x, ref, rtol=1e-4):
    out = evaluate(func, {"data": x})
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=rtol * np.abs(ref).max())


def _ops(func):
    return [c.op for c in calls(func)]


@cache
def _bound(name, layout="NHWC"):
    f, params, _, _ = _net(name, layout)
    return bind_params(f, params)


@pytest.mark.parametrize("name", ["resnet-18", "mobilenet"])
def test_simplify_inference_keeps_numbers(name):
    f, params, x, ref = _net(name)
    g = simplify_inference(_bound(name))
    assert "nn.batch_norm" not in _ops(g)
    scales = [c.args[1] for c in calls(g) if c.op == "multiply"]
    assert scales and all(isinstance(s, Constant) for s in scales)
    # (1, 1, 1, C): the fused group reads it as placeholder[ax0, 0, 0, ax3], as in TVM's tasks
    assert all(s.shape[:3] == (1, 1, 1) and s.shape[3] > 1 for s in scales)
    _close(g, x, ref)


def test_simplify_inference_without_bound_weights():
    f, params, x, ref = _net("resnet-18")
    g = simplify_inference(f)
    assert "nn.batch_norm" not in _ops(g) and "sqrt" in _ops(g)
    out = evaluate(g, {"data": x}, params)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_fold_constant_folds_every_constant_call():
    f, _, x, ref = _net("resnet-18")
    g = fold_constant(simplify_inference(_bound("resnet-18")))
    for c in calls(g):
        assert not all(isinstance(a, Constant) for a in c.args), c.op
    # every BN (bn_data, bn0, 2 per unit, the last bn1: 19) is now multiply + add of consts
    assert _ops(g).count("multiply") == 19 and "sqrt" not in _ops(g)
    _close(g, x, ref)


def test_fold_constant_precomputes_the_winograd_weight():
    x = op.var("x", (1, 8, 8, 4))
    w = np.random.default_rng(0).standard_normal((3, 3, 4, 5)).astype("float32")
    f = Function((x,), nn.conv2d(x, Constant(w), padding=1, data_layout="NHWC"))
    g = fold_constant(alter_op_layout_winograd(f))
    (c,) = calls(g)
    assert c.op == WINO and c.attrs["tile_size"] == 4  # H = 8 is a multiple of 8
    np.testing.assert_allclose(c.args[1].value, winograd_weight_transform_np(w, 4), rtol=1e-6)
    xv = np.random.default_rng(1).standard_normal((1, 8, 8, 4)).astype("float32")
    ref = evaluate(f, {"x": xv})
    np.testing.assert_allclose(evaluate(g, {"x": xv}), ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name,left", [("resnet-18", 1), ("mobilenet", 0)])
def test_fold_scale_axis_removes_bn_multiplies(name, left):
    f, _, x, ref = _net(name)
    g = fold_scale_axis(fold_constant(simplify_inference(_bound(name))))
    # resnet-18 keeps one: the last BN, between the final residual add and global pooling.
    assert _ops(g).count("multiply") == left
    _close(g, x, ref)


def _bn_like(y, rng, positive=True):
    lo = 0.5 if positive else -1.0
    s = Constant(rng.uniform(lo, 2.0, (1, 1, 1, y.shape[3])).astype("float32"))
    b = Constant(rng.standard_normal((1, 1, 1, y.shape[3])).astype("float32"))
    return op.add(op.multiply(y, s), b)


def test_fold_scale_axis_backward_and_forward_on_a_small_graph():
    # conv -> bn -> relu -> bn -> relu -> conv: the first multiply folds backward into conv1's
    # output channels, the second (after a relu, so not backward) forward into conv2's inputs.
    rng = np.random.default_rng(3)
    x = op.var("x", (1, 6, 6, 3))
    w1 = Constant(rng.standard_normal((3, 3, 3, 4)).astype("float32"))
    w2 = Constant(rng.standard_normal((1, 1, 4, 2)).astype("float32"))
    y = nn.relu(_bn_like(nn.conv2d(x, w1, data_layout="NHWC"), rng))
    y = nn.relu(_bn_like(y, rng))
    f = Function((x,), nn.conv2d(y, w2, data_layout="NHWC"))
    g = fold_scale_axis(f)
    assert _ops(g) == ["nn.conv2d", "add", "nn.relu", "add", "nn.relu", "nn.conv2d"]
    xv = rng.standard_normal(x.shape).astype("float32")
    np.testing.assert_allclose(evaluate(g, {"x": xv}), evaluate(f, {"x": xv}), rtol=1e-5)


def test_fold_scale_axis_forward_needs_positive_scales_and_conv_only_users():
    x = op.var("x", (1, 6, 6, 4))
    w = Constant(np.random.default_rng(0).standard_normal((1, 1, 4, 2)).astype("float32"))
    xv = np.random.default_rng(2).standard_normal(x.shape).astype("float32")
    for s, extra_output in (([1.0, -1.0, 2.0, 1.0], False), ([1.0, 1.0, 2.0, 1.0], True)):
        m = nn.relu(op.multiply(x, Constant(np.asarray(s, "float32").reshape(1, 1, 1, 4))))
        conv = nn.conv2d(m, w, data_layout="NHWC")
        f = Function((x,), (conv, m) if extra_output else (conv,))
        g = fold_scale_axis(f)
        assert "multiply" in _ops(g)  # a negative scale, or the relu's value is an output
        for a, b in zip(evaluate(g, {"x": xv}), evaluate(f, {"x": xv})):
            np.testing.assert_allclose(a, b, rtol=1e-5)
    f = Function((x,), nn.conv2d(nn.relu(op.multiply(x, 2.0)), w, data_layout="NHWC"))
    assert "multiply" not in _ops(fold_scale_axis(f))  # the control: a positive scalar folds
    # without a relu in between the sign does not matter: conv(s * x, W) = conv(x, W * s)
    neg = Constant(np.asarray([1.0, -1.0, 2.0, -0.5], "float32").reshape(1, 1, 1, 4))
    f = Function((x,), nn.conv2d(op.multiply(x, neg), w, data_layout="NHWC"))
    g = fold_scale_axis(f)
    assert _ops(g) == ["nn.conv2d"]
    np.testing.assert_allclose(evaluate(g, {"x": xv}), evaluate(f, {"x": xv}), rtol=1e-5)


def test_fold_scale_axis_into_depthwise_and_dense():
    x = op.var("x", (1, 5, 5, 3))
    rng = np.random.default_rng(4)
    dw = Constant(rng.standard_normal((3, 3, 3, 1)).astype("float32"))
    s = Constant(rng.uniform(0.5, 2, (1, 1, 1, 3)).astype("float32"))
    y = op.multiply(nn.conv2d(x, dw, padding=1, groups=3, data_layout="NHWC",
                              kernel_layout="HWOI"), s)  # fmt: skip
    flat = nn.batch_flatten(y)
    wd = Constant(rng.standard_normal((4, 75)).astype("float32"))
    out = op.multiply(nn.dense(flat, wd), Constant(rng.uniform(0.5, 2, (4,)).astype("float32")))
    f = Function((x,), out)
    g = fold_scale_axis(f)
    assert "multiply" not in _ops(g)
    xv = rng.standard_normal(x.shape).astype("float32")
    np.testing.assert_allclose(evaluate(g, {"x": xv}), evaluate(f, {"x": xv}), rtol=1e-5)


def test_canonicalize_ops_turns_bias_add_into_add():
    x = op.var("x", (1, 3, 4, 4))
    b = op.var("b", (3,))
    f = Function((x, b), nn.bias_add(x, b, axis=1))
    g = canonicalize_ops(f)
    assert _ops(g) == ["reshape", "add"]
    xv = np.random.default_rng(0).standard_normal(x.shape).astype("float32")
    bv = np.asarray([0.5, -1.0, 2.0], "float32")
    np.testing.assert_allclose(evaluate(g, {"x": xv, "b": bv}), evaluate(f, {"x": xv, "b": bv}))


def test_alter_winograd_on_resnet18():
    f, _, x, ref = _net("resnet-18")
    g = fold_constant(alter_op_layout_winograd(_bound("resnet-18")))
    ops = _ops(g)
    # 16 3x3 convs in the units, less the stride-2 first convs of stages 2-4 -> 13; left:
    # conv0 (7x7), those 3 and the 4 1x1 shortcuts
    assert ops.count(WINO) == 13 and ops.count("nn.conv2d") == 8
    tiles = sorted({(c.args[0].shape[1], c.attrs["tile_size"]) for c in calls(g) if c.op == WINO})
    assert tiles == [(7, 2), (14, 2), (28, 2), (56, 4)]  # as the seed's tasks (alpha 4 / 6)
    _close(g, x, ref, rtol=1e-3)


@pytest.mark.parametrize("name", ["resnet-18", "mobilenet"])
def test_optimize_keeps_numbers(name):
    f, params, x, ref = _net(name)
    g = optimize(f, params)
    assert [v.name for v in g.params] == ["data"]
    assert "nn.batch_norm" not in _ops(g) and "nn.bias_add" not in _ops(g)
    _close(g, x, ref, rtol=1e-3)


def test_optimize_rejects_an_unknown_layout():
    f, params, _, _ = _net("mobilenet")
    with pytest.raises(ValueError, match="layout"):
        optimize(f, params, layout="NCWH")


# --- convert_layout ---------------------------------------------------------------------------


def test_convert_layout_resnet18_nchw():
    f, params, x, ref = _net("resnet-18", "NCHW")
    g = convert_layout(_bound("resnet-18", "NCHW"))
    convs = [c for c in calls(g) if c.op == "nn.conv2d"]
    assert convs and all(c.attrs["data_layout"] == "NHWC" for c in convs)
    assert all(c.attrs["kernel_layout"] == "HWIO" for c in convs)
    pools = [c for c in calls(g) if "pool" in c.op]
    assert all(c.attrs["layout"] == "NHWC" for c in pools)
    # one transform in (after bn_data, which follows the NCHW input), one out (before flatten)
    assert _ops(g).count("layout_transform") == 2
    _close(g, x, ref)


def test_optimize_nchw_resnet18_gives_the_nhwc_tasks():
    f, params, x, ref = _net("resnet-18", "NCHW")
    g = optimize(f, params)
    _close(g, x, ref, rtol=1e-3)
    tasks = count_by_signature(fuse_ops(g))
    assert len(tasks) == 23 and sum(n for _, n in tasks) == 24  # no softmax in _logits
    nhwc = count_by_signature(fuse_ops(optimize(*_net("resnet-18")[:2])))
    assert sorted(n for _, n in tasks) == sorted(n for _, n in nhwc)


def _small_nchw():
    rng = np.random.default_rng(5)
    x = op.var("data", (2, 3, 9, 9))

    def w(*shape):
        return Constant(rng.standard_normal(shape).astype("float32") * 0.3)

    a = nn.relu(nn.bias_add(nn.conv2d(x, w(4, 3, 3, 3), padding=1), w(4), axis=1))
    d = nn.conv2d(a, w(4, 1, 3, 3), padding=1, groups=4)  # depthwise: OIHW -> HWOI
    bn = nn.batch_norm(d, *(Constant(rng.uniform(0.8, 1.2, 4).astype("float32"))
                            for _ in range(4)), axis=1)  # fmt: skip
    b = op.multiply(bn, w(4, 1, 1))  # a (C, 1, 1) constant broadcast in NCHW terms
    c = op.concatenate([a, b, op.sigmoid(x)], axis=1)
    p = nn.pad(c, ((0, 0), (0, 0), (1, 0), (0, 1)))
    q = nn.avg_pool2d(p, 2, 2, count_include_pad=True)
    s = nn.softmax(q, axis=1)
    g = nn.global_max_pool2d(s)
    out = nn.dense(nn.batch_flatten(g), w(5, 11))
    return Function((x,), (out, q)), rng.standard_normal(x.shape).astype("float32")


def test_convert_layout_small_graph_with_concat_pad_flatten():
    f, xv = _small_nchw()
    g = convert_layout(f)
    by_op = {c.op: c for c in calls(g)}
    assert by_op["concatenate"].attrs["axis"] == 3
    assert by_op["nn.pad"].attrs["pad_width"] == ((0, 0), (1, 0), (0, 1), (0, 0))
    assert by_op["nn.softmax"].attrs["axis"] == 3
    assert by_op["nn.batch_norm"].attrs["axis"] == 3
    assert by_op["nn.bias_add"].attrs["axis"] == 3
    assert by_op["nn.avg_pool2d"].attrs["layout"] == "NHWC"
    kls = sorted(c.attrs["kernel_layout"] for c in calls(g) if c.op == "nn.conv2d")
    assert kls == ["HWIO", "HWOI"]
    # in: the input (to the conv) and sigmoid(x) (follows its NCHW input, crosses at the
    # concat); out: q (a function output) and the global pool's value (to batch_flatten).
    lt = [(c.args[0].shape, c.attrs["dst_layout"]) for c in calls(g) if c.op == "layout_transform"]
    want = [((2, 3, 9, 9), "NHWC")] * 2 + [((2, 1, 1, 11), "NCHW"), ((2, 5, 5, 11), "NCHW")]
    assert sorted(lt) == sorted(want)
    for a, b in zip(evaluate(g, {"data": xv}), evaluate(f, {"data": xv})):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert g.outputs[1].shape == f.outputs[1].shape == (2, 11, 5, 5)  # NCHW kept


def test_convert_layout_3d():
    rng = np.random.default_rng(6)
    x = op.var("data", (1, 2, 4, 6, 6))
    w = Constant(rng.standard_normal((3, 2, 3, 3, 3)).astype("float32"))
    y = nn.relu(nn.conv3d(x, w, padding=1))
    f = Function((x,), nn.batch_flatten(nn.max_pool3d(y, 2, 2)))
    g = convert_layout(f)
    (conv,) = [c for c in calls(g) if c.op == "nn.conv3d"]
    assert conv.attrs["data_layout"] == "NDHWC" and conv.attrs["kernel_layout"] == "DHWIO"
    assert isinstance(conv.args[1], Constant) and conv.args[1].shape == (3, 3, 3, 2, 3)
    xv = rng.standard_normal(x.shape).astype("float32")
    np.testing.assert_allclose(evaluate(g, {"data": xv}), evaluate(f, {"data": xv}), rtol=1e-5)


def test_convert_layout_leaves_nhwc_alone():
    f, _, _, _ = _net("mobilenet")
    g = convert_layout(f)
    assert "layout_transform" not in _ops(g)
    assert all(isinstance(c, Call) for c in calls(g))
