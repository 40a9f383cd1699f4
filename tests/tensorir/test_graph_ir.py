"""The graph IR: node identity, attributes, traversal, rewrite, shape inference, printing."""

import numpy as np
import pytest

from tensorir.graph import (
    OPS,
    Attrs,
    Call,
    Constant,
    Function,
    Module,
    Var,
    bind_params,
    calls,
    evaluate,
    free_vars,
    image,
    make_call,
    nn,
    op,
    post_order,
    rewrite,
    users,
)


def small_net():
    x = op.var("data", (1, 8, 8, 3))
    w = op.var("w", (3, 3, 3, 4))
    c = nn.conv2d(x, w, padding=1, data_layout="NHWC")
    r = nn.relu(c)
    s = op.add(r, c)  # c is used twice: one shared node
    return Function((x, w), s), c


def test_attrs_are_frozen_hashable_and_normalised():
    a = Attrs({"strides": [1, 2], "pad_width": [[0, 1], [2, 3]]})
    assert a["strides"] == (1, 2) and a["pad_width"] == ((0, 1), (2, 3))
    assert hash(a) == hash(Attrs({"strides": (1, 2), "pad_width": ((0, 1), (2, 3))}))
    assert a.get("missing", 7) == 7
    with pytest.raises(TypeError):
        a["strides"] = (1, 1)
    assert a.replace(strides=(3, 3))["strides"] == (3, 3) and a["strides"] == (1, 2)


def test_nodes_compare_by_identity():
    a, b = Var("x", (2,)), Var("x", (2,))
    assert a != b and len({a, b}) == 2
    c = Constant(np.arange(3, dtype="float32") + 0.5)
    assert c.shape == (3,) and c.dtype == "float32" and not c.value.flags.writeable
    with pytest.raises(AttributeError):
        a.name = "y"


def test_post_order_shares_and_orders():
    f, c = small_net()
    order = post_order(f)
    assert sum(n is c for n in order) == 1
    pos = {id(n): i for i, n in enumerate(order)}
    for n in calls(f):
        assert all(pos[id(a)] < pos[id(n)] for a in n.args)
    assert [v.name for v in free_vars(f)] == ["data", "w"]
    assert [u.op for u in users(f)[c]] == ["nn.relu", "add"]


def test_deep_graph_does_not_hit_recursion_limit():
    x = op.var("x", (4,))
    y = x
    for _ in range(3000):
        y = nn.relu(y)
    assert len(calls(y)) == 3000


def test_function_checks_free_vars():
    x, y = op.var("x", (2,)), op.var("y", (2,))
    with pytest.raises(ValueError, match="not parameters.*'y'"):
        Function((x,), op.add(x, y))


def test_rewrite_replaces_and_reinfers():
    f, c = small_net()

    # Replace relu by sigmoid; the add above it must be rebuilt, the conv kept as is.
    def visit(node, args):
        if isinstance(node, Call) and node.op == "nn.relu":
            return op.sigmoid(args[0])
        return None

    g = rewrite(f, visit)
    ops = [n.op for n in calls(g)]
    assert ops == ["nn.conv2d", "sigmoid", "add"]
    assert calls(g)[0] is c  # unchanged subgraph kept
    assert g.params == f.params
    # Nothing to change: the very same nodes come back.
    h = rewrite(f, lambda n, a: None)
    assert h.body is f.body


def test_rewrite_changes_shapes_downstream():
    x = op.var("x", (2, 3))
    f = Function((x,), op.reshape(nn.relu(x), (-1,)))
    y = op.var("y", (4, 3))
    g = rewrite(f, lambda n, a: y if n is x else None)
    assert g.body.shape == (12,) and [p.name for p in g.params] == ["y"]


def test_bind_params_makes_constants():
    f, _ = small_net()
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3, 3, 4)).astype("float32")
    g = bind_params(f, {"w": w})
    assert [p.name for p in g.params] == ["data"]
    x = rng.standard_normal((1, 8, 8, 3)).astype("float32")
    np.testing.assert_allclose(evaluate(g, {"data": x}), evaluate(f, {"data": x, "w": w}))
    with pytest.raises(ValueError, match="bind_params: %w"):
        bind_params(f, {"w": w[:2]})


def test_tuple_outputs_and_module():
    x = op.var("x", (2, 3))
    f = Function((x,), (nn.relu(x), op.negative(x)))
    assert f.shape == ((2, 3), (2, 3))
    v = np.random.default_rng(1).standard_normal((2, 3)).astype("float32")
    a, b = evaluate(Module.from_function(f), {"x": v})
    np.testing.assert_allclose(a, np.maximum(v, 0))
    np.testing.assert_allclose(b, -v)


# --- shape inference -------------------------------------------------------------------------

V = op.var


@pytest.mark.parametrize(
    "build, shape",
    [
        (lambda: nn.conv2d(V("x", (1, 3, 9, 9)), V("w", (8, 3, 3, 3)), strides=2), (1, 8, 4, 4)),
        (
            lambda: nn.conv2d(
                V("x", (2, 9, 9, 4)), V("w", (3, 3, 4, 6)), padding=(1, 2), data_layout="NHWC"
            ),
            (2, 9, 11, 6),
        ),  # fmt: skip
        (
            lambda: nn.conv2d(
                V("x", (1, 8, 8, 6)),
                V("w", (3, 3, 6, 1)),
                groups=6,
                padding=1,
                data_layout="NHWC",
                kernel_layout="HWOI",
            ),
            (1, 8, 8, 6),
        ),  # fmt: skip
        (
            lambda: nn.conv2d(V("x", (1, 4, 9, 9)), V("w", (6, 2, 3, 3)), groups=2, dilation=2),
            (1, 6, 5, 5),
        ),  # fmt: skip
        (
            lambda: nn.conv3d(
                V("x", (1, 5, 6, 6, 2)), V("w", (3, 3, 3, 2, 4)), padding=1, data_layout="NDHWC"
            ),
            (1, 5, 6, 6, 4),
        ),  # fmt: skip
        (
            lambda: nn.conv3d(V("x", (1, 2, 5, 6, 6)), V("w", (4, 2, 1, 3, 3)), strides=(1, 2, 2)),
            (1, 4, 5, 2, 2),
        ),  # fmt: skip
        (
            lambda: nn.contrib_conv2d_winograd_weight_transform(V("w", (3, 3, 5, 7)), 4),
            (6, 6, 5, 7),
        ),  # fmt: skip
        (
            lambda: nn.contrib_conv2d_winograd_without_weight_transform(
                V("x", (1, 7, 7, 5)), V("u", (4, 4, 5, 7)), 2, padding=1
            ),
            (1, 7, 7, 7),
        ),
        (
            lambda: nn.conv2d_transpose(
                V("x", (1, 4, 5, 6)), V("w", (4, 3, 3, 3)), strides=2, padding=1, output_padding=1
            ),
            (1, 3, 10, 12),
        ),
        (
            lambda: nn.conv2d_transpose(
                V("x", (1, 5, 6, 4)), V("w", (2, 2, 4, 3)), strides=2, groups=2, data_layout="NHWC"
            ),
            (1, 10, 12, 6),
        ),
        (lambda: nn.group_norm(V("x", (2, 6, 3)), V("g", (6,)), V("b", (6,)), 3), (2, 6, 3)),
        (lambda: nn.instance_norm(V("x", (2, 3, 6)), V("g", (6,)), V("b", (6,)), -1), (2, 3, 6)),
        (lambda: image.resize2d(V("x", (1, 4, 5, 2)), (8, 10), layout="NHWC"), (1, 8, 10, 2)),
        (lambda: op.strided_slice(V("x", (4, 6)), (1, -1), (3, 0), (1, -2)), (2, 3)),
        (lambda: nn.dense(V("x", (3, 10)), V("w", (4, 10))), (3, 4)),
        (lambda: nn.batch_matmul(V("x", (2, 3, 5)), V("y", (2, 4, 5))), (2, 3, 4)),
        (lambda: nn.bias_add(V("x", (1, 4, 4, 6)), V("b", (6,)), axis=3), (1, 4, 4, 6)),
        (
            lambda: nn.batch_norm(
                *(
                    V(n, s)
                    for n, s in [
                        ("x", (1, 5, 3, 3)),
                        ("g", (5,)),
                        ("b", (5,)),
                        ("m", (5,)),
                        ("v", (5,)),
                    ]
                )
            ),
            (1, 5, 3, 3),
        ),  # fmt: skip
        (lambda: op.clip(V("x", (2, 3)), 0.0, 6.0), (2, 3)),
        (lambda: op.add(V("x", (1, 4, 4, 6)), V("b", (1, 1, 1, 6))), (1, 4, 4, 6)),
        (lambda: op.multiply(V("x", (5, 1)), V("y", (3,))), (5, 3)),
        (lambda: op.divide(V("x", (2, 3)), 2.0), (2, 3)),
        (lambda: nn.max_pool2d(V("x", (1, 112, 112, 64)), 3, 2, 1, layout="NHWC"), (1, 56, 56, 64)),
        (lambda: nn.max_pool2d(V("x", (1, 2, 6, 6)), 3, 2, ceil_mode=True), (1, 2, 3, 3)),
        (lambda: nn.avg_pool2d(V("x", (1, 2, 6, 6)), 3, 2), (1, 2, 2, 2)),
        (lambda: nn.avg_pool3d(V("x", (1, 4, 6, 6, 2)), 2, 2, layout="NDHWC"), (1, 2, 3, 3, 2)),
        (
            lambda: nn.max_pool3d(V("x", (1, 2, 4, 6, 6)), (1, 3, 3), (1, 2, 2), (0, 1, 1)),
            (1, 2, 4, 3, 3),
        ),  # fmt: skip
        (lambda: nn.global_avg_pool2d(V("x", (2, 7, 7, 8)), layout="NHWC"), (2, 1, 1, 8)),
        (lambda: nn.global_max_pool2d(V("x", (2, 8, 7, 7))), (2, 8, 1, 1)),
        (lambda: nn.adaptive_avg_pool2d(V("x", (1, 3, 10, 9)), (4, 2)), (1, 3, 4, 2)),
        (lambda: nn.softmax(V("x", (2, 10))), (2, 10)),
        (
            lambda: op.concatenate([V("a", (1, 2, 3)), V("b", (1, 4, 3)), V("c", (1, 1, 3))], 1),
            (1, 7, 3),
        ),  # fmt: skip
        (lambda: nn.pad(V("x", (1, 3, 3, 2)), ((0, 0), (1, 2), (3, 0), (0, 0))), (1, 6, 6, 2)),
        (lambda: op.reshape(V("x", (2, 3, 4)), (0, -1)), (2, 12)),
        (lambda: nn.batch_flatten(V("x", (2, 3, 4, 5))), (2, 60)),
        (lambda: op.transpose(V("x", (2, 3, 4)), (2, 0, 1)), (4, 2, 3)),
        (lambda: op.transpose(V("x", (2, 3, 4))), (4, 3, 2)),
        (lambda: op.squeeze(V("x", (1, 3, 1, 1)), (2, 3)), (1, 3)),
        (lambda: op.squeeze(V("x", (1, 3, 1, 1))), (3,)),
        (lambda: op.layout_transform(V("x", (1, 3, 5, 7)), "NCHW", "NHWC"), (1, 5, 7, 3)),
        (lambda: op.layout_transform(V("x", (1, 2, 5, 7, 3)), "NDHWC", "NCDHW"), (1, 3, 2, 5, 7)),
        (lambda: nn.relu(V("x", (3,))), (3,)),
        # ONNX import: reductions, logic, math (issue 26)
        (lambda: op.erf(V("x", (2, 3))), (2, 3)),
        (lambda: op.log(V("x", (2, 3))), (2, 3)),
        (lambda: op.abs(V("x", (2, 3))), (2, 3)),
        (lambda: op.isnan(V("x", (2, 3))), (2, 3)),
        (lambda: op.isinf(V("x", (2, 3))), (2, 3)),
        (lambda: op.logical_not(V("x", (2, 3), "bool")), (2, 3)),
        (lambda: op.power(V("x", (2, 1)), V("y", (3,))), (2, 3)),
        (lambda: op.equal(V("x", (2, 1)), V("y", (3,))), (2, 3)),
        (lambda: op.not_equal(V("x", (2, 1)), V("y", (3,))), (2, 3)),
        (lambda: op.less(V("x", (4, 1, 3)), V("y", (2, 1))), (4, 2, 3)),
        (lambda: op.less_equal(V("x", (2, 3)), 0.0), (2, 3)),
        (lambda: op.greater(V("x", (2, 3)), 0.0), (2, 3)),
        (lambda: op.greater_equal(V("x", (2, 3)), 0.0), (2, 3)),
        (lambda: op.logical_and(V("x", (2, 3), "bool"), V("y", (3,), "bool")), (2, 3)),
        (lambda: op.logical_or(V("x", (2, 1), "bool"), V("y", (3,), "bool")), (2, 3)),
        (lambda: op.where(V("c", (3,), "bool"), V("x", (2, 1)), V("y", (1,))), (2, 3)),
        (lambda: op.sum(V("x", (2, 3, 4)), (0, 2)), (3,)),
        (lambda: op.mean(V("x", (2, 3, 4)), -1, keepdims=True), (2, 3, 1)),
        (lambda: op.max(V("x", (2, 3, 4))), (1,)),
        (lambda: op.min(V("x", (2, 3, 4)), 1, exclude=True), (3,)),
        (lambda: nn.layer_norm(V("x", (2, 3, 8)), V("g", (8,)), V("b", (8,))), (2, 3, 8)),
        (lambda: op.cumsum(V("x", (2, 5)), 1, exclusive=True), (2, 5)),
        (lambda: op.strided_slice(V("x", (4, 9)), (1, -1), (99, 0), (2, -3)), (2, 3)),
        (lambda: op.broadcast_to(V("x", (3, 1)), (2, 3, 4)), (2, 3, 4)),
        (lambda: op.trilu(V("x", (2, 4, 4)), 1, upper=False), (2, 4, 4)),
        (lambda: op.take(V("x", (10, 4)), V("i", (2, 3), "int64"), mode="fast"), (2, 3, 4)),
        (lambda: op.take(V("x", (2, 5, 4)), op.const(-1, "int64"), axis=1), (2, 4)),
        (lambda: op.gather(V("x", (3, 5)), 1, V("i", (3, 2), "int32")), (3, 2)),
    ],
)
def test_shape_inference(build, shape):
    assert build().shape == shape


def test_every_op_has_a_shape_test():
    # Keeps this file in step with the op table: a new op needs a line above.
    import inspect

    src = inspect.getsource(__import__(__name__))
    short = {name.split(".")[-1] for name in OPS}
    for name in ("sigmoid", "tanh", "exp", "sqrt", "negative", "subtract", "maximum",
                 "minimum", "cast"):  # fmt: skip
        short.discard(name)  # same rule as relu/add; checked in test_simple_ops_keep_shape
    missing = sorted(n for n in short if f".{n}(" not in src)
    assert not missing


@pytest.mark.parametrize(
    "name", ["sigmoid", "tanh", "exp", "sqrt", "negative", "subtract", "maximum", "minimum"]
)
def test_simple_ops_keep_shape(name):
    fn = getattr(op, name)
    x = V("x", (2, 3))
    out = fn(x, x) if name in ("subtract", "maximum", "minimum") else fn(x)
    assert out.shape == (2, 3) and out.dtype == "float32"
    assert op.cast(x, "int32").dtype == "int32"


def test_shift_and_floor_ops_keep_shape_and_dtype():
    x = V("x", (2, 3), "int32")
    assert op.right_shift(x, 3).shape == (2, 3) and op.right_shift(x, 3).dtype == "int32"
    assert op.left_shift(x, op.const([1, 2, 3], "int32")).shape == (2, 3)
    assert op.floor(V("f", (4,))).dtype == "float32"


def test_defaults_and_normalisation():
    c = nn.conv2d(V("x", (1, 3, 8, 8)), V("w", (4, 3, 3, 3)), padding=1)
    assert c.attrs["padding"] == (1, 1, 1, 1) and c.attrs["strides"] == (1, 1)
    assert c.attrs["kernel_layout"] == "OIHW" and c.attrs["channels"] == 4
    assert c.attrs["kernel_size"] == (3, 3) and c.attrs["out_dtype"] == ""
    c = nn.conv2d(V("x", (1, 8, 8, 3)), V("w", (3, 3, 3, 4)), padding=(1, 2), data_layout="NHWC")
    assert c.attrs["padding"] == (1, 2, 1, 2) and c.attrs["kernel_layout"] == "HWIO"
    assert nn.conv3d(V("x", (1, 3, 4, 4, 4)), V("w", (2, 3, 1, 1, 1)), padding=(1, 0, 2)).attrs[
        "padding"
    ] == (1, 0, 2, 1, 0, 2)
    assert nn.max_pool2d(V("x", (1, 3, 8, 8)), 3).attrs["pool_size"] == (3, 3)
    assert nn.avg_pool2d(V("x", (1, 3, 8, 8)), 2).attrs["count_include_pad"] is False
    assert nn.batch_norm(*(V(n, s) for n, s in [("x", (1, 2)), ("g", (2,)), ("b", (2,)),
                           ("m", (2,)), ("v", (2,))])).attrs["epsilon"] == 1e-5  # fmt: skip
    assert nn.dense(V("x", (3, 10)), V("w", (4, 10))).attrs["units"] == 4
    assert op.concatenate([V("a", (2,)), V("b", (3,))]).attrs["axis"] == 0
    assert nn.softmax(V("x", (2, 3))).attrs["axis"] == -1


@pytest.mark.parametrize(
    "build, pattern",
    [
        (
            lambda: nn.conv2d(V("data", (1, 3, 8, 8)), V("conv_w", (4, 5, 3, 3))),
            r"nn.conv2d: data has 3 channels.*I=3.*\(4, 5, 3, 3\).*%data: \(1, 3, 8, 8\).*%conv_w",
        ),
        (
            lambda: nn.conv2d(V("x", (1, 3, 8, 8)), V("w", (4, 3, 3, 3)), channels=5),
            r"nn.conv2d: channels=5 but the weight has O=4",
        ),
        (
            lambda: nn.conv2d(V("x", (1, 3, 2, 2)), V("w", (4, 3, 3, 3))),
            r"nn.conv2d: window 3 .* larger than the padded input 2",
        ),
        (lambda: nn.conv2d(V("x", (1, 3, 8)), V("w", (4, 3, 3, 3))), r"data must be 4-D"),
        (
            lambda: nn.dense(V("x", (3, 10)), V("fc_w", (4, 9))),
            r"nn.dense: data's last dim must equal the weight's K=9.*%fc_w",
        ),
        (lambda: op.add(V("a", (2, 3)), V("b", (4,))), r"add: shapes \(2, 3\) and \(4,\) do not"),
        (lambda: op.add(V("a", (2,)), V("b", (2,), "int32")), r"add: lhs and rhs must have one"),
        (lambda: nn.bias_add(V("x", (1, 4, 2, 2)), V("b", (3,))), r"bias must have shape \(4,\)"),
        (
            lambda: nn.batch_norm(
                V("x", (1, 4)), V("gamma", (3,)), V("b", (4,)), V("m", (4,)), V("v", (4,))
            ),
            r"gamma must have shape \(4,\)",
        ),  # fmt: skip
        (
            lambda: op.concatenate([V("a", (1, 2, 3)), V("b", (2, 2, 3))], axis=1),
            r"must match except on axis 1",
        ),
        (lambda: op.reshape(V("x", (2, 3)), (4, -1)), r"cannot reshape \(2, 3\)"),
        (lambda: op.squeeze(V("x", (2, 1)), 0), r"cannot squeeze axes \[0\]"),
        (lambda: op.transpose(V("x", (2, 1)), (0, 0)), r"not a permutation"),
        (lambda: nn.softmax(V("x", (2, 1)), axis=2), r"axis 2 is out of range"),
        (lambda: nn.batch_matmul(V("x", (2, 3, 5)), V("y", (2, 4, 6))), r"do not match"),
        (lambda: nn.pad(V("x", (2, 3)), ((1, 1),)), r"one \(before, after\) pair per dim"),
        (
            lambda: nn.contrib_conv2d_winograd_without_weight_transform(
                V("x", (1, 7, 7, 5)), V("u", (6, 6, 5, 7)), 2
            ),
            r"need a transformed weight \(4, 4, 5",
        ),
        (
            lambda: nn.contrib_conv2d_winograd_without_weight_transform(
                V("x", (1, 7, 7, 5)), V("u", (4, 4, 5, 7)), 2, strides=2
            ),
            r"strides \(1, 1\)",
        ),
        (
            lambda: nn.contrib_conv2d_winograd_weight_transform(V("w", (3, 3, 5, 7)), 3),
            r"tile_size must be 2 or 4",
        ),
        (lambda: op.layout_transform(V("x", (1, 2, 3, 4)), "NCHW", "CHWN"), r"unsupported"),
    ],
)
def test_shape_errors_name_op_inputs_and_expectation(build, pattern):
    with pytest.raises(ValueError, match=pattern):
        build()


def test_attribute_errors():
    x = V("x", (1, 3, 8, 8))
    with pytest.raises(TypeError, match="nn.max_pool2d: attribute 'pool_size' is required"):
        make_call("nn.max_pool2d", (x,), {})
    with pytest.raises(TypeError, match=r"unknown attribute\(s\) \['stride'\].*'strides'"):
        make_call("nn.max_pool2d", (x,), {"pool_size": 2, "stride": 2})
    with pytest.raises(TypeError, match=r"nn.conv2d: takes 2 input\(s\) \(data, weight\)"):
        make_call("nn.conv2d", (x,), {})
    with pytest.raises(TypeError, match="layout must be one of"):
        nn.max_pool2d(x, 2, layout="HWCN")
    with pytest.raises(TypeError, match="padding must be"):
        nn.conv2d(x, V("w", (4, 3, 3, 3)), padding=(1, 2, 3))
    with pytest.raises(KeyError, match="unknown op 'nn.conv5d'.*nn.conv2d"):
        make_call("nn.conv5d", (x,), {})


# --- printing ------------------------------------------------------------------------------


def test_printer_relay_like():
    x = op.var("data", (1, 224, 224, 3))
    w = op.var("conv0_weight", (7, 7, 3, 64))
    c = nn.conv2d(x, w, strides=(2, 2), padding=(3, 3), channels=64, kernel_size=(7, 7),
                  data_layout="NHWC", kernel_layout="HWIO")  # fmt: skip
    f = Function((x, w), nn.relu(op.add(c, 1.0)))
    text = str(f)
    assert text.startswith(
        "fn (%data: Tensor[(1, 224, 224, 3), float32], %conv0_weight: Tensor[(7, 7, 3, 64), "
        "float32]) -> Tensor[(1, 112, 112, 64), float32] {"
    )
    assert (
        "  %0 = nn.conv2d(%data, %conv0_weight, strides=[2, 2], padding=[3, 3, 3, 3], "
        'channels=64, kernel_size=[7, 7], data_layout="NHWC", kernel_layout="HWIO") '
        "/* ty=Tensor[(1, 112, 112, 64), float32] */"
    ) in text.splitlines()
    assert "  %1 = add(%0, 1.0f) /* ty=Tensor[(1, 112, 112, 64), float32] */" in text
    assert text.splitlines()[-2:] == ["  %2", "}"]
    assert str(x) == "%data"
    # Defaults are not printed.
    assert "dilation" not in text and "groups" not in text


def test_printer_constants_and_tuples():
    x = op.var("x", (3,))
    k = Constant(np.array([0.5, 1.5, 2.5], dtype="float32"), "scale")
    f = Function((x,), (op.multiply(x, k), nn.softmax(x)))
    text = str(f)
    assert "%0 = multiply(%x, meta[Constant][0] /* scale */)" in text
    assert "-> (Tensor[(3,), float32], Tensor[(3,), float32])" in text
    assert "  (%0, %1)" in text


def test_dtype_errors():
    with pytest.raises(ValueError, match="unsupported dtype 'float31'"):
        Var("x", (2,), "float31")
    with pytest.raises(ValueError, match="cast: unsupported dtype 'i32'"):
        op.cast(Var("x", (2,)), "i32")


def test_error_names_the_producing_call_and_its_weights():
    x = op.var("data", (1, 3, 8, 8))
    c = nn.conv2d(x, op.var("conv0_weight", (4, 3, 3, 3)))
    with pytest.raises(ValueError, match=r"data=output of nn.conv2d \(with %data, %conv0_weight\)"):
        nn.dense(c, op.var("fc_weight", (10, 36)))
    with pytest.raises(TypeError):
        OPS["nn.conv2d"].defaults["groups"] = 2


def test_graph_and_operator_library_share_one_attribute_table_and_error():
    from tensorir import ops
    from tensorir.graph import shapes
    from tensorir.ops.registry import OpAttrError, op_attr_defaults

    assert set(shapes.OPS) == set(ops.SUPPORTED_OPS)
    for name, opdef in shapes.OPS.items():
        assert dict(opdef.defaults) == dict(op_attr_defaults(name)), name
    x = V("x", (1, 3, 8, 8))
    with pytest.raises(OpAttrError) as graph_err:
        make_call("nn.softmax", (x,), {"axes": 1})
    t = ops.NameScope().placeholder((1, 3, 8, 8))
    with pytest.raises(OpAttrError) as ops_err:
        ops.compute_op("nn.softmax", [t], {"axes": 1})
    assert str(graph_err.value) == str(ops_err.value)


def test_graph_takes_the_library_defaults_batch_matmul_and_winograd():
    # nn.batch_matmul's transpose_b and winograd's optional tile_size were ops-only before.
    x, y = V("x", (2, 4, 5)), V("y", (2, 5, 3))
    assert make_call("nn.batch_matmul", (x, y), {"transpose_b": False}).shape == (2, 4, 3)
    with pytest.raises(ValueError, match=r"y \(B, N, K\) do not match"):
        make_call("nn.batch_matmul", (x, y), {})
    d, w = V("d", (1, 8, 8, 3)), V("w", (6, 6, 3, 7))
    call = make_call("nn.contrib_conv2d_winograd_without_weight_transform", (d, w), {"padding": 1})
    assert call.shape == (1, 8, 8, 7) and call.attrs["tile_size"] == 4


def test_main_function_of_a_module_a_function_and_anything_else():
    from tensorir.graph.ir import main_function

    func, _ = small_net()
    assert main_function(Module.from_function(func), "quantize") is func
    assert main_function(func, "quantize") is func
    with pytest.raises(TypeError, match=r"^quantize: mod must be a network .* got list$"):
        main_function([func], "quantize")


def test_a_constant_that_does_not_fit_its_dtype_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"^op.const: 137438953472 does not fit int32$"):
        op.add(op.var("x", (2,), "int32"), 2**37)


def test_predicates_give_bool_and_where_keeps_its_branch_dtype():
    x = V("x", (2, 3))
    for f in (op.isnan, op.isinf):
        assert f(x).dtype == "bool"
    for f in (op.equal, op.less, op.greater_equal, op.logical_and):
        assert f(x, x).dtype == "bool"
    assert op.where(op.less(x, 0.0), x, 0.0).dtype == "float32"
    with pytest.raises(ValueError, match="float"):
        op.erf(V("i", (2,), "int32"))
