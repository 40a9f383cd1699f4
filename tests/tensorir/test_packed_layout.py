"""Packed layouts (VTA's NCHW1n16c / OIHW16o16i): layout_transform and nn.conv2d in the graph,
in te (compute_op) and in the numpy reference, checked against the plain NCHW conv."""

import numpy as np
import pytest

from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.graph import Function, nn, op
from tensorir.graph.reference import evaluate
from tensorir.interp import eval_dag
from tensorir.ops import packed_layout
from tensorir.ops._util import NameScope
from tensorir.ops.registry import compute_op

RNG = np.random.default_rng(7)


def test_parse_pack_unpack_round_trip():
    assert packed_layout.parse("NCHW1n16c") == ("NCHW", {"N": 1, "C": 16})
    assert packed_layout.parse("OIHW16o8i") == ("OIHW", {"O": 16, "I": 8})
    assert packed_layout.parse("NCHW") is None and packed_layout.parse("NCHW16x") is None
    x = RNG.integers(-128, 128, (2, 32, 3, 5)).astype(np.int8)
    p = packed_layout.pack(x, "NCHW2n16c")
    assert p.shape == (1, 2, 3, 5, 2, 16)
    assert p[0, 1, 2, 4, 1, 3] == x[1, 16 + 3, 2, 4]
    np.testing.assert_array_equal(packed_layout.unpack(p, "NCHW2n16c"), x)


@pytest.mark.parametrize("stride, pad", [(1, 1), (2, 0)])
def test_packed_conv2d_graph_and_te_match_the_plain_conv(stride, pad):
    x = RNG.integers(-128, 128, (1, 32, 7, 7)).astype(np.int8)
    w = RNG.integers(-128, 128, (16, 32, 3, 3)).astype(np.int8)
    xv, wv = op.var("x", x.shape, "int8"), op.var("w", w.shape, "int8")
    xp = op.layout_transform(xv, "NCHW", "NCHW1n16c")
    wp = op.layout_transform(wv, "OIHW", "OIHW16o16i")
    y = nn.conv2d(xp, wp, stride, pad, data_layout="NCHW1n16c", out_dtype="int32")
    assert y.attrs["kernel_layout"] == "OIHW16o16i" and y.attrs["channels"] == 16
    packed = Function((xv, wv), op.layout_transform(y, "NCHW1n16c", "NCHW"))
    plain = Function((xv, wv), nn.conv2d(xv, wv, stride, pad, out_dtype="int32"))
    want = evaluate(plain, {"x": x, "w": w})
    np.testing.assert_array_equal(evaluate(packed, {"x": x, "w": w}), want)

    scope = NameScope()
    d, k = te.placeholder(x.shape, "int8", "d"), te.placeholder(w.shape, "int8", "k")
    dp = compute_op("layout_transform", [d], {"src_layout": "NCHW", "dst_layout": "NCHW1n16c"},
                    name_scope=scope)  # fmt: skip
    kp = compute_op("layout_transform", [k], {"src_layout": "OIHW", "dst_layout": "OIHW16o16i"},
                    name_scope=scope)  # fmt: skip
    r = compute_op("nn.conv2d", [dp, kp], {"strides": stride, "padding": pad,
                   "data_layout": "NCHW1n16c", "out_dtype": "int32"}, name_scope=scope)  # fmt: skip
    ru = compute_op("layout_transform", [r], {"src_layout": "NCHW1n16c", "dst_layout": "NCHW"},
                    name_scope=scope)  # fmt: skip
    (got,) = eval_dag(ComputeDAG([d, k, ru]), [x, w])
    np.testing.assert_array_equal(got, want)


def test_packing_a_channel_count_the_block_does_not_divide_is_an_error():
    with pytest.raises(ValueError, match=r"layout_transform: cannot pack axis C of extent 24 into"):
        op.layout_transform(op.var("x", (1, 24, 4, 4)), "NCHW", "NCHW1n16c")
