"""The cases of test_onnx_ops_modern.py, part 1: reductions, LayerNormalization and the Gelu
forms, activations, comparisons and logic (each a list of ``onnx_case_kit.Case``)."""

import numpy as np
from onnx import TensorProto
from onnx_case_kit import Case, const, f32, node


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
