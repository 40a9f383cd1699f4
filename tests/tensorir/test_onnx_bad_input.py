"""from_onnx on bad input: files that are not models, bytes, bad window attributes, shape=
overrides of another rank, duplicate outputs (issue 14)."""

import re

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
    with pytest.warns(UserWarning, match=r"graph output 'y' is listed 2 times; each is returned"):
        mod, params = from_onnx(model)
    ours = evaluate(mod, {"x": x}, params)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = sess.run(None, {"x": x})
    assert len(ours) == len(theirs) == 2
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- issue 27: accepted silently

RELU = [helper.make_node("Relu", ["x"], ["y"])]


@pytest.mark.parametrize("declared", [(3, 2), (2, 3, 1), (2, 4)])
def test_a_declared_output_shape_that_is_not_the_computed_one_is_refused(declared):
    model = _model(RELU, [("x", (2, 3))], [("y", declared)])
    match = rf"graph output 'y': the model declares shape {re.escape(str(declared))} but the"
    with pytest.raises(OnnxImportError, match=match + r" graph computes \(2, 3\)"):
        from_onnx(model)


def test_declared_output_shapes_that_fit_and_symbolic_dims_are_accepted():
    for declared in [(2, 3), ("N", 3), ("N", "C"), None]:
        from_onnx(_model(RELU, [("x", (2, 3))], [("y", declared)]))


def test_a_declared_output_shape_off_after_a_shape_override_is_a_warning():
    # shape= changed the batch: the model's own output shape is expectedly stale.
    model = _model(RELU, [("x", (1, 3))], [("y", (1, 3))])
    with pytest.warns(UserWarning, match=r"graph output 'y': the model declares shape \(1, 3\)"):
        mod, _ = from_onnx(model, shape={"x": (4, 3)})
    assert mod["main"].body.shape == (4, 3)


@pytest.mark.parametrize("shape", [(0, 3), (2, 0)])
def test_a_zero_size_input_is_refused(shape):
    with pytest.raises(OnnxImportError, match=r"input 'x' has a zero-size dimension"):
        from_onnx(_model(RELU, [("x", shape)], [("y", None)]))
    with pytest.raises(OnnxImportError, match=r"input 'x' has a zero-size dimension"):
        from_onnx(_model(RELU, [("x", (2, 3))], [("y", None)]), shape={"x": shape})


def _add_w(w, as_input=False):
    inputs = [("x", (2, 3))] + ([("w", (2, 3))] if as_input else [])
    return _model([helper.make_node("Add", ["x", "w"], ["y"])], inputs, [("y", None)], [("w", w)])


@pytest.mark.parametrize("keep", [10, 12, 0])
def test_raw_data_shorter_than_the_initializer_shape_is_refused(keep):
    w = np.random.default_rng(3).uniform(-1, 1, (2, 3)).astype("float32")
    model = _add_w(w)
    model.graph.initializer[0].raw_data = model.graph.initializer[0].raw_data[:keep]
    match = rf"initializer 'w': its data holds {keep} bytes but shape \(2, 3\) of float32 needs 24"
    with pytest.raises(OnnxImportError, match=match):
        from_onnx(model)


def test_an_input_that_is_also_an_initializer_is_a_weight_with_a_warning():
    # ONNX lets an initializer give a graph input its default; autosched imports it as a weight
    # (the default), says so, and does not make it an input.
    rng = np.random.default_rng(4)
    w = rng.uniform(-1, 1, (2, 3)).astype("float32")
    with pytest.warns(UserWarning, match=r"graph input 'w' also has an initializer: imported as"):
        mod, params = from_onnx(_add_w(w, as_input=True))
    assert [p.name for p in mod["main"].params] == ["x", "w"] and "w" in params
    x = rng.uniform(-1, 1, (2, 3)).astype("float32")
    np.testing.assert_array_equal(evaluate(mod, {"x": x}, params), x + w)
