"""Gather / GatherElements / Einsum from ONNX (issue 26): graphs written with onnx.helper the
way torch's exporters write them (legacy TorchScript, opset 17; dynamo, opset 18), int64
``input_ids`` as graph inputs, every output checked against onnxruntime on random inputs, both
through the graph reference and compiled (LLVM, default schedules)."""

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ORT = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autosched as ansor  # noqa: E402
from runtime.errors import IndexOutOfRangeError  # noqa: E402
from tensorir.graph import OnnxImportError, calls, evaluate, from_onnx  # noqa: E402

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32
RNG = np.random.default_rng(26)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def make(nodes, inputs, outputs, inits=(), opset=17):
    """inputs/outputs: {name: (elem_type, shape)}."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in outputs.items()],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def ort_run(model, feeds):
    sess = ORT.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check(model, feeds, compiled=False, rtol=1e-4, atol=1e-5):
    """Every output of the imported graph (and, with ``compiled``, of the LLVM build) against
    onnxruntime; returns the module."""
    mod, params = from_onnx(model)
    ref = ort_run(model, feeds)
    ours = evaluate(mod, feeds, params)
    ours = ours if isinstance(ours, list) else [ours]
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    if compiled:
        m = build(mod, params)
        m.run(**feeds)
        for i, b in enumerate(ref):
            np.testing.assert_allclose(m.get_output(i).numpy(), b, rtol=rtol, atol=atol)
    return mod


def build(mod, params):
    with warnings.catch_warnings():  # untuned: every kernel on its default schedule
        warnings.simplefilter("ignore", UserWarning)
        lib = ansor.build(mod, "llvm", params=params)
    return ansor.GraphModule(lib)


def const_node(name, value):
    return helper.make_node(
        "Constant", [], [name], value=numpy_helper.from_array(np.asarray(value))
    )


def embeddings_model(opset=17, vocab=13, seq=6, hidden=8):
    """BERT's embeddings as the legacy exporter writes them: word, position (a constant
    arange) and token-type lookups, summed, then a dense layer (MatMul + Add) and a softmax;
    a second output takes the last position (``x[:, -1]``: Gather with a scalar index -1)."""
    nodes = [
        helper.make_node("Gather", ["word", "input_ids"], ["w"]),
        helper.make_node("Gather", ["pos", "position_ids"], ["p"]),
        helper.make_node("Gather", ["types", "token_type_ids"], ["t"], axis=0),
        helper.make_node("Add", ["w", "p"], ["wp"]),
        helper.make_node("Add", ["wp", "t"], ["e"]),
        helper.make_node("MatMul", ["e", "W"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["hb"]),
        helper.make_node("Softmax", ["hb"], ["probs"], axis=-1),
        const_node("last", np.int64(-1)),
        helper.make_node("Gather", ["hb", "last"], ["final"], axis=1),
    ]
    inits = {
        "word": rand(vocab, hidden),
        "pos": rand(seq, hidden),
        "types": rand(2, hidden),
        "position_ids": np.arange(seq, dtype=np.int64)[None, :],
        "W": rand(hidden, 5),
        "b": rand(5),
    }
    return make(
        nodes,
        {"input_ids": (I64, [2, seq]), "token_type_ids": (I64, [2, seq])},
        {"probs": (F, [2, seq, 5]), "final": (F, [2, 5])},
        inits,
        opset,
    )


def ids(*shape, vocab=13, lo=0):
    return RNG.integers(lo, vocab, shape).astype(np.int64)


@pytest.mark.parametrize("opset", [17, 18])
def test_embeddings_with_int64_input_ids_compiled(opset):
    model = embeddings_model(opset)
    feeds = {"input_ids": ids(2, 6), "token_type_ids": ids(2, 6, vocab=2)}
    mod = check(model, feeds, compiled=(opset == 17))
    assert [v.dtype for v in mod["main"].params[:2]] == ["int64", "int64"]
    # word, token type and x[:, -1]; the position lookup (both inputs initializers) is folded
    assert ops_of(mod).count("take") == 3


def ops_of(mod):
    return [c.op for c in calls(mod["main"])]


def test_negative_ids_count_from_the_end_as_onnxruntime():
    model = embeddings_model()
    feeds = {"input_ids": ids(2, 6, lo=-13), "token_type_ids": ids(2, 6, vocab=2, lo=-2)}
    assert (feeds["input_ids"] < 0).any()
    check(model, feeds)


def test_out_of_range_id_is_an_error_naming_value_and_tensor_not_a_read_past_the_table():
    model = embeddings_model()
    mod, params = from_onnx(model)
    m = build(mod, params)
    good = {"input_ids": ids(2, 6), "token_type_ids": ids(2, 6, vocab=2)}
    for bad_id in (13, -14, 2**31 - 1, 2**40):
        feeds = dict(good, input_ids=good["input_ids"].copy())
        feeds["input_ids"][1, 4] = bad_id
        seen = bad_id + 13 if bad_id < 0 else bad_id  # the kernel sees -14 as -1
        msg = rf"index {seen} is out of range for axis 0 .*size 13.*network weight of shape \(13, 8"
        with pytest.raises(IndexOutOfRangeError, match=msg):
            m.run(**feeds)
        with pytest.raises(IndexError, match=f"index {bad_id} is out of range"):
            evaluate(mod, feeds, params)
    m.run(**good)  # the error slot is cleared: a good run after a bad one works
    np.testing.assert_allclose(
        m.get_output(0).numpy(), ort_run(model, good)[0], rtol=1e-4, atol=1e-5
    )


def test_gather_int32_indices_and_inner_axis_dynamo_style():
    # dynamo writes index_select(x, 1, idx) as Gather(axis=1) after a computed tensor.
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Gather", ["r", "idx"], ["y"], axis=1),
        helper.make_node("Gather", ["r", "cidx"], ["z"], axis=-1),
    ]
    model = make(
        nodes,
        {"x": (F, [3, 7, 4]), "idx": (I32, [2, 5])},
        {"y": (F, [3, 2, 5, 4]), "z": (F, [3, 7, 3])},
        {"cidx": np.array([3, -1, 0], dtype=np.int64)},
        opset=18,
    )
    feeds = {"x": rand(3, 7, 4), "idx": RNG.integers(-7, 7, (2, 5)).astype(np.int32)}
    check(model, feeds, compiled=True)


def test_constant_index_out_of_range_is_an_import_error_naming_the_node():
    nodes = [helper.make_node("Gather", ["x", "i"], ["y"], axis=1, name="select_last")]
    model = make(nodes, {"x": (F, [2, 4])}, {"y": (F, [2])}, {"i": np.int64(4)})
    with pytest.raises(OnnxImportError, match=r"'select_last' \(Gather\): index 4 is out of range"):
        from_onnx(model)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_graph_and_constant_indices(axis):
    shape, ishape = (4, 5), [(3, 5), (4, 3), (4, 2)][axis]
    n = shape[axis]
    nodes = [
        helper.make_node("GatherElements", ["x", "idx"], ["y"], axis=axis),
        helper.make_node("GatherElements", ["x", "cidx"], ["z"], axis=axis),
    ]
    model = make(
        nodes,
        {"x": (F, list(shape)), "idx": (I64, list(ishape))},
        {"y": (F, list(ishape)), "z": (F, list(ishape))},
        {"cidx": RNG.integers(-n, n, ishape).astype(np.int64)},
    )
    feeds = {"x": rand(*shape), "idx": RNG.integers(-n, n, ishape).astype(np.int64)}
    check(model, feeds, compiled=(axis == 1))


EINSUMS = [
    ("bhid,bhjd->bhij", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bhij,bhjd->bhid", [(2, 3, 4, 6), (2, 3, 6, 5)]),
    ("bid,jd->bij", [(2, 4, 5), (6, 5)]),
    ("ij,jk->ik", [(4, 5), (5, 6)]),
    ("ij,kj->ik", [(4, 5), (6, 5)]),
    ("bhjd,bhid->bhij", [(2, 3, 6, 5), (2, 3, 4, 5)]),
    ("bihd,bjhd->bhij", [(2, 4, 3, 5), (2, 6, 3, 5)]),
    ("bij,bjk", [(2, 4, 5), (2, 5, 3)]),
    ("ij->ji", [(4, 5)]),
]


@pytest.mark.parametrize("eq, shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_forms_of_attention(eq, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    out_shape = np.einsum(eq, *[np.zeros(s) for s in shapes]).shape
    model = make(
        [helper.make_node("Einsum", names, ["y"], equation=eq)],
        {n: (F, list(s)) for n, s in zip(names, shapes)},
        {"y": (F, list(out_shape))},
    )
    feeds = {n: rand(*s) for n, s in zip(names, shapes)}
    mod = check(model, feeds)
    assert "nn.batch_matmul" in ops_of(mod) or "nn.dense" in ops_of(mod) or len(shapes) == 1


def test_einsum_with_a_weight_is_a_dense_on_a_folded_weight_compiled():
    w = rand(6, 5)
    model = make(
        [helper.make_node("Einsum", ["x", "w"], ["y"], equation="bid,jd->bij")],
        {"x": (F, [2, 4, 5])},
        {"y": (F, [2, 4, 6])},
        {"w": w},
    )
    mod = check(model, {"x": rand(2, 4, 5)}, compiled=True)
    assert "transpose" not in ops_of(mod) and "nn.dense" in ops_of(mod)


def test_attention_with_einsum_compiled():
    """scores = einsum(q, k) * scale + mask -> softmax -> einsum(p, v), as attention code
    writes it with torch.einsum."""
    nodes = [
        helper.make_node("Einsum", ["q", "k"], ["s"], equation="bhid,bhjd->bhij"),
        helper.make_node("Mul", ["s", "scale"], ["ss"]),
        helper.make_node("Add", ["ss", "mask"], ["sm"]),
        helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
        helper.make_node("Einsum", ["p", "v"], ["o"], equation="bhij,bhjd->bhid"),
    ]
    shp = [1, 2, 5, 4]
    model = make(
        nodes,
        {"q": (F, shp), "k": (F, shp), "v": (F, shp)},
        {"o": (F, shp)},
        {"scale": np.float32(0.5), "mask": rand(1, 1, 5, 5)},
    )
    feeds = {n: rand(*shp) for n in "qkv"}
    check(model, feeds, compiled=True)


@pytest.mark.parametrize(
    "eq, shapes, msg",
    [
        ("...id,...jd->...ij", [(2, 4, 5), (2, 6, 5)], "ellipsis"),
        ("ii,ij->ij", [(4, 4), (4, 5)], "repeated index"),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], "3 operands"),
        ("ij,kl->i", [(2, 3), (4, 5)], "summed over one operand only"),
    ],
)
def test_einsum_unsupported_forms_name_the_node(eq, shapes, msg):
    names = [f"x{i}" for i in range(len(shapes))]
    model = make(
        [helper.make_node("Einsum", names, ["y"], equation=eq, name="ein")],
        {n: (F, list(s)) for n, s in zip(names, shapes)},
        {"y": (F, None)},
    )
    with pytest.raises(OnnxImportError, match=rf"'ein' \(Einsum\): .*{msg}"):
        from_onnx(model)


def test_legacy_bert_attention_mask_from_an_int64_input_compiled():
    """The legacy exporter's extended attention mask: Unsqueeze(attention_mask) -> Cast(float)
    -> Sub(1, m) -> Mul(-10000) added to the scores (MatMul of q and k^T) before Softmax."""
    s, d = 5, 4
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["x"]),  # (1, s, d)
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["x", "xt"], ["scores"]),  # (1, s, s)
        helper.make_node("Unsqueeze", ["attention_mask", "ax1"], ["m1"]),  # (1, 1, s)
        helper.make_node("Cast", ["m1"], ["mf"], to=F),
        helper.make_node("Sub", ["one", "mf"], ["inv"]),
        helper.make_node("Mul", ["inv", "big"], ["bias"]),
        helper.make_node("Add", ["scores", "bias"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
    ]
    model = make(
        nodes,
        {"input_ids": (I64, [1, s]), "attention_mask": (I64, [1, s])},
        {"probs": (F, [1, s, s])},
        {
            "emb": rand(11, d),
            "ax1": np.array([1], np.int64),
            "one": np.float32(1.0),
            "big": np.float32(-10000.0),
        },
    )
    feeds = {"input_ids": ids(1, s, vocab=11), "attention_mask": np.array([[1, 1, 1, 0, 0]])}
    check(model, feeds, compiled=True)


def test_gather_nd_with_constant_and_graph_indices_matches_onnxruntime():
    """GatherND (batch_dims 0) as dynamo's BERT export writes it: rows of the cast attention
    mask picked by constant index tuples; and the same with the indices a graph input
    (negatives included), compiled too."""
    data = rand(3, 4, 5)
    const_idx = np.array([[[2, 1], [0, -1]], [[1, 3], [-3, 0]]], dtype=np.int64)
    node = helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd")
    model = make([node], {"x": (F, (3, 4, 5))}, {"y": (F, None)}, {"i": const_idx}, opset=18)
    check(model, {"x": data}, compiled=True)

    graph_idx = np.stack(
        [RNG.integers(-3, 3, (2, 3)), RNG.integers(-4, 4, (2, 3)), RNG.integers(-5, 5, (2, 3))],
        axis=-1,
    ).astype(np.int64)
    model = make([node], {"x": (F, (3, 4, 5)), "i": (I64, (2, 3, 3))}, {"y": (F, None)}, opset=18)
    check(model, {"x": data, "i": graph_idx}, compiled=True)


def test_gather_nd_refuses_batch_dims_and_out_of_range_constants_naming_the_node():
    node = helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd", batch_dims=1)
    model = make([node], {"x": (F, (3, 4))}, {"y": (F, None)}, {"i": np.zeros((3, 1), "int64")})
    with pytest.raises(OnnxImportError, match=r"'gnd' \(GatherND\).*batch_dims"):
        from_onnx(model)
    node = helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd")
    model = make([node], {"x": (F, (3, 4))}, {"y": (F, None)}, {"i": np.array([[3]], "int64")})
    with pytest.raises(OnnxImportError, match=r"'gnd' \(GatherND\).*out of range"):
        from_onnx(model)
