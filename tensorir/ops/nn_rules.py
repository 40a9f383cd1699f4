"""Shape rules and attribute canonicalisers of conv2d_transpose, group / instance norm,
image.resize2d (the ops modern ONNX exports need; issue 26). Same contract
as :mod:`tensorir.ops.shape_rules`."""

from __future__ import annotations

from .conv2d_transpose import KERNEL_LAYOUTS, conv_transpose_out_size
from .resize import COORDINATE_MODES, METHODS, ROUNDING_METHODS
from .shape_rules import ShapeError, _axis, _ndim, _same_dtype, fix_window, ntuple

__all__ = [
    "conv2d_transpose_rule", "fix_conv2d_transpose", "fix_resize2d", "group_norm_rule",
    "instance_norm_rule", "resize2d_rule",
]  # fmt: skip


def fix_conv2d_transpose(a):
    a = fix_window(2, "kernel_size")(a)
    a["output_padding"] = ntuple(a["output_padding"], 2, "output_padding")
    if a["data_layout"] not in KERNEL_LAYOUTS:
        raise TypeError(
            f"data_layout must be one of {list(KERNEL_LAYOUTS)}, got {a['data_layout']!r}"
        )
    if not a["kernel_layout"]:
        a["kernel_layout"] = KERNEL_LAYOUTS[a["data_layout"]]
    if a["kernel_layout"] != KERNEL_LAYOUTS[a["data_layout"]]:
        raise TypeError(
            f"kernel_layout {a['kernel_layout']!r} does not go with data_layout "
            f"{a['data_layout']!r}; use {KERNEL_LAYOUTS[a['data_layout']]!r}"
        )
    return a


def conv2d_transpose_rule(shapes, dtypes, a):
    data, weight = shapes
    _ndim(data, 4, "data")
    _ndim(weight, 4, "weight")
    dl, kl, g = a["data_layout"], a["kernel_layout"], a["groups"]
    ci = data[dl.index("C")]
    wi, wo = weight[kl.index("I")], weight[kl.index("O")]
    ks = tuple(weight[kl.index(c)] for c in "HW")
    if g < 1 or wi != ci or ci % g:
        raise ShapeError(
            f"data has {ci} channels and groups={g}, so the weight ({kl}) needs I={ci} "
            f"(divisible by groups); weight shape {tuple(weight)} has I={wi}"
        )
    if a["channels"] is not None and a["channels"] != wo * g:
        raise ShapeError(f"channels={a['channels']} but the weight gives {wo * g}")
    if a["kernel_size"] is not None and tuple(a["kernel_size"]) != ks:
        raise ShapeError(f"kernel_size={a['kernel_size']} but the weight's is {ks}")
    a["channels"], a["kernel_size"] = wo * g, ks
    out = list(data)
    out[dl.index("C")] = wo * g
    for j, c in enumerate("HW"):
        ax = dl.index(c)
        s, d, op = a["strides"][j], a["dilation"][j], a["output_padding"][j]
        if min(s, d) < 1 or op < 0 or op >= max(s, d):
            raise ShapeError(
                f"strides {a['strides']} and dilation {a['dilation']} must be positive and "
                f"output_padding {a['output_padding']} smaller than one of them"
            )
        pads = a["padding"][j] + a["padding"][j + 2]
        out[ax] = conv_transpose_out_size(data[ax], ks[j], s, d, pads, op)
        if out[ax] < 1:
            raise ShapeError(f"padding {a['padding']} leaves an empty output")
    return tuple(out), a["out_dtype"] or _same_dtype(dtypes, "data and weight")


def _norm_rule(shapes, dtypes, a, groups):
    x = shapes[0]
    if len(x) < 2:
        raise ShapeError(f"data must have a batch and a channel dim, got {tuple(x)}")
    ax = _axis(a["axis"], len(x))
    if ax == 0:
        raise ShapeError("axis must be a channel dim, not the batch dim 0")
    c = x[ax]
    if groups is not None and (groups < 1 or c % groups):
        raise ShapeError(f"num_groups={groups} does not divide the {c} channels")
    for name, s in zip(("gamma", "beta"), shapes[1:]):
        if tuple(s) != (c,):
            raise ShapeError(f"{name} must have shape ({c},) (data's axis {a['axis']}), got {s}")
    return tuple(x), _same_dtype(dtypes)


def group_norm_rule(shapes, dtypes, a):
    return _norm_rule(shapes, dtypes, a, a["num_groups"])


def instance_norm_rule(shapes, dtypes, a):
    return _norm_rule(shapes, dtypes, a, None)


def fix_resize2d(a):
    if a["layout"] not in ("NCHW", "NHWC"):
        raise TypeError(f"layout must be NCHW or NHWC, got {a['layout']!r}")
    for key, valid in (
        ("method", METHODS),
        ("coordinate_transformation_mode", COORDINATE_MODES),
        ("rounding_method", ("",) + ROUNDING_METHODS),
    ):
        if a[key] not in valid:
            raise TypeError(f"{key} must be one of {list(valid)}, got {a[key]!r}")
    a["size"] = ntuple(a["size"], 2, "size")
    if a["scales"] is not None:
        a["scales"] = tuple(float(s) for s in a["scales"])
        if len(a["scales"]) != 2 or min(a["scales"]) <= 0:
            raise TypeError(f"scales must be 2 positive values, got {a['scales']!r}")
    return a


def resize2d_rule(shapes, dtypes, a):
    x = shapes[0]
    _ndim(x, 4, f"data ({a['layout']})")
    if min(a["size"]) < 1:
        raise ShapeError(f"size {a['size']} must be positive")
    out = list(x)
    out[a["layout"].index("H")], out[a["layout"].index("W")] = a["size"]
    return tuple(out), dtypes[0]
