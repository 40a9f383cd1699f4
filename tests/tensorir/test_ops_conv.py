"""conv2d (NCHW, NHWC, grouped, depthwise, int8), conv3d and winograd against numpy."""

import numpy as np
import pytest
from ops_ref import conv_nd_ncx, rand, run_op

from tensorir import ops
from tensorir.dag import SIMPLIFY_CONST_TENSOR_INDICES, ComputeDAG
from tensorir.interp import eval_dag

CONV2D_CASES = [
    # (N, CI, H, W, CO, KH, KW, strides, padding (t, l, b, r), dilation, groups)
    (1, 3, 9, 9, 4, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (2, 4, 10, 8, 6, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 1),
    (1, 3, 9, 7, 5, 3, 2, (1, 2), (0, 2, 1, 0), (1, 1), 1),  # asymmetric padding
    (1, 2, 11, 11, 3, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2), 1),  # dilation 2
    (1, 4, 8, 8, 6, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 2),  # groups 2
    (1, 3, 6, 6, 2, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 1x1, no padding
]


@pytest.mark.parametrize("case", CONV2D_CASES)
def test_conv2d_nchw(case):
    n, ci, h, w, co, kh, kw, s, p, d, g = case
    rng = np.random.default_rng(1)
    x, k = rand((n, ci, h, w), rng=rng), rand((co, ci // g, kh, kw), rng=rng)
    attrs = {"strides": s, "padding": p, "dilation": d, "groups": g}
    out, dag = run_op("nn.conv2d", [x, k], attrs)
    ref = conv_nd_ncx(x, k, s, p[:2], p[2:], d, g)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    names = [op.name for op in dag.ops]
    assert "pad_temp" in names and ("conv2d_nchw" in names or "group_conv2d_nchw" in names)


@pytest.mark.parametrize("kernel_layout", ["HWIO", "OHWI"])  # OHWI: tensor-core networks' form
@pytest.mark.parametrize("case", CONV2D_CASES)
def test_conv2d_nhwc(case, kernel_layout):
    n, ci, h, w, co, kh, kw, s, p, d, g = case
    rng = np.random.default_rng(2)
    x, k = rand((n, h, w, ci), rng=rng), rand((kh, kw, ci // g, co), rng=rng)
    attrs = {
        "strides": s,
        "padding": p,
        "dilation": d,
        "groups": g,
        "data_layout": "NHWC",
        "kernel_layout": kernel_layout,
    }
    stored = k if kernel_layout == "HWIO" else np.ascontiguousarray(k.transpose(3, 0, 1, 2))
    out, dag = run_op("nn.conv2d", [x, stored], attrs)
    ref = conv_nd_ncx(x.transpose(0, 3, 1, 2), k.transpose(3, 2, 0, 1), s, p[:2], p[2:], d, g)
    np.testing.assert_allclose(out, ref.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)
    assert "PaddedInput" in [op.name for op in dag.ops]


@pytest.mark.parametrize("mult,stride", [(1, 1), (1, 2), (2, 1)])
def test_depthwise_nchw_and_nhwc(mult, stride):
    rng = np.random.default_rng(3)
    c, h = 4, 9
    x = rand((1, c, h, h), rng=rng)
    w_oihw = rand((c * mult, 1, 3, 3), rng=rng)
    ref = conv_nd_ncx(x, w_oihw, (stride, stride), (1, 1), (1, 1), (1, 1), c)
    attrs = {"strides": (stride, stride), "padding": (1, 1, 1, 1), "groups": c}
    out, dag = run_op("nn.conv2d", [x, w_oihw], attrs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert dag.output_tensors[0].name == "DepthwiseConv2d"
    # NHWC depthwise weight HWOI (KH, KW, C, mult): output channel c*mult + q.
    w_hwoi = w_oihw.reshape(c, mult, 3, 3).transpose(2, 3, 0, 1).copy()
    attrs.update(data_layout="NHWC", kernel_layout="HWOI")
    out, dag = run_op("nn.conv2d", [x.transpose(0, 2, 3, 1).copy(), w_hwoi], attrs)
    np.testing.assert_allclose(out, ref.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)
    assert dag.output_tensors[0].name == "DepthwiseConv2d"


def test_conv2d_int8_accumulates_in_int32():
    rng = np.random.default_rng(4)
    x = rand((1, 9, 9, 8), "int8", rng=rng) * 15
    k = rand((3, 3, 8, 4), "int8", rng=rng) * 15
    attrs = {
        "padding": (1, 1, 1, 1),
        "data_layout": "NHWC",
        "kernel_layout": "HWIO",
        "out_dtype": "int32",
    }
    out, _ = run_op("nn.conv2d", [x, k], attrs)
    ref = conv_nd_ncx(
        x.transpose(0, 3, 1, 2), k.transpose(3, 2, 0, 1), (1, 1), (1, 1), (1, 1), (1, 1), 1
    ).transpose(0, 2, 3, 1)
    assert out.dtype == np.int32
    assert np.abs(ref).max() > 127  # int8 accumulation would have overflowed
    np.testing.assert_array_equal(out, ref.astype(np.int64))


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize(
    "s,p,d,g", [((1, 1, 1), (1,) * 6, (1, 1, 1), 1), ((2, 1, 2), (0, 1, 1, 1, 0, 2), (1, 2, 1), 2)]
)
def test_conv3d(layout, s, p, d, g):
    rng = np.random.default_rng(5)
    x = rand((1, 4, 5, 6, 7), rng=rng)
    w = rand((6, 4 // g, 3, 2, 3), rng=rng)
    ref = conv_nd_ncx(x, w, s, p[:3], p[3:], d, g)
    attrs = {"strides": s, "padding": p, "dilation": d, "groups": g, "data_layout": layout}
    if layout == "NDHWC":
        out, _ = run_op(
            "nn.conv3d",
            [x.transpose(0, 2, 3, 4, 1).copy(), w.transpose(2, 3, 4, 1, 0).copy()],
            attrs,
        )
        out = out.transpose(0, 4, 1, 2, 3)
    else:
        out, _ = run_op("nn.conv3d", [x, w], attrs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- winograd


@pytest.mark.parametrize("tile", [2, 4])
def test_winograd_weight_transform_te_matches_numpy(tile):
    w = rand((3, 3, 3, 5), rng=np.random.default_rng(6))
    out, dag = run_op("nn.contrib_conv2d_winograd_weight_transform", [w], {"tile_size": tile})
    np.testing.assert_allclose(out, ops.winograd_weight_transform_np(w, tile), rtol=1e-5, atol=1e-5)
    assert out.shape == (tile + 2, tile + 2, 3, 5)


WINO_CASES = [
    (2, 7, 7, (1, 1, 1, 1)),
    (4, 8, 8, (1, 1, 1, 1)),
    (4, 9, 6, (0, 1, 2, 1)),
    (2, 6, 5, (2, 0, 1, 1)),
]


@pytest.mark.parametrize("tile,h,w,pad", WINO_CASES)
def test_winograd_matches_direct_conv(tile, h, w, pad):
    rng = np.random.default_rng(7)
    x = rand((2, h, w, 3), rng=rng)
    k = rand((3, 3, 3, 4), rng=rng)
    tw = ops.winograd_weight_transform_np(k, tile)
    out, dag = run_op(
        "nn.contrib_conv2d_winograd_without_weight_transform",
        [x, tw],
        {"tile_size": tile, "padding": pad},
    )
    direct, _ = run_op(
        "nn.conv2d", [x, k], {"padding": pad, "data_layout": "NHWC", "kernel_layout": "HWIO"}
    )
    assert out.shape == direct.shape
    np.testing.assert_allclose(out, direct, rtol=1e-3, atol=1e-3)
    attrs = {op.name: op.attrs for op in dag.compute_ops}
    assert attrs["data_pack"][SIMPLIFY_CONST_TENSOR_INDICES] == ["eps", "nu", "r_a", "r_b"]
    assert attrs["inverse"][SIMPLIFY_CONST_TENSOR_INDICES] == ["vh", "vw", "r_a", "r_b"]


def test_winograd_matrices_interpolate_1d_convolution():
    # F(m, 3): A^T [(G g) * (B^T d)] is the valid 1-D correlation of d with g.
    rng = np.random.default_rng(8)
    for m in (2, 4):
        A, B, G = ops.winograd_matrices(m, 3)
        d, g = rng.standard_normal(m + 2), rng.standard_normal(3)
        np.testing.assert_allclose(
            A.T @ ((G @ g) * (B.T @ d)), np.correlate(d, g, "valid"), rtol=1e-9, atol=1e-9
        )


def test_winograd_helpers():
    assert [ops.winograd_tile_size(h) for h in (56, 28, 14, 7, 8)] == [4, 2, 2, 2, 4]
    assert ops.use_winograd((1, 14, 14, 8), (3, 3, 8, 8), (1, 1), (1, 1), 1, "NHWC")
    assert not ops.use_winograd((1, 14, 14, 8), (3, 3, 8, 8), (2, 2), (1, 1), 1, "NHWC")
    assert not ops.use_winograd((1, 14, 14, 8), (3, 3, 8, 8), (1, 1), (2, 2), 1, "NHWC")
    assert not ops.use_winograd((1, 14, 14, 8), (3, 3, 4, 8), (1, 1), (1, 1), 2, "NHWC")
    assert not ops.use_winograd((1, 8, 14, 14), (8, 8, 3, 3), (1, 1), (1, 1), 1, "NCHW")
    assert not ops.use_winograd((1, 14, 14, 8), (1, 1, 8, 8), (1, 1), (1, 1), 1, "NHWC")


def test_winograd_cpu_rule_follows_tvm_x86():
    """TVM's x86 strategy keeps 3x3 convs with CO <= 64 or CO >= 512 direct; GPUs take all."""
    args = ((1, 1), (1, 1), 1, "NHWC")
    cases = [(64, False), (65, True), (128, True), (256, True), (511, True), (512, False)]
    for co, on_cpu in cases:
        shapes = ((1, 14, 14, 64), (3, 3, 64, co))
        assert ops.use_winograd(*shapes, *args, device_kind="cpu") is on_cpu
        assert ops.use_winograd(*shapes, *args, device_kind="gpu")
    with pytest.raises(ValueError, match="device_kind"):
        ops.use_winograd((1, 14, 14, 64), (3, 3, 64, 128), *args, device_kind="tpu")


def test_seed_stage_names_in_printed_dags():
    scope = ops.NameScope()
    x = scope.placeholder((1, 14, 14, 8))
    k = scope.placeholder((3, 3, 8, 16))
    b = scope.placeholder((1, 1, 1, 16))
    attrs = {"strides": (2, 2), "padding": (1, 1, 1, 1), "data_layout": "NHWC"}
    conv = ops.compute_op("nn.conv2d", [x, k], attrs, name_scope=scope)
    out = ops.compute_op(
        "nn.relu", [ops.compute_op("add", [conv, b], name_scope=scope)], name_scope=scope
    )
    text = str(ComputeDAG([x, k, b, out]))
    assert "PaddedInput(i0, i1, i2, i3) = tir.if_then_else(((((i1 >= 1) && (i1 < 15))" in text
    assert (
        "Conv2dOutput(nn, yy, xx, ff) += (PaddedInput[nn, ((yy*2) + ry), ((xx*2) + rx), rc]" in text
    )
    assert (
        "T_add(ax0, ax1, ax2, ax3) = (Conv2dOutput[ax0, ax1, ax2, ax3] + placeholder_2[ax0, 0"
        in text
    )
    assert "T_relu(ax0, ax1, ax2, ax3) = max(T_add[ax0, ax1, ax2, ax3], 0f)" in text

    y = scope.placeholder((1, 7, 7, 16))
    tw = scope.placeholder((4, 4, 16, 16))
    wino = ops.compute_op(
        "nn.contrib_conv2d_winograd_without_weight_transform",
        [y, tw],
        {"tile_size": 2, "padding": (1, 1, 1, 1)},
        name_scope=scope,
    )
    text = str(ComputeDAG([y, tw, wino]))
    for line in [
        "input_tile(eps, nu, p, ci) = data_pad[floordiv(p, 16), "
        "((floormod(floordiv(p, 4), 4)*2) + eps), ((floormod(p, 4)*2) + nu), ci]",
        "B(i, j) = select(((floormod(i, 4) == 3) && (floormod(j, 4) == 3)), 1f,",
        "data_pack(eps, nu, p, ci) += ((input_tile[r_a, r_b, p, ci]*B[r_a, eps])*B[r_b, nu])",
        "inverse(vh, vw, p, co) += ((bgemm[r_a, r_b, p, co]*A[r_a, vh])*A[r_b, vw])",
        "conv2d_winograd(n, h, w, co) = inverse[floormod(h, 2), floormod(w, 2), "
        "((((n*4)*4) + (floordiv(h, 2)*4)) + floordiv(w, 2)), co]",
    ]:
        assert line in text, line
    assert "bgemm(eps, nu, p, co) += (data_pack[eps, nu, p, ci]*" in text


def test_conv2d_bad_attrs_name_the_op():
    x, k = rand((1, 3, 8, 8)), rand((4, 3, 3, 3))
    with pytest.raises(ValueError, match=r"nn\.conv2d.*data_layout"):
        run_op("nn.conv2d", [x, k], {"data_layout": "NCWH"})
    with pytest.raises(ValueError, match=r"nn\.conv2d.*groups=2"):
        run_op("nn.conv2d", [x, k], {"groups": 2})
    with pytest.raises(ValueError, match=r"nn\.conv2d.*unknown attribute.*'stride'"):
        run_op("nn.conv2d", [x, k], {"stride": (1, 1)})
    with pytest.raises(ValueError, match=r"nn\.conv2d: attribute 'channels' = 5 .* 4 channels"):
        run_op("nn.conv2d", [x, k], {"channels": 5})
    with pytest.raises(ValueError, match=r"nn\.conv2d: attribute 'kernel_size' = \(1, 1\)"):
        run_op("nn.conv2d", [x, k], {"kernel_size": (1, 1)})
    out, _ = run_op("nn.conv2d", [x, k], {"channels": 4, "kernel_size": (3, 3)})
    assert out.shape == (1, 4, 6, 6)
    with pytest.raises(ValueError, match=r"winograd.*strides"):
        run_op(
            "nn.contrib_conv2d_winograd_without_weight_transform",
            [rand((1, 8, 8, 3)), rand((4, 4, 3, 4))],
            {"strides": (2, 2)},
        )


def test_dag_runs_from_unscoped_ops():
    # Direct calls without a NameScope still make a valid single-op DAG.
    x = ops.pad_compute  # the helper is exported
    assert callable(x)
    a = ops.conv2d_nhwc
    from tensorir import te

    d = te.placeholder((1, 5, 5, 2), name="d")
    w = te.placeholder((3, 3, 2, 2), name="w")
    out = a(d, w, padding=1)
    arrs = [rand(d.shape), rand(w.shape, rng=np.random.default_rng(9))]
    (got,) = eval_dag(ComputeDAG([d, w, out]), arrs)
    ref = conv_nd_ncx(
        arrs[0].transpose(0, 3, 1, 2),
        arrs[1].transpose(3, 2, 0, 1),
        (1, 1),
        (1, 1),
        (1, 1),
        (1, 1),
        1,
    ).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
