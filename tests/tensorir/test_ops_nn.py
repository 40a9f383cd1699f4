"""dense, batch_matmul, pools (max/avg/global/adaptive, 2-D and 3-D) and softmax vs numpy."""

import numpy as np
import pytest
from ops_ref import pool_ref, rand, run_op

from tensorir import ops, te
from tensorir.dag import ComputeDAG
from tensorir.interp import eval_dag


def test_dense():
    rng = np.random.default_rng(10)
    x, w = rand((3, 7), rng=rng), rand((5, 7), rng=rng)
    out, dag = run_op("nn.dense", [x, w], {"units": 5})
    np.testing.assert_allclose(out, x @ w.T, rtol=1e-5, atol=1e-5)
    assert "T_dense(i, j) += (placeholder[i, k]*placeholder_1[j, k])" in str(dag)


def test_dense_int8_out_dtype():
    rng = np.random.default_rng(11)
    x, w = rand((2, 40), "int8", rng=rng) * 15, rand((3, 40), "int8", rng=rng) * 15
    out, _ = run_op("nn.dense", [x, w], {"out_dtype": "int32"})
    ref = x.astype(np.int64) @ w.T.astype(np.int64)
    assert out.dtype == np.int32 and np.abs(ref).max() > 127
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("bx,by", [(3, 3), (1, 3), (3, 1)])
def test_batch_matmul(bx, by):
    rng = np.random.default_rng(12)
    x, y = rand((bx, 4, 6), rng=rng), rand((by, 5, 6), rng=rng)
    out, dag = run_op("nn.batch_matmul", [x, y])
    np.testing.assert_allclose(out, np.matmul(x, y.transpose(0, 2, 1)), rtol=1e-5, atol=1e-5)
    assert dag.output_tensors[0].name == "T_batch_matmul"


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_matmul(ta, tb):
    rng = np.random.default_rng(13)
    a = rand((6, 4) if ta else (4, 6), rng=rng)
    b = rand((5, 6) if tb else (6, 5), rng=rng)
    A, B = te.placeholder(a.shape, name="a"), te.placeholder(b.shape, name="b")
    (out,) = eval_dag(ComputeDAG([A, B, ops.matmul(A, B, ta, tb)]), [a, b])
    np.testing.assert_allclose(out, (a.T if ta else a) @ (b.T if tb else b), rtol=1e-5, atol=1e-5)


POOL2D = [
    # (kind, pool_size, strides, padding (t, l, b, r), dilation, ceil_mode, count_include_pad)
    ("max", (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, False),
    ("max", (2, 3), (2, 2), (0, 1, 0, 0), (1, 1), True, False),
    ("max", (2, 2), (1, 1), (0, 0, 0, 0), (2, 1), False, False),
    ("avg", (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, False),
    ("avg", (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, True),
    ("avg", (3, 2), (2, 2), (1, 0, 1, 1), (1, 1), True, True),
    ("avg", (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), True, False),
    ("avg", (2, 2), (1, 1), (1, 1, 1, 1), (2, 2), False, False),
]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("case", POOL2D)
def test_pool2d(case, layout):
    kind, ks, s, p, d, ceil, cip = case
    x = rand((2, 3, 9, 8), rng=np.random.default_rng(14), lo=-3, hi=-1)  # all negative:
    # a max-pool pad of 0 instead of the lowest float would show
    ref = pool_ref(x, kind, ks, s, p[:2], p[2:], d, ceil, cip)
    attrs = {
        "pool_size": ks,
        "strides": s,
        "padding": p,
        "dilation": d,
        "ceil_mode": ceil,
        "layout": layout,
    }
    if kind == "avg":
        attrs["count_include_pad"] = cip
    xin = x if layout == "NCHW" else x.transpose(0, 2, 3, 1).copy()
    out, dag = run_op(f"nn.{kind}_pool2d", [xin], attrs)
    if layout == "NHWC":
        out = out.transpose(0, 3, 1, 2)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    names = [op.name for op in dag.ops]
    assert names[-1] == "tensor"
    assert ("pad_temp" in names) == (any(p) or (ceil and max(s) > 1))


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("kind,cip", [("max", False), ("avg", False), ("avg", True)])
def test_pool3d(layout, kind, cip):
    x = rand((1, 2, 5, 6, 7), rng=np.random.default_rng(15), lo=-3, hi=-1)
    ks, s, p = (2, 3, 3), (2, 2, 1), (1, 0, 1, 0, 1, 1)
    ref = pool_ref(x, kind, ks, s, p[:3], p[3:], (1, 1, 1), True, cip)
    attrs = {"pool_size": ks, "strides": s, "padding": p, "layout": layout, "ceil_mode": True}
    if kind == "avg":
        attrs["count_include_pad"] = cip
    xin = x if layout == "NCDHW" else x.transpose(0, 2, 3, 4, 1).copy()
    out, _ = run_op(f"nn.{kind}_pool3d", [xin], attrs)
    if layout == "NDHWC":
        out = out.transpose(0, 4, 1, 2, 3)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_global_pools(layout):
    x = rand((2, 3, 5, 7), rng=np.random.default_rng(16))
    xin = x if layout == "NCHW" else x.transpose(0, 2, 3, 1).copy()
    avg, dag = run_op("nn.global_avg_pool2d", [xin], {"layout": layout})
    mx, _ = run_op("nn.global_max_pool2d", [xin], {"layout": layout})
    axes = (2, 3) if layout == "NCHW" else (1, 2)
    np.testing.assert_allclose(
        avg,
        x.mean((2, 3), keepdims=True).transpose((0, 1, 2, 3) if layout == "NCHW" else (0, 2, 3, 1)),
        rtol=1e-5,
        atol=1e-6,
    )
    np.testing.assert_allclose(mx, xin.max(axes, keepdims=True), rtol=1e-6)
    assert [op.name for op in dag.compute_ops] == ["adaptive_pool_sum", "adaptive_pool_avg"]


@pytest.mark.parametrize("out_size", [(3, 2), (2, 4), (1, 1), (5, 7)])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_adaptive_avg_pool(out_size, layout):
    x = rand((1, 2, 5, 7), rng=np.random.default_rng(17))
    oh, ow = out_size
    ref = np.zeros((1, 2, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, h1 = (i * 5) // oh, -(-((i + 1) * 5) // oh)
            w0, w1 = (j * 7) // ow, -(-((j + 1) * 7) // ow)
            ref[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean((2, 3))
    xin = x if layout == "NCHW" else x.transpose(0, 2, 3, 1).copy()
    out, _ = run_op("nn.adaptive_avg_pool2d", [xin], {"output_size": out_size, "layout": layout})
    if layout == "NHWC":
        out = out.transpose(0, 3, 1, 2)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,axis", [((3, 10), -1), ((3, 10), 0), ((2, 3, 4), 1), ((6,), 0)])
def test_softmax(shape, axis):
    x = rand(shape, rng=np.random.default_rng(18), lo=-4, hi=4)
    out, dag = run_op("nn.softmax", [x], {"axis": axis})
    e = np.exp(x.astype(np.float64) - x.max(axis, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis, keepdims=True), rtol=1e-5, atol=1e-6)
    assert [op.name for op in dag.compute_ops] == [
        "T_softmax_maxelem",
        "T_softmax_exp",
        "T_softmax_expsum",
        "T_softmax_norm",
    ]


def test_softmax_prints_like_the_seed():
    x = te.placeholder((1, 1000), name="placeholder")
    text = str(ComputeDAG([x, ops.softmax(x)]))
    assert "T_softmax_maxelem(i0) max= placeholder[i0, k]" in text
    assert "T_softmax_exp(i0, i1) = tir.exp((placeholder[i0, i1] - T_softmax_maxelem[i0]))" in text
    assert "T_softmax_expsum(i0) += T_softmax_exp[i0, k]" in text
    assert "T_softmax_norm(i0, i1) = (T_softmax_exp[i0, i1]/T_softmax_expsum[i0])" in text


def test_pool_errors_name_the_op():
    x = rand((1, 3, 8, 8))
    with pytest.raises(ValueError, match=r"nn\.max_pool2d.*'pool_size' is required"):
        run_op("nn.max_pool2d", [x], {})
    with pytest.raises(ValueError, match=r"nn\.max_pool2d.*count_include_pad"):
        run_op("nn.max_pool2d", [x], {"pool_size": 2, "count_include_pad": True})
    with pytest.raises(ValueError, match=r"nn\.avg_pool2d.*layout.*'NCWH'"):
        run_op("nn.avg_pool2d", [x], {"pool_size": 2, "layout": "NCWH"})


def test_int8_max_pool_pads_with_the_lowest_int8():
    x = (rand((1, 2, 5, 5), "int8", rng=np.random.default_rng(19)) - 100).astype("int8")
    assert x.max() < 0  # a zero pad value would win the max at the borders
    out, _ = run_op("nn.max_pool2d", [x], {"pool_size": 3, "padding": 1, "strides": 2})
    ref = pool_ref(x, "max", (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), False, False)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, ref)


def test_adaptive_avg_pool_output_size_defaults_to_the_input_size_as_in_relay():
    scope = ops.NameScope()
    x = scope.placeholder((1, 3, 5, 4))
    out = ops.compute_op("nn.adaptive_avg_pool2d", [x], {}, name_scope=scope)
    assert out.shape == (1, 3, 5, 4)
    half = ops.compute_op("nn.adaptive_avg_pool2d", [x], {"output_size": (None, 2)})
    assert half.shape == (1, 3, 5, 2)
    data = np.random.default_rng(1).uniform(-1, 1, (1, 3, 5, 4)).astype("float32")
    (got,) = eval_dag(ComputeDAG([x, out]), [data])
    np.testing.assert_allclose(got, data, rtol=1e-6)
