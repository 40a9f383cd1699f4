"""tensorir.graph.from_onnx: models built with onnx.helper, checked against onnx's reference
evaluator (and onnxruntime where installed)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from tensorir.graph import OnnxImportError, calls, evaluate, from_onnx  # noqa: E402

try:
    import onnxruntime as ORT
except ImportError:
    ORT = None

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def init(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def make(nodes, inputs, outputs, inits=(), opset=17):
    """inputs/outputs: {name: shape}; an output shape may be None (unknown)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, F, s) for n, s in outputs.items()],
        initializer=[init(k, v) for k, v in dict(inits).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def check(model, feeds, shape=None, rtol=1e-4, atol=1e-5, ort=True):
    """Import, evaluate, compare each output with onnx's ReferenceEvaluator; returns the
    imported module."""
    mod, params = from_onnx(model, shape=shape)
    ours = evaluate(mod, feeds, params)
    ours = ours if isinstance(ours, list) else [ours]
    ref = ReferenceEvaluator(model).run(None, feeds)
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    if ort and ORT is not None:  # a second, independent implementation
        sess = ORT.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        for a, b in zip(ours, sess.run(None, feeds)):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return mod


def ops_of(mod):
    return [c.op for c in calls(mod["main"])]


# --- one test per op group -------------------------------------------------------------------


@pytest.mark.parametrize(
    "attrs, wshape, xshape",
    [
        (dict(pads=[1, 2, 0, 1], strides=[2, 1], dilations=[1, 2]), (6, 4, 3, 3), (1, 4, 9, 10)),
        (dict(auto_pad="SAME_UPPER", strides=[2, 2]), (6, 4, 3, 2), (2, 4, 8, 7)),
        (dict(auto_pad="SAME_LOWER", strides=[2, 2]), (6, 4, 2, 2), (1, 4, 7, 7)),
        (dict(auto_pad="VALID"), (6, 4, 3, 3), (1, 4, 6, 6)),
        (dict(group=2, pads=[1, 1, 1, 1]), (6, 2, 3, 3), (1, 4, 6, 6)),
        (dict(group=4, pads=[1, 1, 1, 1], kernel_shape=[3, 3]), (4, 1, 3, 3), (1, 4, 6, 5)),
    ],
)
def test_conv2d(attrs, wshape, xshape):
    w, b, x = rand(*wshape), rand(wshape[0]), rand(*xshape)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    mod = check(make([node], {"x": xshape}, {"y": None}, {"w": w, "b": b}), {"x": x})
    assert ops_of(mod) == ["nn.conv2d", "nn.bias_add"]
    conv = calls(mod["main"])[0]
    assert conv.attrs["data_layout"] == "NCHW" and conv.attrs["kernel_layout"] == "OIHW"
    assert conv.attrs["groups"] == attrs.get("group", 1)


def test_conv3d_and_pools3d():
    x, w = rand(1, 2, 5, 6, 6), rand(3, 2, 3, 3, 3)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 6),
        helper.make_node("MaxPool", ["c"], ["m"], kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
        helper.make_node("AveragePool", ["c"], ["a"], kernel_shape=[3, 3, 3], pads=[1] * 6),
        helper.make_node("GlobalAveragePool", ["c"], ["g"]),
    ]
    model = make(nodes, {"x": x.shape}, {"m": None, "a": None, "g": None}, {"w": w})
    mod = check(model, {"x": x})
    assert {"nn.conv3d", "nn.max_pool3d", "nn.avg_pool3d"} <= set(ops_of(mod))


@pytest.mark.parametrize(
    "op_type, attrs",
    [
        ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
        ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
        ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
        ("MaxPool", dict(kernel_shape=[3, 2], auto_pad="SAME_UPPER", dilations=[1, 2])),
        ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
        (
            "AveragePool",
            dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
        ),  # fmt: skip
        ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
        (
            "AveragePool",
            dict(
                kernel_shape=[2, 2],
                strides=[2, 2],
                pads=[1, 1, 1, 1],
                ceil_mode=1,
                count_include_pad=1,
            ),
        ),  # fmt: skip
        ("AveragePool", dict(kernel_shape=[2, 3], auto_pad="SAME_LOWER", strides=[2, 2])),
        ("GlobalAveragePool", {}),
        ("GlobalMaxPool", {}),
    ],
)
def test_pools(op_type, attrs):
    x = rand(1, 3, 8, 9)
    node = helper.make_node(op_type, ["x"], ["y"], **attrs)
    # onnxruntime sizes a dilated SAME_* pool window as if undilated (8 columns here, where the
    # spec's ceil(9 / 1) and onnx's reference give 9): compare that case with onnx only.
    ort = not ("dilations" in attrs and "auto_pad" in attrs)
    check(make([node], {"x": x.shape}, {"y": None}, opset=19), {"x": x}, ort=ort)


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_pool_ceil_mode_drops_a_window_starting_in_the_end_padding(op_type):
    # H (7): ceil mode adds a 4th window; W (9, pads 1+1): its 6th window would start in the
    # end padding, so ONNX drops it (5 columns, the floor size).
    x = rand(1, 2, 7, 9)
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2], pads=[0, 1, 0, 1], ceil_mode=1)
    mod = check(make([helper.make_node(op_type, ["x"], ["y"], **attrs)], {"x": x.shape},
                     {"y": None}, opset=19), {"x": x})  # fmt: skip
    assert mod["main"].shape == (1, 2, 4, 5)
    pool = calls(mod["main"])[0]
    assert pool.attrs["ceil_mode"] is False and pool.attrs["padding"] == (0, 1, 1, 1)
    # Both dims dropping the window: plain floor mode, the padding unchanged.
    attrs["pads"] = [1, 1, 1, 1]
    mod = check(make([helper.make_node(op_type, ["x"], ["y"], **attrs)], {"x": x.shape},
                     {"y": None}, opset=19), {"x": x})  # fmt: skip
    pool = calls(mod["main"])[0]
    assert pool.attrs["ceil_mode"] is False and pool.attrs["padding"] == (1, 1, 1, 1)


def test_pool_ceil_mode_mixed_dims_counting_padding_is_refused():
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2], pads=[0, 1, 0, 1], ceil_mode=1,
                 count_include_pad=1)  # fmt: skip
    node = helper.make_node("AveragePool", ["x"], ["y"], name="ap", **attrs)
    with pytest.raises(OnnxImportError, match=r"'ap' \(AveragePool\).*ceil_mode=1"):
        from_onnx(make([node], {"x": (1, 2, 7, 9)}, {"y": None}, opset=19))


def test_batchnorm_and_unary():
    c = 4
    x = rand(2, c, 3, 3)
    bn = [rand(c, lo=0.5, hi=1.5), rand(c), rand(c), rand(c, lo=0.5, hi=1.5)]
    names = ["gamma", "beta", "mean", "var"]
    nodes = [helper.make_node("BatchNormalization", ["x", *names], ["b"], epsilon=1e-3)]
    outs = {}
    for t in ("Relu", "Sigmoid", "Tanh", "Exp", "Neg"):
        nodes.append(helper.make_node(t, ["b"], [t]))
        outs[t] = None
    nodes += [helper.make_node("Sigmoid", ["b"], ["s"]), helper.make_node("Sqrt", ["s"], ["Sqrt"])]
    outs["Sqrt"] = None
    mod = check(make(nodes, {"x": x.shape}, outs, dict(zip(names, bn))), {"x": x})
    assert "nn.batch_norm" in ops_of(mod) and len(mod["main"].outputs) == 6


@pytest.mark.parametrize("opset", [11, 13])
def test_clip(opset):
    x = rand(2, 5, lo=-8, hi=8)
    mn, mx = np.array(-0.5, np.float32), np.array(0.7, np.float32)
    nodes = [
        helper.make_node("Clip", ["x", "mn", "mx"], ["a"]),
        helper.make_node("Clip", ["x", "zero", "six"], ["relu6"]),
        helper.make_node("Clip", ["x", "zero"], ["relu"]),
        helper.make_node("Clip", ["x", "", "mx"], ["upper"]),
    ]
    inits = {"mn": mn, "mx": mx, "zero": np.array(0, np.float32), "six": np.array(6, np.float32)}
    outs = {"a": None, "relu6": None, "relu": None, "upper": None}
    mod = check(make(nodes, {"x": x.shape}, outs, inits, opset=opset), {"x": x})
    assert ops_of(mod).count("clip") == 3 and ops_of(mod).count("nn.relu") == 1
    assert mod["main"].params == (mod["main"].param("x"),)  # min/max were folded, not params


def test_clip_attributes_before_opset_11():
    x = rand(3, 4, lo=-3, hi=3)
    node = helper.make_node("Clip", ["x"], ["y"], min=-1.0, max=2.0)
    mod, params = from_onnx(make([node], {"x": x.shape}, {"y": None}, opset=9))
    np.testing.assert_allclose(evaluate(mod, {"x": x}), np.clip(x, -1, 2))


def test_binary_broadcast():
    x, y = rand(2, 3, 4), rand(3, 1)
    c = rand(4)
    nodes = [
        helper.make_node("Add", ["x", "y"], ["add"]),
        helper.make_node("Sub", ["x", "c"], ["sub"]),
        helper.make_node("Mul", ["y", "x"], ["mul"]),
        helper.make_node("Div", ["x", "d"], ["div"]),
        helper.make_node("Max", ["x", "y"], ["max"]),
        helper.make_node("Min", ["c", "x"], ["min"]),
    ]
    outs = dict.fromkeys(["add", "sub", "mul", "div", "max", "min"])
    model = make(nodes, {"x": x.shape, "y": y.shape}, outs, {"c": c, "d": rand(1, 4, lo=1, hi=2)})
    mod = check(model, {"x": x, "y": y})
    assert ops_of(mod) == ["add", "subtract", "multiply", "divide", "maximum", "minimum"]


@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_gemm(trans_a, trans_b):
    a = rand(3, 5) if not trans_a else rand(5, 3)
    b = rand(5, 4) if not trans_b else rand(4, 5)
    c = rand(4)
    node = helper.make_node(
        "Gemm", ["a", "b", "c"], ["y"], alpha=0.7, beta=1.3, transA=trans_a, transB=trans_b
    )
    model = make([node], {"a": a.shape}, {"y": None}, {"b": b, "c": c})
    mod, params = from_onnx(model)
    dense = calls(mod["main"])[1 if trans_a else 0]
    assert dense.op == "nn.dense" and dense.args[1].shape == (4, 5)
    if trans_b:
        np.testing.assert_array_equal(params["b"], b)
    else:  # folded: no transpose call, a transposed parameter
        assert "transpose" not in ops_of(mod)[1 if trans_a else 0 :]
        np.testing.assert_array_equal(params["b_T"], b.T)
    np.testing.assert_allclose(params["c_scaled"], 1.3 * c, rtol=1e-6)
    check(model, {"a": a})


def test_gemm_without_c_and_matrix_c():
    a, b, c = rand(3, 5), rand(5, 4), rand(3, 4)
    nodes = [
        helper.make_node("Gemm", ["a", "b"], ["y"]),
        helper.make_node("Gemm", ["a", "b", "c"], ["z"]),
    ]
    model = make(nodes, {"a": a.shape}, {"y": None, "z": None}, {"b": b, "c": c})
    mod = check(model, {"a": a})
    # b is transposed once, shared by both dense calls
    assert [v.name for v in mod["main"].params] == ["a", "b_T", "c"]
    assert ops_of(mod) == ["nn.dense", "nn.dense", "add"]


def test_matmul():
    x, w = rand(4, 6), rand(6, 3)
    p, q = rand(2, 4, 5), rand(2, 5, 3)
    r, s = rand(2, 2, 3, 4), rand(2, 2, 4, 3)
    t = rand(2, 3, 6)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["dense"]),
        helper.make_node("MatMul", ["p", "q"], ["bmm"]),
        helper.make_node("MatMul", ["r", "s"], ["bmm4"]),
        helper.make_node("MatMul", ["t", "w"], ["dense3"]),
    ]
    inputs = {"x": x.shape, "p": p.shape, "q": q.shape, "r": r.shape, "s": s.shape, "t": t.shape}
    model = make(nodes, inputs, dict.fromkeys(["dense", "bmm", "bmm4", "dense3"]), {"w": w})
    mod = check(model, {"x": x, "p": p, "q": q, "r": r, "s": s, "t": t})
    assert ops_of(mod).count("nn.batch_matmul") == 2 and ops_of(mod).count("nn.dense") == 2


def test_softmax():
    x = rand(2, 3, 4) * 3
    nodes = [
        helper.make_node("Softmax", ["x"], ["last"], axis=-1),
        helper.make_node("Softmax", ["x"], ["mid"], axis=1),
    ]
    mod = check(make(nodes, {"x": x.shape}, {"last": None, "mid": None}, opset=13), {"x": x})
    assert ops_of(mod) == ["nn.softmax", "nn.softmax"]


def _softmax_2d(x, axis):
    flat = x.reshape(int(np.prod(x.shape[:axis])), -1)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)


def test_softmax_before_opset_13_coerces_to_2d():
    # onnx's ReferenceEvaluator applies the opset-13 rule to every version; onnxruntime and
    # the spec flatten the input to 2-D at ``axis`` (default 1) before opset 13.
    x = rand(2, 3, 4) * 3
    nodes = [
        helper.make_node("Softmax", ["x"], ["last"], axis=2),
        helper.make_node("Softmax", ["x"], ["dflt"]),
        helper.make_node("Softmax", ["x"], ["zero"], axis=0),
    ]
    model = make(nodes, {"x": x.shape}, dict.fromkeys(["last", "dflt", "zero"]), opset=11)
    mod, params = from_onnx(model)
    last, dflt, zero = evaluate(mod, {"x": x}, params)
    np.testing.assert_allclose(last, _softmax_2d(x, 2), rtol=1e-5)
    np.testing.assert_allclose(dflt, _softmax_2d(x, 1), rtol=1e-5)
    np.testing.assert_allclose(zero, _softmax_2d(x, 0), rtol=1e-5)
    np.testing.assert_allclose(dflt.reshape(2, -1).sum(axis=1), 1.0, rtol=1e-5)
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for ours, want in zip((last, dflt, zero), sess.run(None, {"x": x})):
        np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-6)


def test_shapes_and_data_movement():
    x, y = rand(2, 3, 1, 4), rand(2, 5, 1, 4)
    nodes = [
        helper.make_node("Flatten", ["x"], ["f1"]),
        helper.make_node("Flatten", ["x"], ["f2"], axis=2),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
        helper.make_node("Concat", ["x", "y"], ["cat"], axis=1),
        helper.make_node("Squeeze", ["x", "sq_axes"], ["sq"]),
        helper.make_node("Unsqueeze", ["sq", "unsq_axes"], ["unsq"]),
        helper.make_node("Pad", ["x", "pads", "pad_value"], ["pad"]),
        helper.make_node("Identity", ["x"], ["idn"]),
        helper.make_node("Dropout", ["x"], ["drop"]),
        helper.make_node("Cast", ["x"], ["cast"], to=TensorProto.DOUBLE),
    ]
    inits = {
        "shape": np.array([0, -1, 2], np.int64),
        "sq_axes": np.array([2], np.int64),
        "unsq_axes": np.array([0, -1], np.int64),
        "pads": np.array([0, 1, 0, 2, 0, 0, 1, 1], np.int64),
        "pad_value": np.array(0.25, np.float32),
    }
    outs = ["f1", "f2", "r", "t", "cat", "sq", "unsq", "pad", "idn", "drop"]
    model = make(nodes, {"x": x.shape, "y": y.shape}, dict.fromkeys(outs), inits, opset=13)
    model.graph.output.append(helper.make_tensor_value_info("cast", TensorProto.DOUBLE, None))
    mod = check(model, {"x": x, "y": y})
    assert mod["main"].outputs[-1].dtype == "float64"
    assert {"nn.batch_flatten", "nn.pad", "concatenate", "squeeze"} <= set(ops_of(mod))


def test_squeeze_unsqueeze_pad_attributes_before_opset_13():
    x = rand(1, 3, 1, 2)
    nodes = [
        helper.make_node("Squeeze", ["x"], ["sq"], axes=[0, 2]),
        helper.make_node("Unsqueeze", ["sq"], ["un"], axes=[1]),
        helper.make_node("Squeeze", ["x"], ["all"]),
    ]
    check(make(nodes, {"x": x.shape}, dict.fromkeys(["un", "all"]), opset=11), {"x": x})
    pad = helper.make_node("Pad", ["x"], ["y"], pads=[0, 0, 1, 2, 0, 0, 0, 1], value=1.5)
    mod, _ = from_onnx(make([pad], {"x": x.shape}, {"y": None}, opset=9))
    want = np.pad(x, [(0, 0), (0, 0), (1, 0), (2, 1)], constant_values=1.5)
    np.testing.assert_array_equal(evaluate(mod, {"x": x}), want)


def test_weight_folded_from_an_initializer_stays_a_parameter():
    # Transpose of an initializer is done at import time; the result is a parameter named
    # after the Transpose's output, not a constant baked into the graph.
    x, w = rand(3, 4), rand(5, 4)
    nodes = [
        helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "wt"], ["y"]),
    ]
    mod = check(make(nodes, {"x": x.shape}, {"y": None}, {"w": w}), {"x": x})
    f = mod["main"]
    assert [v.name for v in f.params] == ["x", "wt_T"] and ops_of(mod) == ["nn.dense"]
    _, params = from_onnx(make(nodes, {"x": x.shape}, {"y": None}, {"w": w}))
    np.testing.assert_array_equal(params["wt_T"], w)  # (w^T)^T, folded twice


def test_input_dtype_from_model_or_dtype_argument():
    node = helper.make_node("Relu", ["x"], ["y"])
    model = make([node], {"x": (2, 3)}, {"y": None})
    assert from_onnx(model)[0]["main"].param("x").dtype == "float32"
    mod, _ = from_onnx(model, dtype={"x": "float64"})
    assert mod["main"].param("x").dtype == "float64"
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.UNDEFINED
    assert from_onnx(model, dtype="float16")[0]["main"].param("x").dtype == "float16"


def test_constant_node_and_cast_fold():
    x = rand(2, 3)
    k = rand(2, 3)
    nodes = [
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(k)),
        helper.make_node("Constant", [], ["two"], value_float=2.0),
        helper.make_node("Mul", ["x", "k"], ["m"]),
        helper.make_node("Add", ["m", "two"], ["y"]),
    ]
    mod = check(make(nodes, {"x": x.shape}, {"y": None}, opset=13), {"x": x})
    assert [v.name for v in mod["main"].params] == ["x"]


def test_torch_style_flatten_chain():
    # torch.flatten(x, 1) as exported: Shape -> Gather(0) -> Unsqueeze -> Concat(-1) -> Reshape.
    x, w, b = rand(2, 3, 4, 4), rand(5, 48), rand(5)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["i0"], value=numpy_helper.from_array(np.array(0))),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        helper.make_node("Constant", [], ["ax"], value=numpy_helper.from_array(np.array([0]))),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node("Constant", [], ["m1"], value=numpy_helper.from_array(np.array([-1]))),
        helper.make_node("Concat", ["n1", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),
        helper.make_node("Gemm", ["flat", "w", "b"], ["y"], transB=1),
    ]
    mod = check(make(nodes, {"x": x.shape}, {"y": None}, {"w": w, "b": b}, opset=13), {"x": x})
    assert ops_of(mod) == ["reshape", "nn.dense", "nn.bias_add"]
    assert calls(mod["main"])[0].attrs["newshape"] == (2, 48)


# --- whole models -----------------------------------------------------------------------------


def _cnn(opset=15):
    """conv-bn-relu-maxpool-flatten-gemm-softmax (opset >= 14: onnx's ReferenceEvaluator runs
    BatchNormalization-9 in training mode)."""
    inits = {
        "w": rand(8, 3, 3, 3) * 0.5, "cb": rand(8),
        "g": rand(8, lo=0.8, hi=1.2), "be": rand(8), "mu": rand(8), "var": rand(8, lo=0.5, hi=1),
        "fc_w": rand(10, 8 * 4 * 4) * 0.2, "fc_b": rand(10),
    }  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["data", "w", "cb"], ["c"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["fc"], transB=1),
        helper.make_node("Softmax", ["fc"], ["prob"], axis=1),
    ]
    model = make(nodes, {"data": ("N", 3, 8, 8)}, {"prob": ("N", 10)}, inits, opset=opset)
    return model, inits


@pytest.mark.parametrize("opset", [15, 21])
def test_cnn_model(opset):
    model, inits = _cnn(opset)
    x = rand(2, 3, 8, 8)
    mod = check(model, {"data": x}, shape={"data": (2, 3, 8, 8)})
    f = mod["main"]
    assert ops_of(mod) == [
        "nn.conv2d", "nn.bias_add", "nn.batch_norm", "nn.relu", "nn.max_pool2d",
        "nn.batch_flatten", "nn.dense", "nn.bias_add", "nn.softmax",
    ]  # fmt: skip
    assert [v.name for v in f.params] == ["data", "w", "cb", "g", "be", "mu", "var", "fc_w", "fc_b"]
    assert f.shape == (2, 10)


def test_same_upper_group_conv_model():
    x = rand(1, 8, 9, 9)
    inits = {"w1": rand(8, 1, 3, 3), "w2": rand(16, 4, 1, 1), "b2": rand(16)}
    nodes = [
        helper.make_node(
            "Conv", ["x", "w1"], ["dw"], group=8, auto_pad="SAME_UPPER", strides=[2, 2]
        ),  # fmt: skip
        helper.make_node("Clip", ["dw", "lo", "hi"], ["r6"]),
        helper.make_node("Conv", ["r6", "w2", "b2"], ["y"], group=2, auto_pad="SAME_UPPER"),
    ]
    inits.update(lo=np.array(0, np.float32), hi=np.array(6, np.float32))
    mod = check(make(nodes, {"x": x.shape}, {"y": None}, inits), {"x": x})
    convs = [c for c in calls(mod["main"]) if c.op == "nn.conv2d"]
    assert [c.attrs["groups"] for c in convs] == [8, 2]
    assert convs[0].attrs["padding"] == (1, 1, 1, 1) and convs[0].shape == (1, 8, 5, 5)


def test_onnxruntime_agrees():
    ort = pytest.importorskip("onnxruntime")
    model, _ = _cnn()
    x = rand(2, 3, 8, 8)
    mod, params = from_onnx(model, shape={"data": x.shape})
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"data": x})
    np.testing.assert_allclose(evaluate(mod, {"data": x}, params), want, rtol=1e-4, atol=1e-6)


def test_load_from_path(tmp_path):
    model, _ = _cnn()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    mod, params = from_onnx(str(path), shape={"data": (1, 3, 8, 8)})
    assert mod["main"].shape == (1, 10) and set(params) >= {"w", "fc_w"}


# --- errors ----------------------------------------------------------------------------------


def test_unsupported_op_names_node_and_points_at_the_ops_page():
    node = helper.make_node("NonZero", ["x"], ["y"], name="nz0")
    with pytest.raises(OnnxImportError) as err:
        from_onnx(make([node], {"x": (2, 3)}, {"y": None}))
    msg = str(err.value)
    assert "\n" not in msg and len(msg) < 200  # one line, no op list inside
    assert "node 'nz0' (NonZero): op type NonZero is not supported" in msg
    assert "docs/onnx-ops.md" in msg


def test_unsupported_op_without_name_gives_index():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("LeakyRelu", ["r"], ["y"])]
    with pytest.raises(ValueError, match=r"#1 \(unnamed\) \(LeakyRelu\)"):
        from_onnx(make(nodes, {"x": (2, 3)}, {"y": None}))


def test_unsupported_attribute_value():
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect", name="pad1")
    model = make([node], {"x": (1, 4)}, {"y": None}, {"pads": np.array([0, 1, 0, 1])})
    with pytest.raises(OnnxImportError, match=r"'pad1' \(Pad\).*mode='reflect'.*constant"):
        from_onnx(model)


def test_unknown_attribute_and_auto_pad_value():
    node = helper.make_node("Relu", ["x"], ["y"], foo=1)
    with pytest.raises(OnnxImportError, match="attribute foo is not supported"):
        from_onnx(make([node], {"x": (2,)}, {"y": None}))
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], auto_pad="SAME_SIDE")
    with pytest.raises(OnnxImportError, match="auto_pad='SAME_SIDE'.*SAME_UPPER"):
        from_onnx(make([node], {"x": (1, 1, 4, 4)}, {"y": None}))


def test_missing_shape_for_dynamic_input():
    model, _ = _cnn()
    with pytest.raises(OnnxImportError, match=r"'data'.*dynamic.*shape=\{'data': \(\.\.\.\)\}"):
        from_onnx(model)
    with pytest.raises(OnnxImportError, match="not graph inputs"):
        from_onnx(model, shape={"dat": (1, 3, 8, 8)})


def test_graph_tensor_where_a_constant_is_needed():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="r")]
    model = make(nodes, {"x": (2, 3), "s": (2,)}, {"y": None})
    model.graph.input[1].type.tensor_type.elem_type = TensorProto.INT64
    with pytest.raises(OnnxImportError, match=r"'r' \(Reshape\).*known at import time"):
        from_onnx(model)


def test_second_outputs_are_refused():
    node = helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2], name="mp")
    model = make([node], {"x": (1, 1, 4, 4)}, {"y": None})
    with pytest.raises(OnnxImportError, match=r"'mp' \(MaxPool\).*\['idx'\]"):
        from_onnx(model)
    node = helper.make_node("Dropout", ["x"], ["y", "mask"])
    with pytest.raises(OnnxImportError, match="only the first output"):
        from_onnx(make([node], {"x": (2, 2)}, {"y": None}))


def test_conv_on_a_2d_tensor_is_refused():
    node = helper.make_node("Conv", ["x", "w"], ["y"])
    model = make([node], {"x": (2, 8)}, {"y": None}, {"w": rand(3, 2, 3)})
    with pytest.raises(OnnxImportError, match=r"#0 \(unnamed\) \(Conv\).*2-D.*3-D \(NCW\)"):
        from_onnx(model)


def test_missing_onnx_package(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match="pip install onnx"):
        from_onnx("model.onnx")


def test_unsupported_cast_type():
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.UINT16, name="c")
    with pytest.raises(OnnxImportError, match=r"'c' \(Cast\).*uint16.*float32"):
        from_onnx(make([node], {"x": (2,)}, {"y": None}))


def test_shape_error_is_wrapped_with_the_node():
    node = helper.make_node("Add", ["x", "y"], ["z"], name="add0")
    with pytest.raises(OnnxImportError, match=r"'add0' \(Add\).*do not broadcast"):
        from_onnx(make([node], {"x": (2, 3), "y": (4,)}, {"z": None}))
