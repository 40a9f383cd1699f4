"""from_onnx on whole small models the modern exporters write (issue 26): a CNN with dynamo's
global average pooling through the NHWC pass, and a BERT encoder layer as the legacy exporter
writes it; each built on llvm and compared with onnxruntime on random inputs.
"""

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx_case_kit import Case, assert_close, const, f32, feeds_of, model_of, node, run_ort  # noqa: E402

import autosched  # noqa: E402
from tensorir.graph import calls, from_onnx  # noqa: E402
from tensorir.graph.passes import optimize  # noqa: E402

# --- a CNN with dynamo's global average pooling, through the NHWC pass -----------------------


def _cnn_model():
    rng = np.random.default_rng(7)
    inits = {
        "w1": rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3,
        "b1": rng.standard_normal(8).astype(np.float32),
        "w2": rng.standard_normal((8, 1, 3, 3)).astype(np.float32) * 0.3,
        "fc": rng.standard_normal((8, 10)).astype(np.float32),
    }
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        node("HardSwish", ["c1"], ["h1"]),
        node("Conv", ["h1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=8),
        # spatial attention: the mean over channels (keepdims) stays channels-last
        const("c1ax", np.array([1], np.int64)),
        node("ReduceMean", ["c2", "c1ax"], ["cm"], keepdims=1),
        node("Sigmoid", ["cm"], ["sg"]),
        node("Mul", ["c2", "sg"], ["att"]),
        node("Erf", ["att"], ["e"]),
        node("Add", ["att", "e"], ["a"]),
        const("ax", np.array([-1, -2], np.int64)),
        node("ReduceMean", ["a", "ax"], ["gap"], keepdims=0),
        node("MatMul", ["gap", "fc"], ["y"]),
    ]
    return model_of([Case("cnn", 18, nodes, {"x": f32(2, 3, 10, 10)}, ["y"], inits)], 18)


def test_cnn_with_reduce_mean_pool_converts_to_nhwc_builds_and_matches_onnxruntime():
    model = _cnn_model()
    feeds = feeds_of(model, seed=3)
    mod, params = from_onnx(model)
    func = optimize(mod, params, layout="NHWC", device_kind="cpu")
    by_op = {}
    for c in calls(func):
        by_op.setdefault(c.op, []).append(c)
    assert [c.attrs["layout"] for c in by_op["nn.global_avg_pool2d"]] == ["NHWC"]
    assert [c.attrs["axis"] for c in by_op["mean"]] == [(3,)]
    assert all(c.attrs["data_layout"] == "NHWC" for c in by_op["nn.conv2d"])
    # one transform into NHWC at the input; the pooled (N, 1, 1, C) value goes back once
    assert len(by_op["layout_transform"]) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = autosched.build(mod, "llvm", params=params)
    gm = autosched.GraphModule(lib)
    gm.set_input("cnn.x", feeds["cnn.x"])
    gm.run()
    (want,) = run_ort(model, feeds)
    assert_close(gm.get_output(0).numpy(), want, "cnn.y")


# --- a BERT encoder layer as the legacy exporter writes it ----------------------------------


def _bert_layer_model(b=2, s=5, h=16, heads=2, ffn=32):
    rng = np.random.default_rng(11)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)

    d = h // heads
    inits = {n: w(h, h) for n in ("wq", "wk", "wv", "wo")}
    inits.update({n: w(h) for n in ("bq", "bk", "bv", "bo", "ln1_b", "ln2_b", "b2")})
    inits.update(ln1_w=w(h) + 1, ln2_w=w(h) + 1, w1=w(h, ffn), b1=w(ffn), w2=w(ffn, h))
    nodes = [
        # extended mask: (1 - mask[:, None, None, :]) * -10000
        const("ax12", np.array([1, 2], np.int64)),
        node("Unsqueeze", ["mask", "ax12"], ["m4"]),
        const("one", np.float32(1.0)),
        node("Sub", ["one", "m4"], ["inv"]),
        const("big", np.float32(-10000.0)),
        node("Mul", ["inv", "big"], ["ext"]),
        # heads: x.view(b, s, heads, d).permute(0, 2, 1, 3), the view's shape from Shape
        node("Shape", ["x"], ["xs"]),
        const("i01", np.array([0, 1], np.int64)),
        node("Gather", ["xs", "i01"], ["bs"], axis=0),
        const("hd", np.array([heads, d], np.int64)),
        node("Concat", ["bs", "hd"], ["split_shape"], axis=0),
    ]
    for n in ("q", "k", "v"):
        nodes += [
            node("MatMul", ["x", f"w{n}"], [f"{n}0"]),
            node("Add", [f"{n}0", f"b{n}"], [f"{n}1"]),
            node("Reshape", [f"{n}1", "split_shape"], [f"{n}2"]),
            node("Transpose", [f"{n}2"], [n], perm=[0, 2, 3, 1] if n == "k" else [0, 2, 1, 3]),
        ]
    nodes += [
        node("MatMul", ["q", "k"], ["sc0"]),  # [b, heads, s, d] x [b, heads, d, s]
        const("sq", np.float32(np.sqrt(d))),
        node("Div", ["sc0", "sq"], ["sc1"]),
        node("Add", ["sc1", "ext"], ["sc"]),
        node("Softmax", ["sc"], ["p"], axis=-1),
        node("MatMul", ["p", "v"], ["ctx0"]),
        node("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
        const("hs", np.array([b, s, h], np.int64)),
        node("Reshape", ["ctx1", "hs"], ["ctx"]),
        node("MatMul", ["ctx", "wo"], ["o0"]),
        node("Add", ["o0", "bo"], ["o1"]),
        node("Add", ["o1", "x"], ["r1"]),
        node("LayerNormalization", ["r1", "ln1_w", "ln1_b"], ["a"], epsilon=1e-12),
        node("MatMul", ["a", "w1"], ["f0"]),
        node("Add", ["f0", "b1"], ["f1"]),
        const("s2", np.float32(1.4142135)),
        node("Div", ["f1", "s2"], ["g0"]),
        node("Erf", ["g0"], ["g1"]),
        node("Add", ["g1", "one"], ["g2"]),
        node("Mul", ["f1", "g2"], ["g3"]),
        const("half", np.float32(0.5)),
        node("Mul", ["g3", "half"], ["g"]),
        node("MatMul", ["g", "w2"], ["f2"]),
        node("Add", ["f2", "b2"], ["f3"]),
        node("Add", ["f3", "a"], ["r2"]),
        node("LayerNormalization", ["r2", "ln2_w", "ln2_b"], ["y"], epsilon=1e-12),
    ]
    case = Case("bert", 17, nodes, {"x": f32(b, s, h), "mask": f32(b, s)}, ["y"], inits)
    return model_of([case], 17)


def test_bert_layer_imports_builds_and_matches_onnxruntime():
    model = _bert_layer_model()
    feeds = feeds_of(model, seed=5)
    feeds["bert.mask"] = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.float32)
    mod, params = from_onnx(model)
    used = [c.op for c in calls(mod["main"])]
    assert used.count("nn.layer_norm") == 2 and used.count("nn.batch_matmul") == 2
    assert "concatenate" not in used  # the view's shape folded at import
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = autosched.build(mod, "llvm", params=params)
    gm = autosched.GraphModule(lib)
    for k in ("bert.x", "bert.mask"):
        gm.set_input(k, feeds[k])
    gm.run()
    (want,) = run_ort(model, feeds)
    assert_close(gm.get_output(0).numpy(), want, "bert.y")
