"""Elementwise, broadcast and transform ops vs numpy; the registry's table, errors, NameScope."""

import numpy as np
import pytest
from ops_ref import rand, run_op

from tensorir import ops, te
from tensorir.dag import ComputeDAG
from tensorir.interp import eval_dag


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


UNARY = {
    "nn.relu": lambda x: np.maximum(x, 0),
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "exp": np.exp,
    "negative": np.negative,
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op):
    x = rand((3, 4, 5), rng=np.random.default_rng(20), lo=-2, hi=2)
    out, dag = run_op(op, [x])
    np.testing.assert_allclose(out, UNARY[op](x.astype(np.float64)), rtol=1e-5, atol=1e-6)
    assert dag.output_tensors[0].shape == x.shape


def test_sqrt_and_clip():
    x = rand((4, 6), rng=np.random.default_rng(21), lo=0.1, hi=4)
    out, _ = run_op("sqrt", [x])
    np.testing.assert_allclose(out, np.sqrt(x), rtol=1e-6)
    out, dag = run_op("clip", [x], {"a_min": 0.5, "a_max": 2.5})
    np.testing.assert_allclose(out, np.clip(x, 0.5, 2.5))
    assert (out == 0.5).any() and (out == 2.5).any()
    assert dag.output_tensors[0].name == "T_clip"


def test_cast():
    x = rand((5, 3), rng=np.random.default_rng(22), lo=-5, hi=5)
    out, _ = run_op("cast", [x], {"dtype": "int32"})
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.trunc(x).astype(np.int32))


BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize(
    "sa,sb",
    [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((1, 5, 5, 3), (1, 1, 1, 3))],
)
def test_binary_broadcast(op, sa, sb):
    rng = np.random.default_rng(23)
    a, b = rand(sa, rng=rng, lo=0.5, hi=2), rand(sb, rng=rng, lo=0.5, hi=2)
    out, dag = run_op(op, [a, b])
    np.testing.assert_allclose(out, BINARY[op](a, b), rtol=1e-6)
    assert dag.output_tensors[0].name == f"T_{op}"


def test_broadcast_reads_stretched_dims_with_zero():
    x = te.placeholder((1, 7, 7, 8), name="x")
    b = te.placeholder((1, 1, 1, 8), name="placeholder")
    text = str(ComputeDAG([x, b, ops.add(x, b)]))
    assert (
        "T_add(ax0, ax1, ax2, ax3) = (x[ax0, ax1, ax2, ax3] + placeholder[ax0, 0, 0, ax3])" in text
    )


def test_bias_add_and_batch_norm():
    rng = np.random.default_rng(24)
    x, bias = rand((2, 3, 4, 5), rng=rng), rand((3,), rng=rng)
    out, _ = run_op("nn.bias_add", [x, bias])
    np.testing.assert_allclose(out, x + bias[:, None, None], rtol=1e-6)
    out, _ = run_op("nn.bias_add", [x, rand((5,), rng=rng)], {"axis": -1})
    assert out.shape == x.shape
    g, be, m = rand((3,), rng=rng), rand((3,), rng=rng), rand((3,), rng=rng)
    v = rand((3,), rng=rng, lo=0.5, hi=2)
    out, _ = run_op("nn.batch_norm", [x, g, be, m, v], {"epsilon": 1e-3})
    c = (slice(None), None, None)
    ref = (x - m[c]) / np.sqrt(v[c] + 1e-3) * g[c] + be[c]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_concatenate():
    rng = np.random.default_rng(25)
    arrs = [rand((2, k, 3), rng=rng) for k in (1, 4, 2)]
    out, dag = run_op("concatenate", arrs, {"axis": 1})
    np.testing.assert_array_equal(out, np.concatenate(arrs, axis=1))
    out, _ = run_op("concatenate", arrs[:1] * 1 + [rand((2, 1, 3), rng=rng)], {"axis": -2})
    assert out.shape == (2, 2, 3)
    assert dag.output_tensors[0].name == "T_concat"


def test_pad():
    x = rand((2, 3, 4), rng=np.random.default_rng(26))
    pw = ((0, 0), (1, 2), (3, 0))
    out, dag = run_op("nn.pad", [x], {"pad_width": pw, "pad_value": 1.5})
    np.testing.assert_array_equal(out, np.pad(x, pw, constant_values=1.5))
    assert dag.output_tensors[0].name == "T_pad"


@pytest.mark.parametrize(
    "shape,newshape,expect",
    [
        ((2, 3, 4), (6, 4), (6, 4)),
        ((2, 3, 4), (0, -1), (2, 12)),
        ((2, 3, 4), (-1, 2, 0), (3, 2, 4)),
        ((2, 3, 4), (4, 1, 6), (4, 1, 6)),
        ((1, 6), (3, 2), (3, 2)),
    ],
)
def test_reshape(shape, newshape, expect):
    x = rand(shape, rng=np.random.default_rng(27))
    out, _ = run_op("reshape", [x], {"newshape": newshape})
    assert out.shape == expect
    np.testing.assert_array_equal(out, x.reshape(expect))


def test_batch_flatten_transpose_squeeze():
    x = rand((2, 3, 1, 4), rng=np.random.default_rng(28))
    out, _ = run_op("nn.batch_flatten", [x])
    np.testing.assert_array_equal(out, x.reshape(2, 12))
    out, _ = run_op("transpose", [x], {"axes": (3, 0, 2, 1)})
    np.testing.assert_array_equal(out, x.transpose(3, 0, 2, 1))
    out, _ = run_op("transpose", [x])
    np.testing.assert_array_equal(out, x.transpose())
    out, _ = run_op("squeeze", [x], {"axis": (2,)})
    np.testing.assert_array_equal(out, x.squeeze(2))
    out, _ = run_op("squeeze", [rand((1, 3, 1), rng=np.random.default_rng(29))])
    assert out.shape == (3,)


@pytest.mark.parametrize(
    "src,dst,perm",
    [
        ("NCHW", "NHWC", (0, 2, 3, 1)),
        ("NHWC", "NCHW", (0, 3, 1, 2)),
        ("NCDHW", "NDHWC", (0, 2, 3, 4, 1)),
        ("NDHWC", "NCDHW", (0, 4, 1, 2, 3)),
    ],
)
def test_layout_transform(src, dst, perm):
    x = rand((2, 3, 4, 5, 6)[: len(src)], rng=np.random.default_rng(30))
    out, _ = run_op("layout_transform", [x], {"src_layout": src, "dst_layout": dst})
    np.testing.assert_array_equal(out, x.transpose(perm))


# ----------------------------------------------------------------------------- registry


CONTRACT_OPS = [
    "nn.conv2d",
    "nn.contrib_conv2d_winograd_without_weight_transform",
    "nn.contrib_conv2d_winograd_weight_transform",
    "nn.conv3d",
    "nn.conv2d_transpose",
    "nn.group_norm",
    "nn.instance_norm",
    "image.resize2d",
    "nn.dense",
    "nn.batch_matmul",
    "nn.bias_add",
    "nn.batch_norm",
    "nn.relu",
    "sigmoid",
    "tanh",
    "exp",
    "sqrt",
    "negative",
    "clip",
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "right_shift",
    "left_shift",
    "floor",
    "nn.max_pool2d",
    "nn.avg_pool2d",
    "nn.max_pool3d",
    "nn.avg_pool3d",
    "nn.global_avg_pool2d",
    "nn.global_max_pool2d",
    "nn.adaptive_avg_pool2d",
    "nn.softmax",
    "concatenate",
    "nn.pad",
    "reshape",
    "nn.batch_flatten",
    "transpose",
    "squeeze",
    "layout_transform",
    "cast",
    # ONNX import: reductions, logic, math (issue 26)
    "erf",
    "log",
    "abs",
    "isnan",
    "isinf",
    "logical_not",
    "power",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "logical_and",
    "logical_or",
    "where",
    "sum",
    "mean",
    "max",
    "min",
    "nn.layer_norm",
    "cumsum",
    "strided_slice",
    "broadcast_to",
    "trilu",
    # --- ONNX import: gather, einsum (issue 26) ---
    "take",
    "gather",
]


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8"])
def test_shift_ops_match_numpy(dtype):
    rng = np.random.default_rng(8)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (3, 16), endpoint=True).astype(dtype)
    s = rng.integers(0, info.bits, (16,)).astype(dtype)  # broadcast along the rows
    for name, f in (("right_shift", np.right_shift), ("left_shift", np.left_shift)):
        got, _ = run_op(name, [x, s])
        np.testing.assert_array_equal(got, f(x, s))


def test_floor_matches_numpy():
    x = (np.random.default_rng(9).normal(0, 4, (5, 7))).astype("float32")
    got, _ = run_op("floor", [x])
    np.testing.assert_array_equal(got, np.floor(x))
    assert (got < 0).any() and (got != x).all()


def test_every_contract_op_is_supported():
    assert sorted(CONTRACT_OPS) == sorted(ops.SUPPORTED_OPS)


def test_registry_errors():
    x = rand((2, 3))
    with pytest.raises(ValueError, match=r"unknown op 'nn\.gelu'.*supported ops.*nn\.conv2d"):
        run_op("nn.gelu", [x])
    with pytest.raises(
        ValueError, match=r"nn\.softmax: unknown attribute\(s\) \['axes'\].*\['axis'\]"
    ):
        run_op("nn.softmax", [x], {"axes": 0})
    with pytest.raises(ValueError, match=r"clip: attribute 'a_max' is required"):
        run_op("clip", [x], {"a_min": 0.0})
    with pytest.raises(ValueError, match=r"add: takes 2 input\(s\) \(lhs, rhs\), got 1"):
        run_op("add", [x])
    with pytest.raises(ValueError, match=r"nn\.softmax.*'axis' = 2 is out of range"):
        run_op("nn.softmax", [x], {"axis": 2})
    with pytest.raises(ValueError, match=r"reshape: cannot reshape \[2, 3\]"):
        run_op("reshape", [x], {"newshape": (4, -1)})
    with pytest.raises(ValueError, match=r"layout_transform.*'NCHW' -> 'HWCN'"):
        run_op(
            "layout_transform", [rand((1, 2, 3, 4))], {"src_layout": "NCHW", "dst_layout": "HWCN"}
        )
    assert ops.op_attrs("nn.conv2d", {"groups": 2})["strides"] == (1, 1)
    assert ops.op_attrs("nn.conv2d", {})["kernel_layout"] == "OIHW"
    assert ops.op_attrs("nn.conv2d", {"data_layout": "NHWC"})["kernel_layout"] == "HWIO"
    assert ops.op_attrs("nn.conv3d", {"data_layout": "NDHWC"})["kernel_layout"] == "DHWIO"
    with pytest.raises(
        ValueError, match=r"nn\.max_pool3d: layout must be one of \['NCDHW', 'NDHWC'\], got 'NCHW'"
    ):
        run_op("nn.max_pool3d", [rand((1, 2, 4, 4))], {"pool_size": 2, "layout": "NCHW"})


def test_name_scope_uniquifies_chained_ops():
    scope = ops.NameScope()
    x = scope.placeholder((2, 3))
    b = scope.placeholder((3,))
    t = ops.compute_op("add", [x, b], name_scope=scope)
    t = ops.compute_op("add", [t, b], name_scope=scope)
    with scope:  # the context-manager form covers direct function calls
        t = ops.add(t, x)
    names = [op.name for op in ComputeDAG([x, b, t]).ops]
    assert names == ["placeholder", "placeholder_1", "T_add", "T_add_1", "T_add_2"]
    rng = np.random.default_rng(31)
    a, c = rand((2, 3), rng=rng), rand((3,), rng=rng)
    (out,) = eval_dag(ComputeDAG([x, b, t]), [a, c])
    np.testing.assert_allclose(out, a + c + c + a, rtol=1e-6)
    # Without a scope the names repeat, and a DAG refuses them.
    y = te.placeholder((2, 3), name="y")
    with pytest.raises(ValueError, match="T_add"):
        ComputeDAG([y, ops.add(ops.add(y, y), y)])
