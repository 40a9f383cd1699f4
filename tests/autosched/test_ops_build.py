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
    # Pre-fill outputs with a value no op computes here, so unwritten elements show.
    outs = [np.full(t.shape, -77, t.dtype) for t in dag.output_tensors]
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
    from autosched.hardware import HardwareParams
    from autosched.search.sketch import generate_sketches
    from autosched.task import SearchTask

    task = SearchTask(
        ansor.ComputeDAG(tensors), target="llvm", hardware_params=HardwareParams(num_cores=4)
    )
    # Drop the first line (the placeholder names differ: placeholder_1 vs kernel).
    return [str(s).split("\n", 1)[1] for s in generate_sketches(task)]


@pytest.mark.parametrize("winograd", [False, True])
def test_sketches_match_the_hand_written_seed_workloads(winograd):
    from autosched import workloads

    scope = ops.NameScope()
    x = scope.placeholder((1, 14, 14, 32))
    if winograd:
        w = scope.placeholder((4, 4, 32, 32))
        op, attrs = "nn.contrib_conv2d_winograd_without_weight_transform", {"tile_size": 2}
        ref = workloads.winograd_conv2d_nhwc_3x3(1, 14, 14, 32, 32)
    else:
        w = scope.placeholder((3, 3, 32, 32))
        op, attrs = "nn.conv2d", {"data_layout": "NHWC"}
        ref = workloads.conv2d_nhwc_bias_relu(1, 14, 14, 32, 32, 3, 3, 1, 1)
    b = scope.placeholder((1, 1, 1, 32))
    conv = ops.compute_op(op, [x, w], {**attrs, "padding": (1, 1, 1, 1)}, name_scope=scope)
    out = ops.compute_op(
        "nn.relu", [ops.compute_op("add", [conv, b], name_scope=scope)], name_scope=scope
    )
    mine = _sketches([x, w, b, out])
    assert len(mine) >= 1
    assert mine == _sketches(ref)


# One case per op of docs/graph-ops.md (shapes small): the default schedule of every op must
# compile through LLVM and agree with the interpreter (itself checked against numpy in
# tests/tensorir/test_ops_*.py).
ALL_OPS = [
    (
        "nn.conv2d",
        [(1, 4, 9, 9), (6, 2, 3, 3)],
        {"groups": 2, "strides": 2, "padding": (1, 0, 2, 1)},
    ),
    ("nn.conv2d", [(1, 4, 9, 9), (8, 1, 3, 3)], {"groups": 4, "padding": 1}),
    (
        "nn.conv2d",
        [(1, 9, 9, 4), (3, 3, 4, 2)],
        {"groups": 4, "padding": 1, "data_layout": "NHWC", "kernel_layout": "HWOI"},
    ),
    (
        "nn.conv2d",
        [(1, 9, 9, 4), (3, 3, 2, 6)],
        {"groups": 2, "padding": 2, "dilation": 2, "data_layout": "NHWC"},
    ),
    ("nn.contrib_conv2d_winograd_weight_transform", [(3, 3, 2, 3)], {"tile_size": 4}),
    ("nn.conv3d", [(1, 2, 5, 6, 7), (3, 2, 3, 3, 3)], {"padding": 1}),
    ("nn.conv3d", [(1, 5, 6, 7, 2), (3, 3, 3, 2, 3)], {"padding": 1, "data_layout": "NDHWC"}),
    (
        "nn.conv2d_transpose",
        [(1, 4, 5, 6), (4, 3, 3, 3)],
        {"strides": 2, "padding": (1, 0, 1, 2), "output_padding": (1, 0)},
    ),
    (
        "nn.conv2d_transpose",
        [(1, 5, 4, 4), (2, 3, 4, 2)],
        {"groups": 2, "dilation": (2, 1), "data_layout": "NHWC"},
    ),
    ("nn.group_norm", [(2, 4, 3, 5), (4,), (4,)], {"num_groups": 2}),
    ("nn.instance_norm", [(2, 3, 5, 4), (4,), (4,)], {"axis": -1}),
    (
        "image.resize2d",
        [(1, 2, 4, 6)],
        {"size": (7, 12), "method": "cubic", "coordinate_transformation_mode": "half_pixel"},
    ),
    (
        "image.resize2d",
        [(1, 4, 6, 2)],
        {
            "size": (3, 9),
            "method": "nearest_neighbor",
            "layout": "NHWC",
            "coordinate_transformation_mode": "align_corners",
            "rounding_method": "round_prefer_ceil",
        },
    ),
    (
        "strided_slice",
        [(4, 3, 7)],
        {"begin": (1, -1), "end": (3, 0), "strides": (1, -2), "axes": (0, 2)},
    ),
    ("nn.dense", [(3, 17), (5, 17)], {}),
    ("nn.batch_matmul", [(1, 4, 6), (3, 5, 6)], {}),
    ("nn.bias_add", [(2, 3, 4), (3,)], {}),
    ("nn.batch_norm", [(1, 3, 4, 4), (3,), (3,), (3,), (3,)], {}),
    ("nn.relu", [(4, 5)], {}),
    ("sigmoid", [(4, 5)], {}),
    ("tanh", [(4, 5)], {}),
    ("exp", [(4, 5)], {}),
    ("sqrt", [(4, 5)], {}),
    ("negative", [(4, 5)], {}),
    ("clip", [(4, 5)], {"a_min": 0.5, "a_max": 2.0}),
    ("add", [(4, 5), (5,)], {}),
    ("subtract", [(4, 1), (1, 5)], {}),
    ("multiply", [(2, 4, 5), (4, 1)], {}),
    ("divide", [(4, 5), (5,)], {}),
    ("maximum", [(4, 1), (1, 5)], {}),
    ("minimum", [(4, 5), (4, 5)], {}),
    (
        "nn.max_pool2d",
        [(1, 3, 9, 8)],
        {"pool_size": 3, "strides": 2, "padding": 1, "ceil_mode": True},
    ),
    (
        "nn.avg_pool2d",
        [(1, 9, 8, 3)],
        {"pool_size": 3, "strides": 2, "padding": 1, "layout": "NHWC"},
    ),
    ("nn.max_pool3d", [(1, 2, 5, 6, 7)], {"pool_size": 2, "strides": 2}),
    (
        "nn.avg_pool3d",
        [(1, 2, 5, 6, 7)],
        {"pool_size": (2, 3, 3), "strides": 2, "padding": 1, "count_include_pad": True},
    ),
    ("nn.global_avg_pool2d", [(1, 3, 7, 5)], {}),
    ("nn.global_max_pool2d", [(1, 7, 5, 3)], {"layout": "NHWC"}),
    ("nn.adaptive_avg_pool2d", [(1, 3, 7, 5)], {"output_size": (3, 2)}),
    ("nn.softmax", [(3, 4, 5)], {"axis": 1}),
    ("concatenate", [(2, 3, 4), (2, 1, 4), (2, 2, 4)], {"axis": 1}),
    ("nn.pad", [(2, 3)], {"pad_width": ((1, 0), (2, 2)), "pad_value": -1.0}),
    ("reshape", [(2, 3, 4)], {"newshape": (4, -1)}),
    ("nn.batch_flatten", [(2, 3, 2)], {}),
    ("transpose", [(2, 3, 4)], {"axes": (2, 0, 1)}),
    ("squeeze", [(1, 3, 1)], {}),
    ("layout_transform", [(1, 3, 4, 5)], {"src_layout": "NCHW", "dst_layout": "NHWC"}),
    ("cast", [(4, 5)], {"dtype": "int32"}),
    ("floor", [(4, 5)], {}),
    # ONNX import: reductions, logic, math (issue 26)
    ("erf", [(4, 5)], {}),
    ("log", [(4, 5)], {}),
    ("abs", [(4, 5)], {}),
    ("isnan", [(4, 5)], {}),
    ("isinf", [(4, 5)], {}),
    ("logical_not", [(4, 5)], {}),
    ("power", [(4, 5), (5,)], {}),
    ("equal", [(4, 5), (4, 5)], {}),
    ("not_equal", [(4, 5), (5,)], {}),
    ("less", [(4, 1), (1, 5)], {}),
    ("less_equal", [(4, 5), (5,)], {}),
    ("greater", [(4, 5), (5,)], {}),
    ("greater_equal", [(4, 5), (4, 1)], {}),
    ("logical_and", [(4, 5), (5,)], {}),
    ("logical_or", [(4, 5), (5,)], {}),
    ("where", [(5,), (4, 1), (4, 5)], {}),
    ("sum", [(2, 3, 4)], {"axis": (0, 2)}),
    ("mean", [(2, 3, 4)], {"axis": -1, "keepdims": True}),
    ("max", [(2, 3, 4)], {}),
    ("min", [(2, 3, 4)], {"axis": 1, "exclude": True}),
    ("nn.layer_norm", [(2, 3, 8), (8,), (8,)], {"epsilon": 1e-3}),
    ("cumsum", [(3, 6)], {"axis": 1, "exclusive": True, "reverse": True}),
    ("strided_slice", [(4, 9)], {"begin": (1, -1), "end": (99, 0), "strides": (2, -3)}),
    ("broadcast_to", [(3, 1)], {"shape": (2, 3, 4)}),
    ("trilu", [(2, 4, 5)], {"k": -1, "upper": False}),
]
INTEGER_OPS = ("right_shift", "left_shift")  # built on integers below
INDEX_CASES = [  # int64 indices, built below (op, data shape, indices shape, attrs)
    ("take", (7, 3), (2, 4), {"axis": 0, "mode": "fast"}),
    ("take", (2, 7, 3), (), {"axis": 1, "mode": "fast"}),
    ("take", (2, 7), (5,), {"axis": -1, "mode": "clip"}),
    ("take", (2, 7), (5,), {"axis": 1, "mode": "wrap"}),
    ("gather", (3, 7), (3, 4), {"axis": 1}),
    ("gather", (7, 3), (2, 3), {"axis": 0, "mode": "wrap"}),
]


def test_all_ops_cases_cover_the_registry():
    covered = {op for op, _, _ in ALL_OPS} | set(INTEGER_OPS) | {c[0] for c in INDEX_CASES}
    # winograd's conv is built in test_winograd_builds_and_matches_numpy above
    missing = set(ops.SUPPORTED_OPS) - covered
    assert missing == {"nn.contrib_conv2d_winograd_without_weight_transform"}


@pytest.mark.parametrize("op,shapes,attrs", ALL_OPS, ids=[c[0] for c in ALL_OPS])
def test_every_op_builds_with_the_default_schedule(op, shapes, attrs):
    rng = np.random.default_rng(len(shapes))
    scope = ops.NameScope()
    ins = [scope.placeholder(s) for s in shapes]
    out = ops.compute_op(op, ins, attrs, name_scope=scope)
    arrays = [rng.uniform(0.1, 3, s).astype("float32") for s in shapes]
    dag, (got,) = _build_and_run([*ins, out], arrays)
    np.testing.assert_allclose(got, eval_dag(dag, arrays)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", INTEGER_OPS)
def test_integer_ops_build_with_the_default_schedule(op):
    rng = np.random.default_rng(1)
    scope = ops.NameScope()
    ins = [scope.placeholder((4, 5), "int32"), scope.placeholder((5,), "int32")]
    out = ops.compute_op(op, ins, {}, name_scope=scope)
    arrays = [rng.integers(-(2**20), 2**20, (4, 5)).astype("int32"),
              rng.integers(0, 12, (5,)).astype("int32")]  # fmt: skip
    dag, (got,) = _build_and_run([*ins, out], arrays)
    np.testing.assert_array_equal(got, getattr(np, op)(*arrays))


@pytest.mark.parametrize("op,dshape,ishape,attrs", INDEX_CASES)
def test_index_ops_build_with_the_default_schedule(op, dshape, ishape, attrs):
    rng = np.random.default_rng(2)
    scope = ops.NameScope()
    ins = [scope.placeholder(dshape), scope.placeholder(ishape, "int64")]
    out = ops.compute_op(op, ins, attrs, name_scope=scope)
    n = dshape[attrs["axis"]]
    lo, hi = (-3 * n, 3 * n) if attrs.get("mode") in ("clip", "wrap") else (-n, n)
    arrays = [rng.standard_normal(dshape).astype("float32"),
              rng.integers(lo, hi, ishape).astype("int64")]  # fmt: skip
    dag, (got,) = _build_and_run([*ins, out], arrays)
    np.testing.assert_array_equal(got, eval_dag(dag, arrays)[0])
    entry = ops.registry.get_entry(op)
    full = entry.normalize(attrs, 2)
    np.testing.assert_array_equal(got, entry.reference(full, got.shape, *arrays))


def _seed_pairs():
    from autosched import workloads as W
    from tensorir import te

    def ph(shape, name):
        return te.placeholder(shape, name=name)

    d, k, b = ph((1, 14, 14, 32), "data"), ph((3, 3, 32, 64), "kernel"), ph((1, 1, 1, 64), "bias")
    conv = ops.conv2d(d, k, 2, 1, data_layout="NHWC")
    yield (
        W.conv2d_nhwc_bias_relu(1, 14, 14, 32, 64, 3, 3, 2, 1),
        [d, k, b, ops.relu(ops.add(conv, b))],
    )
    d, k = ph((1, 32, 14, 14), "data"), ph((64, 32, 3, 3), "kernel")
    yield W.conv2d_nchw(1, 32, 14, 14, 64, 3, 3, 2, 1), [d, k, ops.conv2d(d, k, 2, 1)]
    d, k = ph((1, 14, 14, 32), "data"), ph((3, 3, 32, 1), "kernel")
    dw = ops.conv2d(d, k, 2, 1, groups=32, data_layout="NHWC", kernel_layout="HWOI")
    yield W.depthwise_conv2d_nhwc(1, 14, 14, 32, 3, 3, 2, 1), [d, k, dw]
    d, w, b = ph((4, 64), "data"), ph((100, 64), "weight"), ph((100,), "bias")
    yield W.dense_bias(4, 64, 100), [d, w, b, ops.add(ops.dense(d, w), b)]
    x = ph((4, 100), "placeholder")
    yield W.softmax(4, 100), [x, ops.softmax(x)]
    d, b = ph((1, 56, 56, 64), "data"), ph((1, 1, 1, 64), "bias")
    pooled = ops.pool(d, "max", 3, 2, 1, layout="NHWC")
    yield W.max_pool_bias_relu(1, 56, 56, 64), [d, b, ops.relu(ops.add(pooled, b))]
    # The seed winograd reads the transformed weight in the library's (alpha, alpha, CI, CO).
    d, w, b = (
        ph((1, 7, 7, 16), "data"),
        ph((4, 4, 16, 24), "kernel_pack"),
        ph((1, 1, 1, 24), "bias"),
    )
    wino = ops.conv2d_winograd_nhwc_without_weight_transform(d, w, 2, 1)
    yield W.winograd_conv2d_nhwc_3x3(1, 7, 7, 16, 24), [d, w, b, ops.relu(ops.add(wino, b))]
    d, k = ph((1, 7, 7, 16), "data"), ph((3, 3, 16, 24), "kernel")
    wino = ops.conv2d_winograd_nhwc_without_weight_transform(
        d, ops.winograd_weight_transform(k, 4), 4, 1
    )
    yield W.winograd_conv2d_nhwc_3x3(1, 7, 7, 16, 24, 1, 4, False, False), [d, k, wino]


def test_ops_reproduce_the_hand_written_seed_workloads():
    # Same printed DAG and workload key as autosched.workloads's topi-style computes, so those
    # can be rebuilt on tensorir.ops without changing any golden output or tuning record.
    pairs = list(_seed_pairs())
    assert len(pairs) == 8
    for ref, mine in pairs:
        ref_dag, my_dag = ansor.ComputeDAG(ref), ansor.ComputeDAG(mine)
        assert str(my_dag) == str(ref_dag)
        assert my_dag.workload_key == ref_dag.workload_key


def test_seed_winograd_kernel_pack_is_the_library_weight_transform():
    from autosched import workloads as W

    k = np.random.default_rng(3).uniform(-1, 1, (3, 3, 5, 7)).astype("float32")
    packed = W.winograd_kernel_pack(k, 2)
    assert packed.shape == (4, 4, 5, 7)  # (alpha, alpha, CI, CO)
    np.testing.assert_array_equal(packed, ops.winograd_weight_transform_np(k, 2))
