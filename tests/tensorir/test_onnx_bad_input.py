"""from_onnx on bad input: files that are not models, bytes, bad window attributes, shape=
overrides of another rank, duplicate outputs (issue 14)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tensorir.graph import OnnxImportError, evaluate, from_onnx  # noqa: E402

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F, s) for n, s in outputs],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _relu():
    return _model([helper.make_node("Relu", ["x"], ["y"])], [("x", (1, 3, 4, 4))], [("y", None)])


def test_an_empty_or_truncated_file_is_not_an_onnx_model(tmp_path):
    data = _relu().SerializeToString()
    empty, cut = tmp_path / "empty.onnx", tmp_path / "cut.onnx"
    empty.write_bytes(b"")
    cut.write_bytes(data[: len(data) // 2])
    for path in (empty, cut):
        with pytest.raises(OnnxImportError, match=f"not an ONNX model: {path}"):
            from_onnx(path)
        with pytest.raises(OnnxImportError, match="not an ONNX model"):
            from_onnx(path.read_bytes())
    with pytest.raises(FileNotFoundError, match="no such ONNX file: .*missing.onnx"):
        from_onnx(tmp_path / "missing.onnx")


def test_serialized_bytes_are_accepted_and_other_types_refused():
    model = _relu()
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 4, 4)).astype("float32")
    mod, params = from_onnx(model.SerializeToString())
    np.testing.assert_array_equal(evaluate(mod, {"x": x}, params), np.maximum(x, 0))
    with pytest.raises(TypeError, match="from_onnx takes an onnx.ModelProto, .* got int"):
        from_onnx(3)


@pytest.mark.parametrize(
    "op,attrs,bad",
    [
        ("Conv", {"strides": [0, 0]}, "strides=\\[0, 0\\]"),
        ("Conv", {"dilations": [1, 0]}, "dilations=\\[1, 0\\]"),
        ("MaxPool", {"kernel_shape": [2, 2], "strides": [0, 1]}, "strides=\\[0, 1\\]"),
        ("AveragePool", {"kernel_shape": [0, 2]}, "kernel_shape=\\[0, 2\\]"),
    ],
)
def test_window_attributes_must_be_positive(op, attrs, bad):
    inputs = ["x", "w"] if op == "Conv" else ["x"]
    w = np.random.default_rng(1).uniform(-1, 1, (4, 3, 3, 3)).astype("float32")
    model = _model(
        [helper.make_node(op, inputs, ["y"], name="n1", **attrs)],
        [("x", (1, 3, 8, 8))],
        [("y", None)],
        [("w", w)] if op == "Conv" else (),
    )
    with pytest.raises(OnnxImportError, match=f"node 'n1' \\({op}\\): attribute {bad} must be pos"):
        from_onnx(model)


def test_a_shape_override_of_another_rank_is_refused():
    with pytest.raises(
        OnnxImportError,
        match=r"input 'x' the shape \(1, 3, 4\) \(3-D\), but the model's input is 4-D",
    ):
        from_onnx(_relu(), shape={"x": (1, 3, 4)})
    mod, _ = from_onnx(_relu(), shape={"x": (2, 3, 5, 5)})
    assert mod["main"].params[0].shape == (2, 3, 5, 5)


def test_duplicate_graph_outputs_are_all_returned_like_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    model = _model(
        [helper.make_node("Relu", ["x"], ["y"])], [("x", (2, 3))], [("y", (2, 3)), ("y", (2, 3))]
    )
    x = np.random.default_rng(2).uniform(-1, 1, (2, 3)).astype("float32")
    mod, params = from_onnx(model)
    ours = evaluate(mod, {"x": x}, params)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = sess.run(None, {"x": x})
    assert len(ours) == len(theirs) == 2
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)
