"""from_onnx on what U-Nets, 1-D convnets and RNNs export (issue 26): ConvTranspose, Conv on NCW,
InstanceNormalization, GroupNormalization (opset 18 and torch's decomposed form), Resize /
Upsample, LSTM and GRU. Small onnx.helper graphs written the way the legacy (opset 17) and
dynamo (opset 18) exporters write them, each output checked against onnxruntime on random
inputs, through the numpy reference and, for a U-Net-like graph and the RNNs, compiled on llvm
after the NHWC pass."""

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autosched as ansor  # noqa: E402
from tensorir.graph import OnnxImportError, calls, evaluate, from_onnx  # noqa: E402
from tensorir.graph.passes import optimize  # noqa: E402

F = TensorProto.FLOAT
RNG = np.random.default_rng(26)


def rand(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def make(nodes, inputs, outputs, inits=(), opset=17):
    """inputs: {name: shape}; outputs: names (shapes left to inference)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, F, None) for n in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def ort_run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check(model, feeds, build=False, rtol=1e-5, atol=1e-5):
    """Every output of the imported model (numpy reference, and compiled on llvm if ``build``)
    against onnxruntime; returns the imported module."""
    want = ort_run(model, feeds)
    mod, params = from_onnx(model)
    ours = evaluate(mod, feeds, params)
    ours = ours if isinstance(ours, list) else [ours]
    assert len(ours) == len(want)
    for a, b in zip(ours, want):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    if build:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # untuned: default schedules
            lib = ansor.build(mod, "llvm", params=params)
        gm = ansor.GraphModule(lib)
        for k, v in feeds.items():
            gm.set_input(k, v)
        gm.run()
        for i, b in enumerate(want):
            np.testing.assert_allclose(gm.get_output(i).numpy(), b, rtol=rtol, atol=atol)
    return mod


def ops_of(mod):
    return [c.op for c in calls(mod["main"])]


# --- ConvTranspose and 1-D Conv --------------------------------------------------------------


@pytest.mark.parametrize(
    "xshape, wshape, attrs",
    [
        ((1, 4, 5, 6), (4, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1])),
        ((2, 4, 5, 5), (4, 2, 2, 2), dict(strides=[2, 2])),  # the U-Net upsampling block
        ((1, 4, 4, 5), (4, 3, 3, 2), dict(group=2, dilations=[2, 1], pads=[0, 1, 2, 0])),
        ((1, 3, 4, 4), (3, 2, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
        ((1, 2, 4, 6), (2, 3, 3, 3), dict(strides=[3, 2], auto_pad="SAME_LOWER")),
        ((1, 3, 4, 4), (3, 2, 3, 3), dict(strides=[2, 2], output_shape=[8, 9])),
        ((1, 4, 4, 4), (4, 1, 3, 3), dict(group=4, strides=[1, 2], pads=[2, 2, 2, 2])),
        ((2, 3, 7), (3, 4, 3), dict(strides=[3], pads=[1, 0], output_padding=[2])),  # 1-D
    ],
)
def test_conv_transpose(xshape, wshape, attrs):
    # a one-value list stands for every spatial dim
    attrs = {k: v * (len(xshape) - 2) if isinstance(v, list) and len(v) == 1 else v
             for k, v in attrs.items()}  # fmt: skip
    x, w, b = rand(*xshape), rand(*wshape), rand(wshape[1] * attrs.get("group", 1))
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    mod = check(make([node], {"x": xshape}, ["y"], {"w": w, "b": b}), {"x": x}, build=True)
    assert "nn.conv2d_transpose" in ops_of(mod)


def test_conv_transpose_without_bias_dynamo_opset():
    x, w = rand(1, 2, 3, 3), rand(2, 3, 2, 2)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], kernel_shape=[2, 2])
    check(make([node], {"x": x.shape}, ["y"], {"w": w}, opset=18), {"x": x})


@pytest.mark.parametrize(
    "attrs",
    [dict(pads=[1, 1]), dict(strides=[2], dilations=[2], pads=[0, 2]), dict(group=2),
     dict(auto_pad="SAME_UPPER", strides=[2])],
)  # fmt: skip
def test_conv1d(attrs):
    g = attrs.get("group", 1)
    x, w, b = rand(2, 4, 11), rand(6, 4 // g, 3), rand(6)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    mod = check(make([node], {"x": x.shape}, ["y"], {"w": w, "b": b}), {"x": x}, build=True)
    conv = next(c for c in calls(mod["main"]) if c.op == "nn.conv2d")
    assert conv.args[0].shape[2] == 1  # an (N, C, 1, W) view


# --- normalizations --------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 4, 7)])
def test_instance_norm(shape):
    c = shape[1]
    x, s, b = rand(*shape) * 3 + 1, rand(c), rand(c)
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)
    mod = check(make([node], {"x": shape}, ["y"], {"s": s, "b": b}), {"x": x}, build=True)
    assert ops_of(mod) == ["nn.instance_norm"]


@pytest.mark.parametrize("opset", [18, 21])
def test_group_norm(opset):
    # opset 18 gives scale and bias per group, 21 per channel
    x = rand(2, 6, 3, 4) * 2
    n = 6 if opset >= 21 else 3
    s, b = rand(n), rand(n)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)
    try:
        ort_run(make([node], {"x": x.shape}, ["y"], {"s": s, "b": b}, opset=opset), {"x": x})
    except Exception as e:  # noqa: BLE001 - an onnxruntime without this opset's kernel
        pytest.skip(f"onnxruntime cannot run GroupNormalization-{opset}: {e}")
    model = make([node], {"x": x.shape}, ["y"], {"s": s, "b": b}, opset=opset)
    mod = check(model, {"x": x}, build=True)
    assert ops_of(mod) == ["nn.group_norm"]


def test_group_norm_as_torch_exports_it_before_opset_18():
    """nn.GroupNorm(2, 4) by the legacy exporter: Reshape -> InstanceNormalization (unit
    scale, zero bias) -> Reshape -> Mul -> Add, between two convolutions."""
    x = rand(1, 3, 5, 5)
    inits = {
        "w1": rand(4, 3, 3, 3), "w2": rand(2, 4, 1, 1), "shape_g": np.array([1, 2, -1]),
        "ones": np.ones(2, np.float32), "zeros": np.zeros(2, np.float32),
        "shape_x": np.array([1, 4, 5, 5]), "gamma": rand(4, 1, 1), "beta": rand(4, 1, 1),
    }  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["c", "shape_g"], ["r"]),
        helper.make_node("InstanceNormalization", ["r", "ones", "zeros"], ["n"], epsilon=1e-5),
        helper.make_node("Reshape", ["n", "shape_x"], ["r2"]),
        helper.make_node("Mul", ["r2", "gamma"], ["m"]),
        helper.make_node("Add", ["m", "beta"], ["a"]),
        helper.make_node("Conv", ["a", "w2"], ["y"]),
    ]
    model = make(nodes, {"x": x.shape}, ["y"], inits)
    mod = check(model, {"x": x}, build=True)
    # imported as one group_norm on the 4-D tensor (the reshapes cancel), so it goes NHWC
    assert "reshape" not in ops_of(mod) and "nn.group_norm" in ops_of(mod)
    func = optimize(mod, from_onnx(model)[1])
    (norm,) = [c for c in calls(func) if c.op == "nn.group_norm"]
    assert norm.attrs["axis"] == 3 and norm.attrs["num_groups"] == 2
    assert [c.op for c in calls(func)].count("layout_transform") == 2


# --- resize ----------------------------------------------------------------------------------

_RESIZE_CASES = [
    # (mode, coordinate mode, nearest mode, scales or sizes)
    ("nearest", "asymmetric", "floor", dict(scales=[1, 1, 2, 2])),  # legacy nn.Upsample
    ("nearest", "asymmetric", "floor", dict(scales=[1, 1, 2, 3])),
    ("nearest", "half_pixel", "round_prefer_floor", dict(sizes=[2, 3, 9, 5])),
    ("nearest", "half_pixel", "round_prefer_ceil", dict(scales=[1, 1, 0.5, 2])),
    ("nearest", "align_corners", "ceil", dict(sizes=[2, 3, 7, 11])),
    ("nearest", "tf_half_pixel_for_nn", "floor", dict(scales=[1, 1, 2, 1.5])),
    ("linear", "half_pixel", None, dict(scales=[1, 1, 2, 2])),  # bilinear, align_corners=False
    ("linear", "pytorch_half_pixel", None, dict(sizes=[2, 3, 1, 13])),
    ("linear", "align_corners", None, dict(scales=[1, 1, 2, 1.5])),
    ("linear", "asymmetric", None, dict(sizes=[2, 3, 3, 4])),  # downsampling
    ("cubic", "half_pixel", None, dict(scales=[1, 1, 2, 2])),  # bicubic
    ("cubic", "align_corners", None, dict(sizes=[2, 3, 9, 7])),
    ("cubic", "pytorch_half_pixel", None, dict(scales=[1, 1, 0.5, 1.5])),
]


@pytest.mark.parametrize("case", _RESIZE_CASES)
@pytest.mark.parametrize("opset", [13, 18])
def test_resize(case, opset):
    mode, coord, nearest, given = case
    x = rand(2, 3, 4, 6)
    attrs = dict(mode=mode, coordinate_transformation_mode=coord)
    if nearest:
        attrs["nearest_mode"] = nearest
    inits = {"roi": np.zeros(0, np.float32)}
    if "scales" in given:
        inits["scales"] = np.array(given["scales"], np.float32)
        names = ["x", "roi", "scales"] if opset < 18 else ["x", "", "scales"]
    else:
        inits["sizes"] = np.array(given["sizes"], np.int64)
        names = ["x", "roi", "", "sizes"] if opset < 18 else ["x", "", "", "sizes"]
    if opset >= 18:
        del inits["roi"]
    node = helper.make_node("Resize", names, ["y"], **attrs)
    mod = check(make([node], {"x": x.shape}, ["y"], inits, opset=opset), {"x": x}, build=True)
    assert ops_of(mod) == ["image.resize2d"]


def test_resize_sizes_on_two_axes_1d_opset_10_and_upsample():
    x = rand(1, 2, 3, 5)
    node = helper.make_node(
        "Resize", ["x", "", "", "sizes"], ["y"], mode="linear", axes=[2, 3],
        coordinate_transformation_mode="half_pixel",
    )  # fmt: skip
    check(make([node], {"x": x.shape}, ["y"], {"sizes": np.array([6, 4])}, opset=18), {"x": x})
    # nn.Upsample(scale_factor=2, mode="linear") on (N, C, W) as the legacy exporter writes it
    x1 = rand(2, 3, 5)
    node = helper.make_node(
        "Resize", ["x1", "roi", "s1"], ["y"], mode="linear",
        coordinate_transformation_mode="pytorch_half_pixel",
    )  # fmt: skip
    inits = {"roi": np.zeros(0, np.float32), "s1": np.array([1, 1, 2], np.float32)}
    check(make([node], {"x1": x1.shape}, ["y"], inits), {"x1": x1}, build=True)
    # Resize-10: nearest rounds the source index down when upsampling, up when downsampling
    for mode, sc in (("nearest", [1, 1, 0.6, 0.75]), ("nearest", [1, 1, 2, 3]),
                     ("linear", [1, 1, 2, 0.75])):  # fmt: skip
        r10 = helper.make_node("Resize", ["x", "s"], ["y"], mode=mode)
        model = make([r10], {"x": x.shape}, ["y"], {"s": np.array(sc, np.float32)}, opset=10)
        check(model, {"x": x})
    up = helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")
    scales = np.array([1, 1, 2, 2], np.float32)
    check(make([up], {"x": x.shape}, ["y"], {"scales": scales}, opset=9), {"x": x})


# --- a U-Net block through the NHWC pass ---------------------------------------------------


def test_unet_like_graph_builds_in_nhwc():
    """Conv -> Relu -> MaxPool -> Conv -> ConvTranspose -> Concat(skip) -> Conv -> Resize ->
    InstanceNormalization: the transposed conv, the resize and the norm become NHWC."""
    x = rand(1, 3, 8, 8)
    inits = {
        "w1": rand(4, 3, 3, 3), "b1": rand(4), "w2": rand(8, 4, 3, 3), "b2": rand(8),
        "wt": rand(8, 4, 2, 2), "bt": rand(4), "w3": rand(4, 8, 3, 3), "b3": rand(4),
        "scales": np.array([1, 1, 2, 2], np.float32), "s": rand(4), "bn": rand(4),
    }  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("ConvTranspose", ["r2", "wt", "bt"], ["up"], strides=[2, 2]),
        helper.make_node("Concat", ["up", "r1"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
        helper.make_node(
            "Resize",
            ["c3", "", "scales"],
            ["rs"],
            mode="linear",
            coordinate_transformation_mode="pytorch_half_pixel",
        ),  # fmt: skip
        helper.make_node("InstanceNormalization", ["rs", "s", "bn"], ["y"]),
    ]
    model = make(nodes, {"x": x.shape}, ["y"], inits)
    mod = check(model, {"x": x}, build=True, rtol=1e-4)
    _, params = from_onnx(model)
    func = optimize(mod, params)
    by_op = {c.op: c for c in calls(func)}
    assert by_op["nn.conv2d_transpose"].attrs["data_layout"] == "NHWC"
    assert by_op["nn.conv2d_transpose"].attrs["kernel_layout"] == "HWIO"
    assert by_op["image.resize2d"].attrs["layout"] == "NHWC"
    assert by_op["nn.instance_norm"].attrs["axis"] == 3
    # one transform in (the input), one out (the output)
    assert [c.op for c in calls(func)].count("layout_transform") == 2


# --- LSTM and GRU ----------------------------------------------------------------------------

SEQ, BATCH, INP, HID = 3, 2, 4, 5


def _rnn_model(op_type, direction, with_init, gates, extra_attrs=(), opset=17, outputs=None):
    nd = 2 if direction == "bidirectional" else 1
    inits = {"W": rand(nd, gates * HID, INP), "R": rand(nd, gates * HID, HID)}
    if with_init:  # the bias is optional too: left out in the cases without initial states
        inits["B"] = rand(nd, 2 * gates * HID)
    names = ["x", "W", "R", "B", "", "h0"] if with_init else ["x", "W", "R"]
    inputs = {"x": (SEQ, BATCH, INP)}
    if with_init:
        inputs["h0"] = (nd, BATCH, HID)
        if op_type == "LSTM":
            names.append("c0")
            inputs["c0"] = (nd, BATCH, HID)
    outputs = outputs or (["Y", "Y_h", "Y_c"] if op_type == "LSTM" else ["Y", "Y_h"])
    node = helper.make_node(op_type, names, outputs, hidden_size=HID, direction=direction,
                            name="rnn", **dict(extra_attrs))  # fmt: skip
    model = make([node], inputs, outputs, inits, opset=opset)
    feeds = {k: rand(*s) for k, s in inputs.items()}
    return model, feeds


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("with_init", [False, True])
def test_lstm(direction, with_init):
    model, feeds = _rnn_model("LSTM", direction, with_init, 4)
    mod = check(model, feeds, build=direction == "bidirectional")
    assert "nn.dense" in ops_of(mod)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("with_init", [False, True])
@pytest.mark.parametrize("lbr", [0, 1])
def test_gru(direction, with_init, lbr):
    model, feeds = _rnn_model("GRU", direction, with_init, 3, {"linear_before_reset": lbr})
    check(model, feeds, build=direction == "bidirectional" and with_init)


def test_lstm_peepholes_clip_and_static_initial_state():
    nd = 1
    inits = {
        "W": rand(nd, 4 * HID, INP), "R": rand(nd, 4 * HID, HID), "B": rand(nd, 8 * HID),
        "P": rand(nd, 3 * HID), "h0": rand(nd, BATCH, HID),
    }  # fmt: skip
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "", "P"], ["Y", "Y_h"],
                            hidden_size=HID, clip=0.5)  # fmt: skip
    model = make([node], {"x": (SEQ, BATCH, INP)}, ["Y", "Y_h"], inits, opset=14)
    check(model, {"x": rand(SEQ, BATCH, INP)})


@pytest.mark.parametrize("op_type, gates", [("LSTM", 4), ("GRU", 3)])
def test_batch_first_layout_and_clip(op_type, gates):
    """layout=1 (batch first; onnxruntime has no kernel for it): ours against onnxruntime on
    the same layer in layout 0, fed and read transposed."""
    nd = 2
    inits = {
        "W": rand(nd, gates * HID, INP), "R": rand(nd, gates * HID, HID),
        "B": rand(nd, 2 * gates * HID),
    }  # fmt: skip
    x, h0 = rand(BATCH, SEQ, INP), rand(BATCH, nd, HID)

    def layer(layout, xshape, hshape):
        node = helper.make_node(op_type, ["x", "W", "R", "B", "", "h0"], ["Y", "Y_h"],
                                hidden_size=HID, direction="bidirectional", clip=0.7,
                                layout=layout)  # fmt: skip
        return make([node], {"x": xshape, "h0": hshape}, ["Y", "Y_h"], inits, opset=14)

    y, y_h = ort_run(layer(0, (SEQ, BATCH, INP), (nd, BATCH, HID)),
                     {"x": x.transpose(1, 0, 2), "h0": h0.transpose(1, 0, 2)})  # fmt: skip
    mod, params = from_onnx(layer(1, x.shape, h0.shape))
    ours_y, ours_h = evaluate(mod, {"x": x, "h0": h0}, params)
    np.testing.assert_allclose(ours_y, y.transpose(2, 0, 1, 3), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours_h, y_h.transpose(1, 0, 2), rtol=1e-5, atol=1e-5)


def test_rnn_without_y():
    model, feeds = _rnn_model("GRU", "reverse", True, 3, outputs=["", "Y_h"])
    del model.graph.output[0]
    check(model, feeds)


def test_lstm_only_last_state_as_torch_uses_it():
    """The legacy exporter's nn.LSTM: Y squeezed; Y_h output alone (Y_c unused)."""
    model, feeds = _rnn_model("LSTM", "forward", True, 4, outputs=["Y", "Y_h", ""])
    del model.graph.output[2]
    node = helper.make_node("Squeeze", ["Y", "ax"], ["Ys"])
    model.graph.node.append(node)
    model.graph.initializer.append(numpy_helper.from_array(np.array([1]), "ax"))
    model.graph.output[0].name = "Ys"
    check(model, feeds)


# --- what is refused -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "node, inits, match",
    [
        (
            helper.make_node("Resize", ["x", "", "s"], ["y"], name="rz", mode="linear",
                             coordinate_transformation_mode="tf_crop_and_resize"),
            {"s": np.array([1, 1, 2, 2], np.float32)},
            r"'rz' \(Resize\): attribute coordinate_transformation_mode='tf_crop_and_resize'",
        ),
        (
            helper.make_node("Resize", ["x", "", "s"], ["y"], name="rz", mode="linear"),
            {"s": np.array([1, 2, 2, 2], np.float32)},
            r"'rz' \(Resize\): resizing the N or C dims",
        ),
        (
            helper.make_node("LSTM", ["x", "W", "R"], ["y"], name="l", hidden_size=2,
                             activations=["Relu", "Tanh", "Tanh"]),
            {"W": rand(1, 8, 4), "R": rand(1, 8, 2)},
            r"'l' \(LSTM\): attribute activations=\['Relu', 'Tanh', 'Tanh'\] is not supported",
        ),
        (
            helper.make_node("GRU", ["x", "W", "R", "", "lens"], ["y"], name="g", hidden_size=2),
            {"W": rand(1, 6, 4), "R": rand(1, 6, 2), "lens": np.array([4, 3], np.int32)},
            r"'g' \(GRU\): sequence_lens \[4, 3\] shorter than the sequence",
        ),
        (
            helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="ct",
                             output_shape=[20, 20]),
            {"w": rand(2, 3, 2, 2)},
            r"'ct' \(ConvTranspose\): the output size \[20, 20\] \(output_shape\) is larger",
        ),
        (
            helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn",
                             num_groups=3),
            {"s": rand(3), "b": rand(3)},
            r"'gn' \(GroupNormalization\): num_groups=3 must divide",
        ),
    ],
)  # fmt: skip
def test_unsupported_attribute_values_name_the_node(node, inits, match):
    shape = (4, 2, 4) if node.op_type in ("LSTM", "GRU") else (1, 2, 4, 4)
    model = make([node], {"x": shape}, ["y"], inits)
    with pytest.raises(OnnxImportError, match=match) as info:
        from_onnx(model)
    assert "\n" not in str(info.value)


def test_rnn_weights_must_be_initializers():
    node = helper.make_node("GRU", ["x", "W", "R"], ["y"], name="g", hidden_size=2)
    model = make([node], {"x": (3, 1, 4), "W": (1, 6, 4)}, ["y"], {"R": rand(1, 6, 2)})
    with pytest.raises(OnnxImportError, match=r"'g' \(GRU\): input 1 \(W.*known at import"):
        from_onnx(model)


def test_conv_transpose_is_a_tunable_task(tmp_path):
    """The transposed conv is a conv-like reduction task: a short tune measures without errors
    and the tuned build still matches onnxruntime."""
    x = rand(1, 4, 5, 5)
    inits = {"wt": rand(4, 3, 3, 3), "bt": rand(3)}
    node = helper.make_node("ConvTranspose", ["x", "wt", "bt"], ["y"], strides=[2, 2])
    model = make([node], {"x": x.shape}, ["y"], inits)
    mod, params = from_onnx(model)
    tasks, _ = ansor.extract_tasks(mod, params, "llvm")
    (task,) = tasks
    assert "conv2d_transpose_nhwc" in str(task.compute_dag)
    log = tmp_path / "log.json"
    search = ansor.SearchParams(evolutionary_search_population=8, evolutionary_search_num_iters=1)
    task.tune(
        ansor.TuningOptions(num_measure_trials=2, num_measures_per_round=2, verbose=0,
                            measure_callbacks=[ansor.RecordToFile(log)]),
        ansor.SketchPolicy(task, ansor.RandomModel(), params=search, verbose=0),
    )  # fmt: skip
    records = list(ansor.load_records(log))
    assert records and all(r.error_no == 0 for _, r in records)
    with ansor.ApplyHistoryBest(log) as ctx, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the layout transforms around it are untuned
        lib = ansor.build(mod, "llvm", params=params)
    assert task.workload_key in ctx.hit_keys
    gm = ansor.GraphModule(lib)
    gm.set_input("x", x)
    gm.run()
    np.testing.assert_allclose(gm.get_output(0).numpy(), ort_run(model, {"x": x})[0], rtol=1e-5,
                               atol=1e-5)  # fmt: skip
