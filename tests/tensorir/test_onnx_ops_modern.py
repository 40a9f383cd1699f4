"""from_onnx on the ops today's exporters write (issue 26): reductions, LayerNormalization,
Erf / Gelu, activations, comparisons and logic, Where, Expand, Slice, Split, Trilu, CumSum,
ConstantOfShape, Range, MatMul with broadcast batch dims and the shape subgraphs torch writes.

Every case is a small onnx.helper graph written the way torch's legacy (TorchScript, opset
13-17) or dynamo (opset 18) exporter writes it. Each is imported and evaluated with the
numpy reference, and compared with onnxruntime on random inputs; then all cases of one opset
are merged into one model, built with ``autosched.build`` on llvm (one build per opset keeps
the file fast) and run in the graph executor, every output compared with onnxruntime again.
"""

import dataclasses
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autosched  # noqa: E402
from tensorir.graph import OnnxImportError, calls, evaluate, from_onnx  # noqa: E402
from tensorir.graph.passes import optimize  # noqa: E402

INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
_ELEM = {"float32": TensorProto.FLOAT, "bool": TensorProto.BOOL, "int64": TensorProto.INT64}


@dataclasses.dataclass
class Case:
    """One graph: ``inputs`` {name: (shape, dtype)}, ``outputs`` names, ``inits`` arrays."""

    name: str
    opset: int
    nodes: list
    inputs: dict
    outputs: list
    inits: dict = dataclasses.field(default_factory=dict)
    ops: tuple = ()  # graph ops the import must produce (and, with no_ops, must not)
    no_ops: tuple = ()


def node(op_type, inputs, outputs, **attrs):
    return helper.make_node(op_type, inputs, outputs, **attrs)


def const(name, value):
    """A Constant node, as both exporters write scalars and shapes."""
    return node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def f32(*shape):
    return (shape, "float32")


def model_of(cases, opset):
    """One model of every case, value names prefixed with the case's name."""

    def p(c, n):
        return f"{c.name}.{n}" if n else ""

    nodes, inputs, outputs, inits = [], [], [], []
    for c in cases:
        for nd in c.nodes:
            ins, outs = [p(c, i) for i in nd.input], [p(c, o) for o in nd.output]
            new = helper.make_node(nd.op_type, ins, outs, name=nd.name, domain=nd.domain)
            new.attribute.extend(nd.attribute)
            nodes.append(new)
        for n, (shape, dtype) in c.inputs.items():
            inputs.append(helper.make_tensor_value_info(p(c, n), _ELEM[dtype], shape))
        outputs += [onnx.ValueInfoProto(name=p(c, o)) for o in c.outputs]  # types inferred
        inits += [numpy_helper.from_array(np.asarray(v), p(c, k)) for k, v in c.inits.items()]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # onnxruntime reads ir_version <= 13 only
    return model


def feeds_of(model, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for i in model.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        elem = i.type.tensor_type.elem_type
        if elem == TensorProto.BOOL:
            out[i.name] = rng.random(shape) > 0.5
        elif elem == TensorProto.INT64:
            out[i.name] = rng.integers(-4, 5, shape).astype(np.int64)
        else:
            out[i.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def run_ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_close(ours, want, what):
    if want.shape == () and ours.shape == (1,):
        ours = ours.reshape(())  # a full reduction gives (1,): our tensors are never 0-d
    assert ours.shape == want.shape, f"{what}: shape {ours.shape} != {want.shape}"
    assert ours.dtype == want.dtype, f"{what}: dtype {ours.dtype} != {want.dtype}"
    if want.dtype.kind == "f":
        np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-5, err_msg=what)
    else:
        np.testing.assert_array_equal(ours, want, err_msg=what)


# --- the cases ------------------------------------------------------------------------------


def _reductions():
    x = f32(2, 3, 4, 5)
    return [
        # dynamo's global average pooling: axes as an input (opset 18), keepdims
        Case(
            "gap18",
            18,
            [const("ax", [-1, -2]), node("ReduceMean", ["x", "ax"], ["y"])],
            {"x": x},
            ["y"],
            ops=("nn.global_avg_pool2d",),
        ),
        # torch.mean(x, (2, 3)) without keepdims, legacy (axes attribute)
        Case(
            "gap13",
            13,
            [node("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=0)],
            {"x": x},
            ["y"],
            ops=("nn.global_avg_pool2d",),
        ),
        Case(
            "gap_nhwc",
            18,
            [const("ax", [1, 2]), node("ReduceMean", ["x", "ax"], ["y"])],
            {"x": x},
            ["y"],
            ops=("nn.global_avg_pool2d",),
        ),
        Case(
            "gmp",
            18,
            [const("ax", [2, 3]), node("ReduceMax", ["x", "ax"], ["y"], keepdims=0)],
            {"x": x},
            ["y"],
            ops=("nn.global_max_pool2d",),
        ),
        Case(
            "gap3d",
            18,
            [const("ax", [2, 3, 4]), node("ReduceMean", ["v", "ax"], ["y"], keepdims=0)],
            {"v": f32(1, 3, 2, 3, 4)},
            ["y"],
            ops=("nn.avg_pool3d",),
        ),
        Case(
            "sum13",
            13,
            [const("ax", [1]), node("ReduceSum", ["x", "ax"], ["y"])],
            {"x": x},
            ["y"],
            ops=("sum",),
        ),
        Case("sum_all", 13, [node("ReduceSum", ["x"], ["y"], keepdims=0)], {"x": x}, ["y"]),
        Case(
            "sum_noop",
            13,
            [node("ReduceSum", ["x"], ["y"], noop_with_empty_axes=1)],
            {"x": x},
            ["y"],
            no_ops=("sum",),
        ),
        Case(
            "mean_last",
            17,
            [node("ReduceMean", ["x"], ["y"], axes=[-1])],
            {"x": x},
            ["y"],
            ops=("mean",),
        ),
        Case(
            "max13", 13, [node("ReduceMax", ["x"], ["y"], axes=[0, 2], keepdims=0)], {"x": x}, ["y"]
        ),
        Case(
            "min18", 18, [const("ax", [3]), node("ReduceMin", ["x", "ax"], ["y"])], {"x": x}, ["y"]
        ),
        Case(
            "l2",
            18,
            [const("ax", [-1]), node("ReduceL2", ["x", "ax"], ["y"], keepdims=0)],
            {"x": x},
            ["y"],
        ),
        Case("l2_13", 13, [node("ReduceL2", ["x"], ["y"], axes=[1])], {"x": x}, ["y"]),
        Case(
            "l1_sumsq",
            18,
            [
                const("ax", [2]),
                node("ReduceL1", ["x", "ax"], ["a"]),
                node("ReduceSumSquare", ["x", "ax"], ["b"]),
            ],
            {"x": x},
            ["a", "b"],
        ),
        Case(
            "logsumexp",
            18,
            [const("ax", [1]), node("ReduceLogSumExp", ["x", "ax"], ["y"])],
            {"x": x},
            ["y"],
        ),
        Case(
            "prod_static",
            18,
            [
                const("ax", [0]),
                node("ReduceProd", ["w", "ax"], ["p"]),
                node("Mul", ["x", "p"], ["y"]),
            ],
            {"x": f32(3, 4)},
            ["y"],
            {"w": np.linspace(0.5, 1.5, 24).reshape(2, 3, 4).astype(np.float32)},
        ),
    ]


def _norms_and_gelu():
    x = f32(2, 3, 8)
    ln_w = np.random.default_rng(1).standard_normal(8).astype(np.float32)
    ln_b = np.random.default_rng(2).standard_normal(8).astype(np.float32)
    w2 = np.random.default_rng(3).standard_normal((3, 8)).astype(np.float32)
    gelu_erf = [  # legacy export of nn.GELU(): x * 0.5 * (1 + erf(x / sqrt 2))
        const("s2", np.float32(1.4142135)),
        node("Div", ["x", "s2"], ["d"]),
        node("Erf", ["d"], ["e"]),
        const("one", np.float32(1.0)),
        node("Add", ["e", "one"], ["a"]),
        node("Mul", ["x", "a"], ["m"]),
        const("half", np.float32(0.5)),
        node("Mul", ["m", "half"], ["y"]),
    ]
    gelu_tanh = [  # GPT-2's NewGELU, legacy: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        const("three", np.float32(3.0)),
        node("Pow", ["x", "three"], ["c"]),
        const("k", np.float32(0.044715)),
        node("Mul", ["c", "k"], ["ck"]),
        node("Add", ["x", "ck"], ["in"]),
        const("r", np.float32(0.7978846)),
        node("Mul", ["in", "r"], ["ir"]),
        node("Tanh", ["ir"], ["t"]),
        const("one", np.float32(1.0)),
        node("Add", ["t", "one"], ["t1"]),
        const("half", np.float32(0.5)),
        node("Mul", ["x", "half"], ["hx"]),
        node("Mul", ["hx", "t1"], ["y"]),
    ]
    return [
        Case(
            "ln17",
            17,
            [node("LayerNormalization", ["x", "w", "b"], ["y"], epsilon=1e-12)],
            {"x": x},
            ["y"],
            {"w": ln_w, "b": ln_b},
            ops=("nn.layer_norm",),
        ),
        # dynamo: the Mean / InvStdDev outputs named but unused, no bias (T5's RMS-less LN)
        Case(
            "ln18",
            18,
            [node("LayerNormalization", ["x", "w"], ["y", "mu", "rstd"], axis=-1, epsilon=1e-5)],
            {"x": x},
            ["y"],
            {"w": ln_w},
        ),
        Case(
            "ln_axes",
            17,
            [node("LayerNormalization", ["x", "w2", "b"], ["y"], axis=1)],
            {"x": x},
            ["y"],
            {"w2": w2, "b": ln_b.reshape(1, 8)},
        ),
        Case(
            "ln_graph_w",
            17,
            [node("LayerNormalization", ["x", "g", "bb"], ["y"])],
            {"x": x, "g": f32(8), "bb": f32(8)},
            ["y"],
        ),
        Case("gelu_erf", 17, gelu_erf, {"x": x}, ["y"], ops=("erf",)),
        Case("gelu_tanh", 17, gelu_tanh, {"x": x}, ["y"]),
        Case(
            "gelu20",
            20,
            [node("Gelu", ["x"], ["y"]), node("Gelu", ["x"], ["z"], approximate="tanh")],
            {"x": x},
            ["y", "z"],
        ),
    ]


def _activations():
    x = f32(3, 7)
    two = const("two", np.float32(2.0))
    return [
        Case(
            "act",
            17,
            [
                node("HardSwish", ["x"], ["hs"]),
                node("HardSigmoid", ["x"], ["hg"], alpha=0.3, beta=0.4),
                node("Softplus", ["x"], ["sp"]),
                node("Abs", ["x"], ["ab"]),
                node("Log", ["ab"], ["lg"]),
                node("Reciprocal", ["x"], ["rc"]),
                node("Tanh", ["x"], ["th"]),
            ],
            {"x": x},
            ["hs", "hg", "sp", "ab", "lg", "rc", "th"],
        ),
        Case("mish", 18, [node("Mish", ["x"], ["y"])], {"x": x}, ["y"]),
        # x ** 2 (variances) becomes one multiply; a graph exponent stays a power
        Case(
            "pow",
            17,
            [
                two,
                node("Pow", ["x", "two"], ["sq"]),
                node("Abs", ["x"], ["ab"]),
                node("Pow", ["ab", "e"], ["pe"]),
            ],
            {"x": x, "e": f32(3, 7)},
            ["sq", "pe"],
            ops=("power",),
        ),
        # dynamo's nan_to_num-like guards: IsNaN of log(x < 0), IsInf of 1 / relu(x)
        Case(
            "nan_inf",
            18,
            [
                node("Log", ["x"], ["l"]),
                node("IsNaN", ["l"], ["n"]),
                node("Relu", ["x"], ["r"]),
                node("Reciprocal", ["r"], ["rc"]),
                node("IsInf", ["rc"], ["i"]),
                node("IsInf", ["rc"], ["ip"], detect_negative=0),
                const("z", np.float32(0.0)),
                node("Where", ["n", "z", "l"], ["y"]),
            ],
            {"x": x},
            ["n", "i", "ip", "y"],
        ),
    ]


def _logic():
    x, y = f32(2, 3, 4), f32(3, 1)
    return [
        Case(
            "cmp",
            17,
            [
                node("Equal", ["a", "b"], ["eq"]),
                node("Less", ["x", "y"], ["lt"]),
                node("Greater", ["x", "y"], ["gt"]),
                node("LessOrEqual", ["x", "y"], ["le"]),
                node("GreaterOrEqual", ["x", "y"], ["ge"]),
                node("Not", ["lt"], ["nt"]),
                node("And", ["gt", "c"], ["an"]),
                node("Or", ["lt", "c"], ["orr"]),
                node("Xor", ["gt", "c"], ["xo"]),
                node("Where", ["an", "x", "y"], ["w"]),
            ],
            {"x": x, "y": y, "c": ((4,), "bool"), "a": ((2, 3, 4), "int64"), "b": ((4,), "int64")},
            ["eq", "lt", "gt", "le", "ge", "nt", "an", "orr", "xo", "w"],
        ),
        # DistilBERT's mask, legacy: (mask == 0).view(...).expand_as(scores) -> masked_fill;
        # bool values through Reshape / Expand, casts to and from bool
        Case(
            "distilbert_mask",
            17,
            [
                const("z", np.array(0, np.int64)),
                node("Equal", ["mask", "z"], ["eq"]),
                const("sh", np.array([2, 1, 1, 4], np.int64)),
                node("Reshape", ["eq", "sh"], ["r"]),
                const("es", np.array([2, 3, 4, 4], np.int64)),
                node("Expand", ["r", "es"], ["e"]),
                const("neg", np.float32(-3.4028234663852886e38)),
                node("Where", ["e", "neg", "s"], ["y"]),
                node("Cast", ["mask"], ["mb"], to=TensorProto.BOOL),
                node("Not", ["mb"], ["nb"]),
                node("Cast", ["nb"], ["nf"], to=TensorProto.FLOAT),
            ],
            {"mask": ((2, 4), "int64"), "s": f32(2, 3, 4, 4)},
            ["y", "nf"],
            ops=("broadcast_to", "where", "equal"),
        ),
        # attention masking, legacy: where(mask, scores, -inf-ish), mask from a bool input
        Case(
            "mask",
            17,
            [const("neg", np.float32(-3.4e38)), node("Where", ["m", "s", "neg"], ["y"])],
            {"s": f32(2, 4, 4), "m": ((4, 4), "bool")},
            ["y"],
            ops=("where",),
        ),
    ]


def _movement():
    x = f32(2, 3, 6)
    return [
        Case(
            "expand",
            17,
            [const("sh", np.array([2, 3, 4, 6], np.int64)), node("Expand", ["v", "sh"], ["y"])],
            {"v": f32(3, 1, 6)},
            ["y"],
            ops=("broadcast_to",),
        ),
        # legacy x.expand(2, -1, -1): Where(Equal(shape, -1), 1s, shape) folds at import
        Case(
            "expand_neg1",
            13,
            [
                const("c", np.array([2, -1, -1], np.int64)),
                const("n", np.array([3], np.int64)),
                node(
                    "ConstantOfShape",
                    ["n"],
                    ["o"],
                    value=numpy_helper.from_array(np.array([1], np.int64)),
                ),
                const("m1", np.array(-1, np.int64)),
                node("Mul", ["o", "m1"], ["neg"]),
                node("Equal", ["c", "neg"], ["eq"]),
                node("Where", ["eq", "o", "c"], ["sh"]),
                node("Expand", ["v", "sh"], ["y"]),
            ],
            {"v": f32(1, 3, 6)},
            ["y"],
            ops=("broadcast_to",),
            no_ops=("equal", "where"),
        ),
        Case(
            "slice",
            13,
            [
                const("s", np.array([1, -5], np.int64)),
                const("e", np.array([INT64_MAX, -1], np.int64)),
                const("a", np.array([1, -1], np.int64)),
                const("st", np.array([1, 2], np.int64)),
                node("Slice", ["x", "s", "e", "a", "st"], ["y"]),
                # torch.flip(x, [-1]): steps -1 from -1 to INT64_MIN
                const("fs", np.array([-1], np.int64)),
                const("fe", np.array([INT64_MIN], np.int64)),
                const("fa", np.array([2], np.int64)),
                node("Slice", ["x", "fs", "fe", "fa", "fs"], ["f"]),
                # x[:, :2] with axes and steps omitted
                const("zs", np.array([0, 0], np.int64)),
                const("ze", np.array([INT64_MAX, 2], np.int64)),
                node("Slice", ["x", "zs", "ze"], ["z"]),
                # negative step with a clamped start: x[:, 10:0:-2]
                const("ns", np.array([10], np.int64)),
                const("ne", np.array([0], np.int64)),
                const("na", np.array([-2], np.int64)),
                const("nst", np.array([-2], np.int64)),
                node("Slice", ["x", "ns", "ne", "na", "nst"], ["n"]),
            ],
            {"x": x},
            ["y", "f", "z", "n"],
            ops=("strided_slice",),
        ),
        Case(
            "slice9",
            9,
            [node("Slice", ["x"], ["y"], starts=[1], ends=[1000], axes=[2])],
            {"x": x},
            ["y"],
        ),
        Case(
            "split13",
            13,
            [
                const("sp", np.array([1, 2, 3], np.int64)),
                node("Split", ["x", "sp"], ["a", "b", "c"], axis=-1),
            ],
            {"x": x},
            ["a", "b", "c"],
        ),
        Case(
            "split11",
            11,
            [node("Split", ["x"], ["a", "b"], axis=1, split=[2, 1])],
            {"x": x},
            ["a", "b"],
        ),
        Case(
            "split_even",
            13,
            [node("Split", ["x"], ["a", "b", "c"], axis=2)],
            {"x": x},
            ["a", "b", "c"],
        ),
        # GPT-2's qkv split, dynamo: num_outputs (5 -> 2, 2, 1 when uneven)
        Case(
            "split18",
            18,
            [node("Split", ["v"], ["a", "b", "c"], axis=1, num_outputs=3)],
            {"v": f32(2, 5)},
            ["a", "b", "c"],
        ),
        Case(
            "trilu",
            14,
            [
                node("Trilu", ["x"], ["u"]),
                const("k", np.array(1, np.int64)),
                node("Trilu", ["x", "k"], ["l"], upper=0),
                const("km", np.array(-1, np.int64)),
                node("Trilu", ["x", "km"], ["u2"], upper=1),
            ],
            {"x": x},
            ["u", "l", "u2"],
            ops=("trilu",),
        ),
        Case(
            "cumsum",
            14,
            [
                const("ax", np.array(2, np.int64)),
                node("CumSum", ["x", "ax"], ["a"]),
                node("CumSum", ["x", "ax"], ["b"], exclusive=1),
                node("CumSum", ["x", "ax"], ["c"], reverse=1),
                const("am", np.array(-2, np.int32)),
                node("CumSum", ["x", "am"], ["d"], exclusive=1, reverse=1),
            ],
            {"x": x},
            ["a", "b", "c", "d"],
            ops=("cumsum",),
        ),
        # RoBERTa's position ids, legacy: cumsum of the non-padding mask, on integers
        Case(
            "roberta_pos",
            14,
            [
                const("pad", np.array(1, np.int64)),
                node("Equal", ["ids", "pad"], ["is_pad"]),
                node("Not", ["is_pad"], ["keep"]),
                node("Cast", ["keep"], ["m"], to=TensorProto.INT32),
                const("ax", np.array(1, np.int64)),
                node("CumSum", ["m", "ax"], ["cs"]),
                node("Mul", ["cs", "m"], ["inc"]),
                node("Cast", ["inc"], ["inc64"], to=TensorProto.INT64),
                node("Add", ["inc64", "pad"], ["pos"]),
            ],
            {"ids": ((2, 7), "int64")},
            ["pos"],
            ops=("cumsum",),
        ),
        # a causal mask built from constants folds at import: Range, Unsqueeze, Less, Where
        Case(
            "causal",
            17,
            [
                const("z", np.array(0, np.int64)),
                const("n", np.array(4, np.int64)),
                const("one", np.array(1, np.int64)),
                node("Range", ["z", "n", "one"], ["r"]),
                const("ax", np.array([1], np.int64)),
                node("Unsqueeze", ["r", "ax"], ["rc"]),
                node("Less", ["rc", "r"], ["fut"]),
                const("sh", np.array([4, 4], np.int64)),
                node(
                    "ConstantOfShape",
                    ["sh"],
                    ["ones"],
                    value=numpy_helper.from_array(np.array([1.0], np.float32)),
                ),
                node("Trilu", ["ones"], ["tri"], upper=0),
                const("neg", np.float32(-1e9)),
                node("Where", ["fut", "neg", "s"], ["ms"]),
                node("Mul", ["ms", "tri"], ["y"]),
            ],
            {"s": f32(2, 4, 4)},
            ["y"],
            ops=("where",),
            no_ops=("trilu", "less"),
        ),
    ]


def _matmuls():
    w = np.random.default_rng(4).standard_normal((6, 5)).astype(np.float32)
    return [
        Case(
            "mm_attn",
            17,
            [node("MatMul", ["q", "k"], ["y"])],
            {"q": f32(2, 3, 4, 6), "k": f32(2, 3, 6, 4)},
            ["y"],
        ),
        Case(
            "mm_dense",
            17,
            [node("MatMul", ["x", "w"], ["y"])],
            {"x": f32(2, 4, 6)},
            ["y"],
            {"w": w},
            ops=("nn.dense",),
        ),
        Case(
            "mm_bcast_lhs",
            17,
            [node("MatMul", ["a", "b"], ["y"])],
            {"a": f32(4, 6), "b": f32(3, 6, 5)},
            ["y"],
            ops=("nn.batch_matmul",),
        ),
        Case(
            "mm_bcast_batch",
            17,
            [node("MatMul", ["a", "b"], ["y"])],
            {"a": f32(2, 1, 4, 6), "b": f32(3, 6, 5)},
            ["y"],
        ),
        Case(
            "mm_vec",
            17,
            [node("MatMul", ["a", "v"], ["y"]), node("MatMul", ["v2", "b"], ["z"])],
            {"a": f32(2, 4, 6), "v": f32(6), "v2": f32(4), "b": f32(3, 4, 5)},
            ["y", "z"],
        ),
    ]


def _shape_subgraphs():
    # x.view(x.size(0), x.size(1), -1) and x.expand_as(y), legacy and dynamo both write these
    return [
        Case(
            "view",
            13,
            [
                node("Shape", ["x"], ["s"]),
                const("i0", np.array(0, np.int64)),
                node("Gather", ["s", "i0"], ["d0"], axis=0),
                const("i1", np.array(1, np.int64)),
                node("Gather", ["s", "i1"], ["d1"], axis=0),
                const("ax", np.array([0], np.int64)),
                node("Unsqueeze", ["d0", "ax"], ["u0"]),
                node("Unsqueeze", ["d1", "ax"], ["u1"]),
                const("m1", np.array([-1], np.int64)),
                node("Concat", ["u0", "u1", "m1"], ["sh"], axis=0),
                node("Reshape", ["x", "sh"], ["y"]),
                node("Shape", ["big"], ["bs"]),
                node("Expand", ["y", "bs"], ["z"]),
            ],
            {"x": f32(2, 3, 2, 2), "big": f32(5, 2, 3, 4)},
            ["z"],
            ops=("broadcast_to",),
            no_ops=("concatenate",),
        ),
    ]


CASES = (
    _reductions()
    + _norms_and_gelu()
    + _activations()
    + _logic()
    + _movement()
    + _matmuls()
    + _shape_subgraphs()
)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_matches_onnxruntime(case):
    """Import, the numpy reference of every op, and onnxruntime agree; the ops are mapped as
    intended (global pools, folded shape arithmetic, ...)."""
    model = model_of([case], case.opset)
    feeds = feeds_of(model)
    mod, params = from_onnx(model)
    with np.errstate(divide="ignore", invalid="ignore"):  # log(x < 0), 1 / 0: NaN and inf
        ours = evaluate(mod, feeds, params)
    ours = ours if isinstance(ours, list) else [ours]
    for o, got, want in zip(case.outputs, ours, run_ort(model, feeds), strict=True):
        assert_close(got, want, f"{case.name}.{o}")
    used = {c.op for c in calls(mod["main"])}
    assert set(case.ops) <= used, f"{case.name}: expected ops {case.ops}, got {sorted(used)}"
    assert not set(case.no_ops) & used, f"{case.name}: {case.no_ops} should fold, got {used}"


_OPSETS = sorted({c.opset for c in CASES})


@pytest.mark.parametrize("opset", [o for o in _OPSETS if o >= 13])
def test_all_cases_build_on_llvm_and_match_onnxruntime(opset):
    """Every case of one opset in one model (older cases run under the newer opset only where
    their form is still valid, so the model is per opset): autosched.build on llvm, the graph
    executor, every output against onnxruntime."""
    cases = [c for c in CASES if c.opset == opset]
    model = model_of(cases, opset)
    feeds = feeds_of(model, seed=opset)
    mod, params = from_onnx(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no tuning record: default schedule"
        lib = autosched.build(mod, "llvm", params=params)
    gm = autosched.GraphModule(lib)
    for k, v in feeds.items():
        if k in gm.plan.inputs:  # an input read only by Shape is no input of the network
            gm.set_input(k, v)
    gm.run()
    names = [o.name for o in model.graph.output]
    for i, (name, want) in enumerate(zip(names, run_ort(model, feeds), strict=True)):
        assert_close(gm.get_output(i).numpy(), want, name)


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


# --- errors ----------------------------------------------------------------------------------


def _import(case):
    return from_onnx(model_of([case], case.opset))


def test_unsupported_attribute_values_name_the_node():
    bad = [
        (node("Gelu", ["x"], ["y"], approximate="fast", name="g0"), r"'g0' \(Gelu\).*fast"),
        (
            node("IsInf", ["x"], ["y"], detect_negative=0, detect_positive=0, name="i0"),
            r"'i0' \(IsInf\).*detect_negative",
        ),
        (
            node("ReduceProd", ["x"], ["y"], axes=[1], name="p0"),
            r"'p0' \(ReduceProd\).*known at import time",
        ),
        (node("ReduceMean", ["x"], ["y"], axes=[3], name="r0"), r"'r0' \(ReduceMean\).*axes"),
        (
            node("Split", ["x"], ["a", "b"], axis=1, split=[1, 1], name="s0"),
            r"'s0' \(Split\).*summing to the dim 3",
        ),
    ]
    for nd, pattern in bad:
        with pytest.raises(OnnxImportError, match=pattern) as err:
            _import(
                Case(
                    "bad",
                    18 if nd.op_type != "Gelu" else 20,
                    [nd],
                    {"x": f32(2, 3)},
                    ["y"] if nd.op_type != "Split" else ["a", "b"],
                )
            )
        assert "\n" not in str(err.value)


def test_reading_an_unsupported_layer_norm_output_names_the_node():
    ln = node("LayerNormalization", ["x", "w"], ["y", "mu"], name="ln0")
    case = Case(
        "ln",
        17,
        [ln, node("Relu", ["mu"], ["z"])],
        {"x": f32(2, 4)},
        ["z"],
        {"w": np.ones(4, np.float32)},
    )
    with pytest.raises(OnnxImportError, match=r"'ln\.mu' is an output of node 'ln0'"):
        _import(case)


def test_the_ops_page_lists_exactly_the_supported_ops():
    """docs/onnx-ops.md is where the unsupported-op error sends users: keep it true."""
    from pathlib import Path

    from tensorir.graph.onnx_frontend import supported_ops

    page = Path(__file__).parents[2] / "docs" / "onnx-ops.md"
    listed = set()
    for line in page.read_text().splitlines():
        cells = line.split("|")
        if len(cells) > 2 and cells[1].strip() not in ("ONNX op", "---"):
            listed |= {name.strip() for name in cells[1].split(",")}
    assert listed == set(supported_ops())


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
