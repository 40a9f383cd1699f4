"""ONNX converters of shapes and data movement: Flatten, Reshape, Transpose, Concat, Squeeze,
Unsqueeze, Pad, Identity, Dropout, Constant, Cast, Shape; ``_axes`` reads the axes attribute or
input others reuse."""

from __future__ import annotations

import math

import numpy as np

from . import nn, op
from .onnx_node import Node, _register, _static_or
from .shapes import reshape_shape


@_register("Flatten", "axis")
def _flatten(node: Node):
    v = node.value(0)
    nd = len(v.shape)
    axis = int(node.attr("axis", 1))
    axis = axis + nd if axis < 0 else axis
    if not 0 <= axis <= nd:
        node.fail(f"axis={axis} is out of range for a {nd}-D input")
    newshape = (math.prod(v.shape[:axis]), math.prod(v.shape[axis:]))
    if v.static is not None:
        return v.static.reshape(newshape)
    if axis == 1:
        return nn.batch_flatten(v.expr)
    return op.reshape(v.expr, newshape)


@_register("Reshape", "allowzero")
def _reshape(node: Node):
    v = node.value(0)
    target = tuple(int(d) for d in node.static(1, "shape"))
    if node.attr("allowzero", 0) and 0 in target:
        node.unsupported("allowzero", 1, [0])
    try:
        newshape = reshape_shape(v.shape, target)
    except ValueError as e:
        node.fail(str(e))
    if v.static is not None:
        return v.static.reshape(newshape)
    return op.reshape(v.expr, newshape)


@_register("Transpose", "perm")
def _transpose(node: Node):
    v = node.value(0)
    perm = node.attr("perm")
    perm = tuple(reversed(range(len(v.shape)))) if perm is None else tuple(int(p) for p in perm)
    if v.static is not None:
        return v.static.transpose(perm)
    return op.transpose(v.expr, perm)


@_register("Concat", "axis")
def _concat(node: Node):
    axis = node.attr("axis")
    if axis is None:
        node.fail("attribute axis is required")
    names = [i for i in range(node.n_inputs) if node.has(i)]
    return _static_or(
        node,
        lambda *a: np.concatenate(a, axis=axis),
        lambda: op.concatenate([node.expr(i) for i in names], axis=int(axis)),
    )


def _axes(node: Node, what: str):
    """The ``axes`` of Squeeze/Unsqueeze/Pad: an attribute before opset 13, an input after."""
    if node.has(1):
        return [int(a) for a in node.static(1, what).reshape(-1)]
    axes = node.attr("axes")
    return None if axes is None else [int(a) for a in axes]


@_register("Squeeze", "axes")
def _squeeze(node: Node):
    v = node.value(0)
    nd = len(v.shape)
    axes = _axes(node, "axes")
    if axes is None:
        axes = [i for i, d in enumerate(v.shape) if d == 1]
    axes = sorted(a + nd if a < 0 else a for a in axes)
    bad = [a for a in axes if not 0 <= a < nd or v.shape[a] != 1]
    if bad:
        node.fail(f"cannot squeeze axes {bad} of shape {v.shape}")
    if v.static is not None:
        return v.static.squeeze(tuple(axes))
    return op.squeeze(v.expr, tuple(axes))


@_register("Unsqueeze", "axes")
def _unsqueeze(node: Node):
    v = node.value(0)
    axes = _axes(node, "axes")
    if axes is None:
        node.fail("needs axes (attribute before opset 13, input from 13 on)")
    nd = len(v.shape) + len(axes)
    axes = sorted(a + nd if a < 0 else a for a in axes)
    if len(set(axes)) != len(axes) or any(not 0 <= a < nd for a in axes):
        node.fail(f"bad axes {axes} for a {len(v.shape)}-D input")
    dims = iter(v.shape)
    newshape = tuple(1 if i in axes else next(dims) for i in range(nd))
    if v.static is not None:
        return v.static.reshape(newshape)
    return op.reshape(v.expr, newshape)


_PAD_MODES = ("constant",)


@_register("Pad", "mode pads value")
def _pad(node: Node):
    mode = node.attr("mode", "constant")
    if mode not in _PAD_MODES:
        node.unsupported("mode", mode, _PAD_MODES)
    x = node.expr(0)
    nd = len(x.shape)
    if node.has(1):
        pads = [int(p) for p in node.static(1, "pads").reshape(-1)]
    else:
        pads = node.attr("pads")  # opset < 11
        if pads is None:
            node.fail("needs pads (attribute before opset 11, input from 11 on)")
        pads = [int(p) for p in pads]
    value = float(node.attr("value", 0.0))
    if node.has(2):
        value = float(node.static(2, "constant_value").reshape(-1)[0])
    axes = list(range(nd))
    if node.has(3):
        axes = [int(a) % nd for a in node.static(3, "axes").reshape(-1)]
    if len(pads) != 2 * len(axes):
        node.fail(f"pads {pads} must have 2 values per padded axis ({len(axes)} axes)")
    if any(p < 0 for p in pads):
        node.fail(f"negative pads {pads} (cropping) are not supported")
    width = [[0, 0] for _ in range(nd)]
    for j, a in enumerate(axes):
        width[a] = [pads[j], pads[j + len(axes)]]
    return nn.pad(x, tuple(tuple(p) for p in width), pad_value=value)


@_register("Identity")
def _identity(node: Node):
    return node.value(0)


@_register("Dropout", "ratio seed")
def _dropout(node: Node):
    if node.has(2) and bool(node.static(2, "training_mode").reshape(-1)[0]):
        node.fail("training_mode=True is not supported (inference only)")
    return node.value(0)


@_register(
    "Constant",
    "value value_float value_floats value_int value_ints sparse_value value_string value_strings",
)
def _constant(node: Node):
    a = node.attrs
    if "value" in a:
        return np.asarray(a["value"])
    if "value_float" in a:
        return np.asarray(a["value_float"], dtype=np.float32)
    if "value_floats" in a:
        return np.asarray(a["value_floats"], dtype=np.float32)
    if "value_int" in a:
        return np.asarray(a["value_int"], dtype=np.int64)
    if "value_ints" in a:
        return np.asarray(a["value_ints"], dtype=np.int64)
    attr = next(iter(a), None)
    node.fail(f"attribute {attr} is not supported; supported: value, value_float(s), value_int(s)")


@_register("Cast", "to saturate round_mode")
def _cast(node: Node):
    dtype = node.imp.dtype_of(node.attr("to"), node)
    v = node.value(0)
    if v.static is not None:
        return v.static.astype(dtype)
    if v.expr.dtype == dtype:
        return v.expr
    return op.cast(v.expr, dtype)


@_register("Shape", "start end")
def _shape(node: Node):
    shape = np.asarray(node.value(0).shape, dtype=np.int64)
    start, end = node.attr("start", 0), node.attr("end")
    return shape[start:end]
