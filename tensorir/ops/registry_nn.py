"""The operator table's neural-network entries: convolutions (plain, packed, 3-d, winograd,
transposed), dense and batch_matmul, bias_add, the norms, pooling, softmax and resize2d
(assembled into :data:`tensorir.ops.registry.OPS`)."""

from __future__ import annotations

import numpy as np

from ..tensor import TensorError
from . import broadcast, nn_rules, packed_layout, reduce, winograd
from . import nn_reference as nn_ref
from . import reference as ref
from . import shape_rules as rules
from .conv2d import conv2d
from .conv2d_transpose import conv2d_transpose
from .conv3d import conv3d
from .dense import batch_matmul, dense
from .norm import group_norm
from .op_entry import REQUIRED, OpEntry, unary_entry
from .pool import adaptive_pool, global_pool, pool
from .resize import resize2d
from .softmax import softmax

_KERNEL_LAYOUTS = {"NCHW": "OIHW", "NHWC": "HWIO", "NCDHW": "OIDHW", "NDHWC": "DHWIO"}


def _default_kernel_layout(attrs: dict) -> str:
    # Relay's default kernel layout follows the data layout (OIHW for NCHW, HWIO for NHWC).
    return _KERNEL_LAYOUTS.get(attrs["data_layout"], "")


def _conv2d(ins, a):
    return conv2d(
        ins[0],
        ins[1],
        a["strides"],
        a["padding"],
        a["dilation"],
        a["groups"],
        a["data_layout"],
        a["kernel_layout"],
        a["out_dtype"],
    )


def _winograd(ins, a):
    if a["data_layout"] != "NHWC":
        raise TensorError(
            "nn.contrib_conv2d_winograd_without_weight_transform: attribute "
            f"'data_layout' = {a['data_layout']!r} is not supported; use 'NHWC'"
        )
    if tuple(a["kernel_size"]) != (3, 3):
        raise TensorError(
            "nn.contrib_conv2d_winograd_without_weight_transform: attribute "
            f"'kernel_size' = {a['kernel_size']!r}; only (3, 3) is supported"
        )
    tile = a["tile_size"] if a["tile_size"] is not None else ins[1].shape[0] - 2
    return winograd.conv2d_winograd_nhwc_without_weight_transform(
        ins[0], ins[1], tile, a["padding"], a["strides"], a["dilation"], a["out_dtype"]
    )


def _pool(kind: str, nsp: int):
    op = f"nn.{kind}_pool{nsp}d"

    def build(ins, a):  # the entry's fix has checked the layout
        return pool(
            ins[0],
            kind,
            a["pool_size"],
            a["strides"],
            a["padding"],
            a["dilation"],
            a["layout"],
            a["ceil_mode"],
            a.get("count_include_pad", False),
            op,
        )

    return build


_CONV2D = {
    "strides": (1, 1),
    "padding": (0, 0, 0, 0),
    "dilation": (1, 1),
    "groups": 1,
    "channels": None,
    "kernel_size": None,
    "data_layout": "NCHW",
    "kernel_layout": _default_kernel_layout,
    "out_dtype": "",
}
_POOL2D = {
    "pool_size": REQUIRED,
    "strides": (1, 1),
    "padding": (0, 0, 0, 0),
    "dilation": (1, 1),
    "layout": "NCHW",
    "ceil_mode": False,
}
_POOL3D = {
    "pool_size": REQUIRED,
    "strides": (1, 1, 1),
    "padding": (0,) * 6,
    "dilation": (1, 1, 1),
    "layout": "NCDHW",
    "ceil_mode": False,
}


def _adaptive_avg(ins, a):
    # Relay's output_size None (or a None entry) keeps that input dimension.
    data, layout, size = ins[0], a["layout"], a["output_size"]
    spatial = tuple(data.shape[layout.index(c)] for c in "HW" if c in layout)
    if size is None:
        size = spatial
    elif not isinstance(size, int) and len(size) == len(spatial):
        size = tuple(s or d for s, d in zip(size, spatial, strict=True))
    return adaptive_pool(data, size, "avg", layout)


_CONV2D_LAYOUTS = {"NCHW": "OIHW", "NHWC": "HWIO"}
_CONV3D_LAYOUTS = {"NCDHW": "OIDHW", "NDHWC": "DHWIO"}
_WINOGRAD = {
    "tile_size": None,
    "strides": (1, 1),
    "padding": (0, 0, 0, 0),
    "dilation": (1, 1),
    "channels": None,
    "kernel_size": (3, 3),
    "data_layout": "NHWC",
    "out_dtype": "",
}
_CONV3D = {
    "strides": (1, 1, 1),
    "padding": (0,) * 6,
    "dilation": (1, 1, 1),
    "groups": 1,
    "channels": None,
    "kernel_size": None,
    "data_layout": "NCDHW",
    "kernel_layout": _default_kernel_layout,
    "out_dtype": "",
}


def _conv3d(ins, a):
    return conv3d(
        ins[0],
        ins[1],
        a["strides"],
        a["padding"],
        a["dilation"],
        a["groups"],
        a["data_layout"],
        a["kernel_layout"],
        a["out_dtype"],
    )


def _pool_entry(kind, nsp, attrs, layouts):
    return OpEntry(
        f"nn.{kind}_pool{nsp}d",
        ("data",),
        attrs,
        rules.OUT_ELEMWISE_FUSABLE,
        rules.pool_nd_rule(nsp),
        _pool(kind, nsp),
        ref.pool_ref(kind),
        rules.fix_pool(nsp, layouts),
    )


def _global_pool_entry(kind):
    return OpEntry(
        f"nn.global_{kind}_pool2d",
        ("data",),
        {"layout": "NCHW"},
        rules.OUT_ELEMWISE_FUSABLE,
        rules.global_pool_rule,
        lambda ins, a: global_pool(ins[0], kind, a["layout"]),
        ref.global_pool_ref(np.mean if kind == "avg" else np.max),
        rules.check_layout(("NCHW", "NHWC")),
    )


ENTRIES = (
    OpEntry(
        "nn.conv2d",
        ("data", "weight"),
        _CONV2D,
        rules.OUT_ELEMWISE_FUSABLE,
        # NCHW / NHWC, and VTA's packed NCHW1n16c (packed_layout.py wraps the plain rules)
        packed_layout.conv2d_rule(rules.conv_nd_rule(2)),
        packed_layout.conv2d_compute(_conv2d),
        packed_layout.conv2d_ref(ref.conv_ref),
        packed_layout.conv2d_fix(rules.fix_conv(2, _CONV2D_LAYOUTS)),
    ),
    OpEntry(
        "nn.conv3d",
        ("data", "weight"),
        _CONV3D,
        rules.OUT_ELEMWISE_FUSABLE,
        rules.conv_nd_rule(3),
        _conv3d,
        ref.conv_ref,
        rules.fix_conv(3, _CONV3D_LAYOUTS),
    ),
    OpEntry(
        "nn.contrib_conv2d_winograd_weight_transform",
        ("weight",),
        {"tile_size": REQUIRED},
        rules.OPAQUE,
        rules.winograd_weight_transform_rule,
        lambda ins, a: winograd.winograd_weight_transform(ins[0], a["tile_size"]),
        ref.winograd_weight_transform_ref,
    ),
    OpEntry(
        "nn.contrib_conv2d_winograd_without_weight_transform",
        ("data", "weight"),
        _WINOGRAD,
        rules.OUT_ELEMWISE_FUSABLE,
        rules.winograd_conv_rule,
        _winograd,
        ref.winograd_conv_ref,
        rules.fix_window(2, "kernel_size"),
    ),
    OpEntry(
        "nn.dense",
        ("data", "weight"),
        {"units": None, "out_dtype": ""},
        rules.OUT_ELEMWISE_FUSABLE,
        rules.dense_rule,
        lambda ins, a: dense(ins[0], ins[1], a["units"], a["out_dtype"]),
        ref.dense_ref,
    ),
    OpEntry(
        "nn.batch_matmul",
        ("x", "y"),
        {"out_dtype": "", "transpose_b": True},
        rules.OUT_ELEMWISE_FUSABLE,
        rules.batch_matmul_rule,
        lambda ins, a: batch_matmul(ins[0], ins[1], a["out_dtype"], a["transpose_b"]),
        ref.batch_matmul_ref,
    ),
    OpEntry(
        "nn.bias_add",
        ("data", "bias"),
        {"axis": 1},
        rules.BROADCAST,
        rules.bias_add_rule,
        lambda ins, a: broadcast.bias_add(ins[0], ins[1], a["axis"]),
        ref.bias_add_ref,
    ),
    OpEntry(
        "nn.batch_norm",
        ("data", "gamma", "beta", "moving_mean", "moving_var"),
        {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True},
        rules.OPAQUE,
        rules.batch_norm_rule,
        lambda ins, a: broadcast.batch_norm(*ins, a["axis"], a["epsilon"], a["center"], a["scale"]),
        ref.batch_norm_ref,
    ),
    _pool_entry("max", 2, _POOL2D, ("NCHW", "NHWC")),
    _pool_entry("avg", 2, {**_POOL2D, "count_include_pad": False}, ("NCHW", "NHWC")),
    _pool_entry("max", 3, _POOL3D, ("NCDHW", "NDHWC")),
    _pool_entry("avg", 3, {**_POOL3D, "count_include_pad": False}, ("NCDHW", "NDHWC")),
    _global_pool_entry("avg"),
    _global_pool_entry("max"),
    OpEntry(
        "nn.adaptive_avg_pool2d",
        ("data",),
        {"output_size": None, "layout": "NCHW"},
        rules.OUT_ELEMWISE_FUSABLE,
        rules.adaptive_pool_rule,
        _adaptive_avg,
        ref.adaptive_avg_pool2d_ref,
        rules.fix_adaptive,
    ),
    unary_entry(
        "nn.softmax",
        lambda ins, a: softmax(ins[0], a["axis"]),
        ref.softmax_ref,
        {"axis": -1},
        rules.softmax_rule,
        rules.OPAQUE,
    ),
    OpEntry(
        "nn.layer_norm",
        ("data", "gamma", "beta"),
        {"axis": -1, "epsilon": 1e-5, "center": True, "scale": True},
        rules.OPAQUE,
        rules.layer_norm_rule,
        lambda ins, a: reduce.layer_norm(*ins, a["axis"], a["epsilon"], a["center"], a["scale"]),
        ref.layer_norm_ref,
    ),
    # --- ONNX import: conv transpose, resize, norms (issue 26) ---
    OpEntry(
        "nn.conv2d_transpose",
        ("data", "weight"),
        {
            "strides": (1, 1),
            "padding": (0, 0, 0, 0),
            "output_padding": (0, 0),
            "dilation": (1, 1),
            "groups": 1,
            "channels": None,
            "kernel_size": None,
            "data_layout": "NCHW",
            "kernel_layout": "",
            "out_dtype": "",
        },
        rules.OUT_ELEMWISE_FUSABLE,
        nn_rules.conv2d_transpose_rule,
        lambda ins, a: conv2d_transpose(
            ins[0],
            ins[1],
            a["strides"],
            a["padding"],
            a["output_padding"],
            a["dilation"],
            a["groups"],
            a["data_layout"],
            a["kernel_layout"],
            a["out_dtype"],
        ),
        nn_ref.conv2d_transpose_ref,
        nn_rules.fix_conv2d_transpose,
    ),
    OpEntry(
        "nn.group_norm",
        ("data", "gamma", "beta"),
        {"num_groups": REQUIRED, "axis": 1, "epsilon": 1e-5, "center": True, "scale": True},
        rules.OPAQUE,
        nn_rules.group_norm_rule,
        lambda ins, a: group_norm(
            *ins, a["num_groups"], a["axis"], a["epsilon"], a["center"], a["scale"]
        ),
        nn_ref.group_norm_ref,
    ),
    OpEntry(
        "nn.instance_norm",
        ("data", "gamma", "beta"),
        {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True},
        rules.OPAQUE,
        nn_rules.instance_norm_rule,
        lambda ins, a: group_norm(
            *ins,
            ins[0].shape[a["axis"] % ins[0].ndim],
            a["axis"],
            a["epsilon"],
            a["center"],
            a["scale"],
            op="nn.instance_norm",
        ),
        nn_ref.instance_norm_ref,
    ),
    OpEntry(
        "image.resize2d",
        ("data",),
        {
            "size": REQUIRED,
            "layout": "NCHW",
            "method": "linear",
            "coordinate_transformation_mode": "half_pixel",
            "rounding_method": "",
            "cubic_alpha": -0.5,
            "scales": None,
        },
        rules.INJECTIVE,
        nn_rules.resize2d_rule,
        lambda ins, a: resize2d(
            ins[0],
            a["size"],
            a["layout"],
            a["method"],
            a["coordinate_transformation_mode"],
            a["rounding_method"],
            a["cubic_alpha"],
            a["scales"],
        ),
        nn_ref.resize2d_ref,
        nn_rules.fix_resize2d,
    ),
)
