"""to_mixed_precision (Relay's ToMixedPrecision): which ops run in 16 bits, float32 accumulation
and outputs, the graph passes keeping the dtypes, a small network built on LLVM against the
float32 network, the accuracy report, and an fp16 ONNX model against onnxruntime."""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

import autosched as ansor
from tensorir.dtype import tolerance
from tensorir.graph import ir as gir
from tensorir.graph import nn, op
from tensorir.graph.passes import (
    convert_layout,
    fold_constant,
    fuse_ops,
    optimize,
    to_mixed_precision,
)
from tensorir.graph.reference import evaluate

LOWP = ["float16", "bfloat16"]
ANCHORS = ("nn.conv2d", "nn.dense", "nn.batch_matmul")


def small_net(seed=0, batch=2):
    """conv -> bias -> relu -> conv -> + residual -> global pool -> dense -> bias -> softmax, and
    a batch_matmul + layer norm branch added to the logits (NCHW, constant weights)."""
    rng = np.random.default_rng(seed)
    data = op.var("data", (batch, 4, 8, 8))

    def w(*shape, s=0.2):
        return op.const(rng.normal(0, s, shape).astype("float32"))

    c1 = nn.relu(nn.bias_add(nn.conv2d(data, w(8, 4, 3, 3), padding=1), w(8, s=0.5)))
    c2 = op.add(nn.conv2d(c1, w(8, 8, 3, 3), padding=1), c1)
    pooled = nn.batch_flatten(nn.global_avg_pool2d(c2))
    logits = nn.bias_add(nn.dense(pooled, w(10, 8, s=1.0)), w(10, s=0.1))
    seq = op.reshape(pooled, (batch, 2, 4))
    bmm = nn.batch_matmul(seq, op.reshape(w(batch * 5 * 4), (batch, 5, 4)))
    normed = nn.layer_norm(op.reshape(bmm, (batch, 10)), w(10, s=1.0), w(10, s=0.1))
    out = nn.softmax(op.add(logits, normed))
    return gir.Function((data,), out)


def rand_input(func, seed=1):
    return np.random.default_rng(seed).normal(size=func.params[0].shape).astype("float32")


@pytest.mark.parametrize("dtype", LOWP)
def test_anchors_run_low_with_float32_accumulation(dtype):
    func = small_net()
    mixed = to_mixed_precision(func, dtype)
    calls = gir.calls(mixed)
    anchors = [c for c in calls if c.op in ANCHORS]
    assert len(anchors) == 4
    for c in anchors:
        assert all(a.dtype == dtype for a in c.args)
        assert c.attrs["out_dtype"] == "float32" and c.dtype == "float32"
    users = gir.users(mixed)
    for c in anchors:  # the accumulator is rounded to 16 bits once, right after the op
        assert [(u.op, u.attrs["dtype"]) for u in users[c]] == [("cast", dtype)]
    by_op = {}
    for c in calls:
        by_op.setdefault(c.op, []).append(c)
    # The epilogues follow in 16 bits, their constants converted here.
    for name in ("nn.bias_add", "nn.relu"):
        assert by_op[name][0].dtype == dtype
    assert isinstance(by_op["nn.bias_add"][0].args[1], gir.Constant)
    assert by_op["nn.bias_add"][0].args[1].dtype == dtype
    # Sums, normalisations and the output stay float32.
    for name in ("nn.global_avg_pool2d", "nn.layer_norm", "nn.softmax"):
        assert all(a.dtype == "float32" for c in by_op[name] for a in c.args), name
        assert all(c.dtype == "float32" for c in by_op[name]), name
    assert mixed.body.dtype == "float32" and mixed.params == func.params
    assert mixed.params[0].dtype == "float32"


def test_bad_dtype_is_refused():
    with pytest.raises(ValueError, match=r"to_mixed_precision: dtype='float32'.*float16"):
        to_mixed_precision(small_net(), "float32")
    with pytest.raises(ValueError, match=r"to_mixed_precision: dtype='int8'"):
        ansor.to_mixed_precision(small_net(), "int8")


@pytest.mark.parametrize("dtype", LOWP)
def test_reference_of_the_mixed_graph_is_close_to_float32(dtype):
    func = small_net()
    x = rand_input(func)
    ref = evaluate(func, {"data": x})
    got = evaluate(to_mixed_precision(func, dtype), {"data": x})
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, *tolerance(dtype))
    assert (got.argmax(1) == ref.argmax(1)).all()


def norm_then_dense(residual=True, norm_is_output=False, seed=3):
    """layer norm -> dense -> bias (+ the norm again, a residual add): a transformer block's
    shape. With ``norm_is_output`` the norm is also returned."""
    rng = np.random.default_rng(seed)
    x = op.var("x", (8, 16))

    def w(*shape, s=0.3):
        return op.const(rng.normal(0, s, shape).astype("float32"))

    ln = nn.layer_norm(x, w(16, s=1.0), w(16, s=0.1))
    out = nn.bias_add(nn.dense(ln, w(16, 16)), w(16, s=0.1))
    out = op.add(out, ln) if residual else out
    return gir.Function((x,), (out, ln) if norm_is_output else out)


def norm_reshaped_then_dense(seed=5):
    """An imported BERT's form: a (batch, seq, hidden) layer norm reshaped to 2-D for the dense,
    the dense's result reshaped back for the residual add."""
    rng = np.random.default_rng(seed)
    x = op.var("x", (2, 4, 16))

    def w(*shape, s=0.3):
        return op.const(rng.normal(0, s, shape).astype("float32"))

    ln = nn.layer_norm(x, w(16, s=1.0), w(16, s=0.1))
    dense = nn.dense(op.reshape(ln, (8, 16)), w(16, 16))
    return gir.Function((x,), op.add(op.reshape(dense, (2, 4, 16)), ln))


@pytest.mark.parametrize("dtype", LOWP)
def test_a_norm_read_by_a_dense_is_stored_in_16_bits_for_every_reader(dtype):
    func = norm_then_dense()
    mixed = to_mixed_precision(func, dtype)
    users = gir.users(mixed)
    (norm,) = [c for c in gir.calls(mixed) if c.op == "nn.layer_norm"]
    assert norm.dtype == "float32"  # computed in float32 ...
    (copy,) = users[norm]  # ... and rounded once, for the dense and the residual add alike
    assert (copy.op, copy.attrs["dtype"]) == ("cast", dtype)
    assert sorted(u.op for u in users[copy]) == ["add", "nn.dense"]
    (add,) = [u for u in users[copy] if u.op == "add"]
    assert add.dtype == dtype
    x = rand_input(func)
    np.testing.assert_allclose(
        evaluate(mixed, {"x": x}), evaluate(func, {"x": x}), *tolerance(dtype)
    )


def test_a_norm_reshaped_for_a_dense_is_stored_in_16_bits_too():
    func = norm_reshaped_then_dense()
    mixed = to_mixed_precision(func, "float16")
    users = gir.users(mixed)
    (norm,) = [c for c in gir.calls(mixed) if c.op == "nn.layer_norm"]
    (copy,) = users[norm]
    assert (copy.op, copy.attrs["dtype"]) == ("cast", "float16")
    assert sorted(u.op for u in users[copy]) == ["add", "reshape"]
    x = rand_input(func)
    np.testing.assert_allclose(
        evaluate(mixed, {"x": x}), evaluate(func, {"x": x}), *tolerance("float16")
    )


def test_a_norm_that_no_dense_reads_or_that_is_an_output_stays_float32():
    # the network's output keeps the float32 norm exactly: no 16-bit copy of it
    both = to_mixed_precision(norm_then_dense(norm_is_output=True), "float16")
    (norm,) = [c for c in gir.calls(both) if c.op == "nn.layer_norm"]
    assert both.body[1] is norm
    x = rand_input(both)
    ref = evaluate(norm_then_dense(norm_is_output=True), {"x": x})
    np.testing.assert_array_equal(evaluate(both, {"x": x})[1], ref[1])
    # a norm read by elementwise ops only is not narrowed
    rng = np.random.default_rng(4)
    v = op.var("v", (8, 16))
    g = op.const(rng.normal(size=16).astype("float32"))
    plain = gir.Function((v,), op.add(nn.layer_norm(v, g, g), v))
    mixed = to_mixed_precision(plain, "float16")
    assert all(c.dtype == "float32" for c in gir.calls(mixed))


def bn_net(seed=0):
    """conv -> batch_norm -> relu -> dense, weights as parameters (as the zoo gives them)."""
    rng = np.random.default_rng(seed)
    data = op.var("data", (1, 3, 8, 8))
    names = {"w": (6, 3, 3, 3), "g": (6,), "b": (6,), "m": (6,), "v": (6,), "d": (5, 6 * 36)}
    vs = {k: op.var(k, s) for k, s in names.items()}
    params = {k: rng.normal(0, 0.3, s).astype("float32") for k, s in names.items()}
    params["v"] = np.abs(params["v"]) + 0.5
    x = nn.conv2d(data, vs["w"])
    x = nn.relu(nn.batch_norm(x, vs["g"], vs["b"], vs["m"], vs["v"]))
    out = nn.dense(nn.batch_flatten(x), vs["d"])
    return gir.Function((data, *vs.values()), out), params


@pytest.mark.parametrize("dtype", LOWP)
def test_weights_as_parameters_are_converted_at_compile_time(dtype):
    func, params = bn_net()
    mixed = to_mixed_precision(func, dtype)
    # Parameters keep their float32 type; a cast reads them ...
    assert [p.dtype for p in mixed.params] == ["float32"] * len(func.params)
    conv = next(c for c in gir.calls(mixed) if c.op == "nn.conv2d")
    assert conv.args[1].op == "cast" and conv.args[1].args[0] is func.param("w")
    # ... that folding (what the build does after binding them) turns into 16-bit constants.
    folded = fold_constant(gir.bind_params(mixed, params))
    conv = next(c for c in gir.calls(folded) if c.op == "nn.conv2d")
    assert isinstance(conv.args[1], gir.Constant) and conv.args[1].dtype == dtype
    x = rand_input(func)
    np.testing.assert_allclose(
        evaluate(folded, {"data": x}), evaluate(func, {"data": x}, params), *tolerance(dtype)
    )


def test_with_params_batch_norm_folds_into_the_16_bit_conv():
    func, params = bn_net()
    mixed = ansor.to_mixed_precision(func, "float16", params)["main"]
    ops = [c.op for c in gir.calls(mixed)]
    assert "nn.batch_norm" not in ops and "multiply" not in ops  # folded into the weights
    conv = next(c for c in gir.calls(mixed) if c.op == "nn.conv2d")
    assert isinstance(conv.args[1], gir.Constant) and conv.args[1].dtype == "float16"
    assert [p.name for p in mixed.params] == ["data"]
    x = rand_input(func)
    np.testing.assert_allclose(
        evaluate(mixed, {"data": x}), evaluate(func, {"data": x}, params), *tolerance("float16")
    )


@pytest.mark.parametrize("dtype", LOWP)
def test_layout_and_fusion_keep_the_dtypes(dtype):
    mixed = to_mixed_precision(small_net(), dtype)
    nhwc = convert_layout(mixed, "NHWC")
    convs = [c for c in gir.calls(nhwc) if c.op == "nn.conv2d"]
    assert [c.attrs["data_layout"] for c in convs] == ["NHWC", "NHWC"]
    assert all(c.args[0].dtype == dtype and c.attrs["out_dtype"] == "float32" for c in convs)
    winograd = "nn.contrib_conv2d_winograd_without_weight_transform"
    plain = optimize(small_net(), layout="NHWC", use_winograd=True)
    assert winograd in [c.op for c in gir.calls(plain)]
    # No winograd for a 16-bit conv accumulating in float32: its transforms amplify rounding.
    optimized = optimize(mixed, layout="NHWC", use_winograd=True)
    assert winograd not in [c.op for c in gir.calls(optimized)]
    groups = fuse_ops(optimized)
    conv_groups = [g for g in groups if any(c.op == "nn.conv2d" for c in g.calls)]
    assert len(conv_groups) == 2
    first = [c.op for c in conv_groups[0].calls]
    # conv + its rounding cast + bias + relu: one kernel that reads and writes 16 bits.
    assert first[first.index("nn.conv2d") :][:4] == ["nn.conv2d", "cast", "add", "nn.relu"]
    assert conv_groups[0].output.dtype == dtype


@pytest.mark.parametrize("dtype", LOWP)
def test_small_network_built_on_llvm_agrees_with_float32(dtype):
    func = small_net(batch=4)
    mixed = ansor.to_mixed_precision(func, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned kernels: the default schedules
        lib = ansor.build(mixed, target="llvm")
    gm = ansor.GraphModule(lib["default"](ansor.device("cpu")))

    def run(x):
        gm.set_input("data", x)
        gm.run()
        return gm.get_output(0).numpy()

    x = rand_input(func)
    got = run(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, evaluate(mixed, {"data": x}), *tolerance(dtype))
    report = ansor.accuracy_report(func, None, mixed, n=8, lowp_run=run)
    assert report.n == 8 and report.dtype == dtype
    assert report.top1_agreement >= 0.9
    assert 0 < report.max_rel_error < tolerance(dtype)[0]
    assert f"{dtype} vs float32 on 8 random inputs: top-1 agreement" in str(report)


def test_accuracy_report_sees_a_wrong_network():
    func = small_net()
    other = small_net(seed=5)  # other weights: a different network
    report = ansor.accuracy_report(func, None, other, n=6)
    assert report.top1_agreement < 1.0 and report.max_rel_error > 0.05
    with pytest.raises(ValueError, match="accuracy_report: the network must have one input"):
        ansor.accuracy_report(bn_net()[0], None, other, n=1)


def test_fp16_onnx_model_imports_and_matches_onnxruntime():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(4)
    w = rng.normal(0, 0.3, (6, 3, 3, 3)).astype(np.float16)
    b = rng.normal(0, 0.3, (6,)).astype(np.float16)
    wd = rng.normal(0, 0.3, (6 * 36, 5)).astype(np.float16)
    nodes = [
        helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.FLOAT16),
        helper.make_node("Conv", ["x16", "w", "b"], ["c"]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"]),
        helper.make_node("MatMul", ["f", "wd"], ["m"]),
        helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "fp16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 3, 8, 8))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 5))],
        initializer=[numpy_helper.from_array(a, n) for n, a in (("w", w), ("b", b), ("wd", wd))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    x = rng.normal(size=(2, 3, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    mod, params = ansor.from_onnx(model)
    assert params["w"].dtype == np.float16
    func = mod["main"]
    conv = next(c for c in gir.calls(func) if c.op == "nn.conv2d")
    assert conv.dtype == "float16" and conv.args[0].dtype == "float16"
    np.testing.assert_allclose(evaluate(mod, {"x": x}, params), want, *tolerance("float16"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = ansor.build(mod, target="llvm", params=params)
    gm = ansor.GraphModule(lib["default"](ansor.device("cpu")))
    gm.set_input("x", x)
    gm.run()
    np.testing.assert_allclose(gm.get_output(0).numpy(), want, *tolerance("float16"))


@pytest.mark.parametrize("suffix", [".json", ".so"])
def test_exported_bfloat16_network_loads_its_16_bit_weights(tmp_path, suffix):
    """npz files cannot keep ml_dtypes' bfloat16: the weights travel as their bits."""
    func = small_net()
    mixed = ansor.to_mixed_precision(func, "bfloat16")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = ansor.build(mixed, target="llvm")
    path = tmp_path / f"net{suffix}"
    lib.export_library(str(path))
    loaded = ansor.load_module(str(path))
    x = rand_input(func)
    outs = []
    for m in (lib, loaded):
        gm = ansor.GraphModule(m["default"](ansor.device("cpu")))
        gm.set_input("data", x)
        gm.run()
        outs.append(gm.get_output(0).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[1], evaluate(func, {"data": x}), *tolerance("bfloat16"))


# Each op of the table in 16 bits: its te compute built on LLVM against the op's reference
# run on the same (exactly widened) values in float32, within the dtype's tolerance.
OP_CASES = [
    ("nn.conv2d", [(1, 6, 6, 4), (3, 3, 4, 5)], {"padding": 1, "data_layout": "NHWC"}),
    ("nn.dense", [(3, 16), (5, 16)], {}),
    ("nn.batch_matmul", [(2, 3, 8), (2, 4, 8)], {}),
    ("nn.bias_add", [(2, 5), (5,)], {}),
    ("nn.relu", [(4, 7)], {}),
    ("add", [(4, 7), (7,)], {}),
    ("multiply", [(4, 7), (4, 7)], {}),
    ("divide", [(4, 7), (4, 7)], {}),
    ("maximum", [(4, 7), (4, 7)], {}),
    ("sigmoid", [(4, 7)], {}),
    ("tanh", [(4, 7)], {}),
    ("clip", [(4, 7)], {"a_min": -0.5, "a_max": 0.5}),
    ("nn.max_pool2d", [(1, 4, 6, 6)], {"pool_size": (2, 2), "strides": (2, 2)}),
    ("nn.avg_pool2d", [(1, 4, 6, 6)], {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}),
    ("nn.global_avg_pool2d", [(1, 4, 5, 5)], {}),
    ("nn.softmax", [(3, 10)], {}),
    ("nn.layer_norm", [(3, 10), (10,), (10,)], {}),
    ("mean", [(3, 10)], {"axis": (1,)}),
    ("concatenate", [(2, 3), (2, 4)], {"axis": 1}),
    ("transpose", [(2, 3, 4)], {"axes": (2, 0, 1)}),
    ("nn.pad", [(2, 3)], {"pad_width": ((1, 0), (0, 2)), "pad_value": 0.5}),
]


@pytest.mark.parametrize("dtype", LOWP)
@pytest.mark.parametrize("case", OP_CASES, ids=lambda c: c[0])
def test_op_in_16_bits_on_llvm_matches_its_float32_reference(case, dtype):
    from tensorir.dag import ComputeDAG
    from tensorir.dtype import to_numpy
    from tensorir.ops import NameScope, compute_op

    name, shapes, attrs = case
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    arrays = [rng.uniform(0.5, 1.5, s) if name == "divide" and k == 1 else rng.normal(size=s)
              for k, s in enumerate(shapes)]  # fmt: skip
    low = [a.astype(np.float32).astype(to_numpy(dtype)) for a in arrays]
    exact = [a.astype(np.float32) for a in low]
    vars32 = [op.var(f"x{k}", s) for k, s in enumerate(shapes)]
    call = gir.make_call(name, vars32, attrs)
    want = evaluate(gir.Function(tuple(vars32), call), {f"x{k}": a for k, a in enumerate(exact)})
    scope = NameScope()
    ins = [scope.placeholder(s, dtype) for s in shapes]
    out = compute_op(name, ins, dict(call.attrs), name_scope=scope)
    assert out.dtype == dtype
    f = ansor.build(ComputeDAG([*ins, out]).get_init_state(), "llvm")
    got = np.zeros(out.shape, to_numpy(dtype))
    f(*low, got)
    np.testing.assert_allclose(got.astype(np.float32), want, *tolerance(dtype), err_msg=name)


def test_onnx_bfloat16_casts_import_and_build():
    pytest.importorskip("onnx")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Cast", ["x"], ["xb"], to=TensorProto.BFLOAT16),
        helper.make_node("Relu", ["xb"], ["r"]),
        helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "bf16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (3, 5))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (3, 5))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    mod, params = ansor.from_onnx(model)
    assert [c.dtype for c in gir.calls(mod["main"])] == ["bfloat16", "bfloat16", "float32"]
    x = np.random.default_rng(6).normal(size=(3, 5)).astype(np.float32)
    want = np.maximum(x.astype(ml_dtypes.bfloat16).astype(np.float32), 0)
    np.testing.assert_array_equal(evaluate(mod, {"x": x}, params), want)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = ansor.build(mod, target="llvm", params=params)
    gm = ansor.GraphModule(lib["default"](ansor.device("cpu")))
    gm.set_input("x", x)
    gm.run()
    np.testing.assert_array_equal(gm.get_output(0).numpy(), want)
