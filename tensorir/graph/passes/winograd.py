"""``alter_op_layout_winograd``: NHWC 3x3 convolutions -> winograd with a pre-transformed
weight, as TVM's AlterOpLayout does for auto-scheduler NHWC conv2d."""

from __future__ import annotations

from ...dtype import is_float
from ...ops.winograd import use_winograd, winograd_tile_size
from ..ir import Call, Function, make_call, rewrite

__all__ = ["alter_op_layout_winograd"]


def alter_op_layout_winograd(func: Function, device_kind: str = "gpu") -> Function:
    """Replace each ``nn.conv2d`` that ``use_winograd(..., device_kind)`` accepts (NHWC, HWIO
    3x3, stride 1, dilation 1, groups 1; on the CPU also 64 < CO < 512) by
    ``contrib_conv2d_winograd_without_weight_transform(data,
    contrib_conv2d_winograd_weight_transform(weight, tile))`` with ``tile =
    winograd_tile_size(H)``. ``fold_constant`` then precomputes the transformed weight."""

    def visit(node, args):
        if not (isinstance(node, Call) and node.op == "nn.conv2d"):
            return None
        a = node.attrs
        data, weight = args
        if not (is_float(data.dtype) and is_float(weight.dtype)):
            return None  # the transforms have fractional entries: integer convs stay direct
        if a["out_dtype"] not in ("", data.dtype):
            # A 16-bit conv accumulating in float32 (to_mixed_precision): winograd's transforms
            # would run in 16 bits, whose rounding they amplify; it stays direct.
            return None
        if a["kernel_layout"] != "HWIO" or not use_winograd(
            data.shape,
            weight.shape,
            a["strides"],
            a["dilation"],
            a["groups"],
            a["data_layout"],
            device_kind,
        ):
            return None
        tile = winograd_tile_size(data.shape[1])
        u = make_call("nn.contrib_conv2d_winograd_weight_transform", (weight,), {"tile_size": tile})
        attrs = {
            "tile_size": tile, "strides": a["strides"], "padding": a["padding"],
            "dilation": a["dilation"], "channels": a["channels"], "kernel_size": a["kernel_size"],
            "data_layout": "NHWC", "out_dtype": a["out_dtype"],
        }  # fmt: skip
        return make_call("nn.contrib_conv2d_winograd_without_weight_transform", (data, u), attrs)

    return rewrite(func, visit)
