"""Operator-library DAGs compiled through the real LLVM path (default schedule) vs numpy."""

import numpy as np
import pytest

import autosched as ansor
from tensorir import ops
from tensorir.interp import eval_dag


def _conv_nhwc(x, k, pad, stride=1):
    x = np.pad(x.astype(np.float64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    kh, kw = k.shape[:2]
    oh, ow = (x.shape[1] - kh) // stride + 1, (x.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], oh, ow, k.shape[3]))
    for a in range(kh):
        for b in range(kw):
            win = x[:, a : a + stride * oh : stride, b : b + stride * ow : stride, :]
            out += np.einsum("nhwc,cf->nhwf", win, k[a, b].astype(np.float64))
    return out


def _build_and_run(tensors, arrays):
    dag = ansor.ComputeDAG(tensors)
    outs = [np.full(t.shape, np.nan, t.dtype) for t in dag.output_tensors]
    ansor.build(dag.get_init_state(), target="llvm")(*arrays, *outs)
    return dag, outs


def test_conv2d_nhwc_bias_relu_builds_and_matches_numpy():
    rng = np.random.default_rng(0)
    scope = ops.NameScope()
    x = scope.placeholder((1, 9, 9, 4))
    k = scope.placeholder((3, 3, 4, 8))
    b = scope.placeholder((1, 1, 1, 8))
    conv = ops.compute_op(
        "nn.conv2d",
        [x, k],
        {
            "strides": (2, 2),
            "padding": (1, 1, 1, 1),
            "data_layout": "NHWC",
            "kernel_layout": "HWIO",
        },
        name_scope=scope,
    )
    out = ops.compute_op(
        "nn.relu", [ops.compute_op("add", [conv, b], name_scope=scope)], name_scope=scope
    )
    arrays = [rng.uniform(-1, 1, t.shape).astype("float32") for t in (x, k, b)]
    dag, (got,) = _build_and_run([x, k, b, out], arrays)
    ref = np.maximum(_conv_nhwc(arrays[0], arrays[1], 1, 2) + arrays[2], 0)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    assert (got == 0).any() and (got > 0).any()


@pytest.mark.parametrize("tile,h", [(2, 7), (4, 8)])
def test_winograd_builds_and_matches_numpy(tile, h):
    rng = np.random.default_rng(tile)
    scope = ops.NameScope()
    x = scope.placeholder((1, h, h, 4))
    tw = scope.placeholder((tile + 2, tile + 2, 4, 6))
    out = ops.compute_op(
        "nn.contrib_conv2d_winograd_without_weight_transform",
        [x, tw],
        {"tile_size": tile, "padding": (1, 1, 1, 1)},
        name_scope=scope,
    )
    xa = rng.uniform(-1, 1, x.shape).astype("float32")
    k = rng.uniform(-1, 1, (3, 3, 4, 6)).astype("float32")
    dag, (got,) = _build_and_run([x, tw, out], [xa, ops.winograd_weight_transform_np(k, tile)])
    np.testing.assert_allclose(got, _conv_nhwc(xa, k, 1), rtol=1e-3, atol=1e-3)


def test_pool_softmax_and_adaptive_pool_build():
    # Stages with if_then_else padding, masked adaptive windows and exp: the default schedule
    # of each must compile and agree with the interpreter.
    rng = np.random.default_rng(5)
    scope = ops.NameScope()
    x = scope.placeholder((1, 7, 5, 3))
    pooled = ops.compute_op(
        "nn.avg_pool2d",
        [x],
        {
            "pool_size": (3, 3),
            "strides": (2, 2),
            "padding": (1, 1, 1, 1),
            "layout": "NHWC",
            "ceil_mode": True,
        },
        name_scope=scope,
    )
    adapt = ops.compute_op(
        "nn.adaptive_avg_pool2d", [x], {"output_size": (3, 2), "layout": "NHWC"}, name_scope=scope
    )
    flat = ops.compute_op("nn.batch_flatten", [adapt], name_scope=scope)
    sm = ops.compute_op("nn.softmax", [flat], name_scope=scope)
    xa = rng.uniform(-1, 1, x.shape).astype("float32")
    dag, outs = _build_and_run([x, pooled, sm], [xa])
    for got, ref in zip(outs, eval_dag(dag, [xa]), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[1].sum(-1), 1.0, rtol=1e-5)


def _sketches(tensors):
    from autosched.sketch import generate_sketches
    from autosched.task import HardwareParams, SearchTask

    task = SearchTask(
        ansor.ComputeDAG(tensors), target="llvm", hardware_params=HardwareParams(num_cores=4)
    )
    # Drop the first line (the placeholder names differ: placeholder_1 vs kernel).
    return [str(s).split("\n", 1)[1] for s in generate_sketches(task)]


@pytest.mark.parametrize("winograd", [False, True])
def test_sketches_match_the_hand_written_seed_workloads(winograd):
    from autosched import testing

    scope = ops.NameScope()
    x = scope.placeholder((1, 14, 14, 32))
    if winograd:
        w = scope.placeholder((4, 4, 32, 32))
        op, attrs = "nn.contrib_conv2d_winograd_without_weight_transform", {"tile_size": 2}
        ref = testing.winograd_conv2d_nhwc_3x3(1, 14, 14, 32, 32)
    else:
        w = scope.placeholder((3, 3, 32, 32))
        op, attrs = "nn.conv2d", {"data_layout": "NHWC"}
        ref = testing.conv2d_nhwc_bias_relu(1, 14, 14, 32, 32, 3, 3, 1, 1)
    b = scope.placeholder((1, 1, 1, 32))
    conv = ops.compute_op(op, [x, w], {**attrs, "padding": (1, 1, 1, 1)}, name_scope=scope)
    out = ops.compute_op(
        "nn.relu", [ops.compute_op("add", [conv, b], name_scope=scope)], name_scope=scope
    )
    mine = _sketches([x, w, b, out])
    assert len(mine) >= 1
    assert mine == _sketches(ref)
