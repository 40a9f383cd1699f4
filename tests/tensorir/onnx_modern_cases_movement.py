"""The cases of test_onnx_ops_modern.py, part 2: data movement (Where, Expand, Slice, Split,
Trilu, CumSum, ...), MatMul with broadcast batch dims, and the shape subgraphs torch writes."""

import numpy as np
from onnx import TensorProto, numpy_helper
from onnx_case_kit import INT64_MAX, INT64_MIN, Case, const, f32, node


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
