"""Constructors of the ops outside ``nn`` (``op.add``, ``op.concatenate`` ...) plus
``var``/``const``; ``op.nn`` is the ``nn`` namespace, as in ``relay.op.nn``.

Binary ops accept a Python number on either side: it becomes a scalar Constant of the other
side's dtype (Relay would ask for ``relay.const``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import nn
from .ir import Call, Constant, Expr, Var, make_call
from .shapes import get_op as get  # relay.op.get("nn.conv2d"): the op's table entry

__all__ = [
    "get", "nn", "var", "const", "sigmoid", "tanh", "exp", "sqrt", "negative", "clip", "add",
    "subtract", "multiply", "divide", "maximum", "minimum", "right_shift", "left_shift", "floor",
    "concatenate", "reshape", "transpose", "squeeze", "layout_transform", "cast",
]  # fmt: skip


def var(name: str, shape: Sequence[int], dtype: str = "float32") -> Var:
    """A graph input or weight."""
    return Var(name, tuple(shape), dtype)


def const(value, dtype: str = "float32", name: str = "") -> Constant:
    """A constant tensor (a Python number gives a scalar)."""
    return Constant(np.asarray(value, dtype=dtype), name)


def sigmoid(data: Expr) -> Call:
    return make_call("sigmoid", (data,))


def tanh(data: Expr) -> Call:
    return make_call("tanh", (data,))


def exp(data: Expr) -> Call:
    return make_call("exp", (data,))


def sqrt(data: Expr) -> Call:
    return make_call("sqrt", (data,))


def floor(data: Expr) -> Call:
    return make_call("floor", (data,))


def negative(data: Expr) -> Call:
    return make_call("negative", (data,))


def clip(data: Expr, a_min: float, a_max: float) -> Call:
    """min(max(x, a_min), a_max)."""
    return make_call("clip", (data,), {"a_min": float(a_min), "a_max": float(a_max)})


def _binary(op, lhs, rhs) -> Call:
    if not isinstance(lhs, Expr) and isinstance(rhs, Expr):
        lhs = const(lhs, rhs.dtype)
    if not isinstance(rhs, Expr) and isinstance(lhs, Expr):
        rhs = const(rhs, lhs.dtype)
    return make_call(op, (lhs, rhs))


def add(lhs, rhs) -> Call:
    """lhs + rhs with numpy broadcasting."""
    return _binary("add", lhs, rhs)


def subtract(lhs, rhs) -> Call:
    return _binary("subtract", lhs, rhs)


def multiply(lhs, rhs) -> Call:
    return _binary("multiply", lhs, rhs)


def divide(lhs, rhs) -> Call:
    return _binary("divide", lhs, rhs)


def maximum(lhs, rhs) -> Call:
    return _binary("maximum", lhs, rhs)


def minimum(lhs, rhs) -> Call:
    return _binary("minimum", lhs, rhs)


def right_shift(lhs, rhs) -> Call:
    """lhs >> rhs on integers (arithmetic for signed dtypes), with numpy broadcasting."""
    return _binary("right_shift", lhs, rhs)


def left_shift(lhs, rhs) -> Call:
    """lhs << rhs on integers, with numpy broadcasting."""
    return _binary("left_shift", lhs, rhs)


def concatenate(data: Sequence[Expr], axis: int = 0) -> Call:
    """Join ``data`` along ``axis``; the inputs are the call's args (no Tuple node)."""
    return make_call("concatenate", tuple(data), {"axis": axis})


def reshape(data: Expr, newshape: Sequence[int]) -> Call:
    """Relay's reshape: 0 copies the input dim, one -1 is inferred."""
    if isinstance(newshape, int):
        newshape = (newshape,)
    return make_call("reshape", (data,), {"newshape": tuple(newshape)})


def transpose(data: Expr, axes: Sequence[int] | None = None) -> Call:
    """Permute dims (``axes=None`` reverses them)."""
    return make_call("transpose", (data,), {"axes": None if axes is None else tuple(axes)})


def squeeze(data: Expr, axis=None) -> Call:
    """Drop size-1 dims (all of them when ``axis`` is None)."""
    return make_call("squeeze", (data,), {"axis": axis})


def layout_transform(data: Expr, src_layout: str, dst_layout: str) -> Call:
    """NCHW <-> NHWC, NCDHW <-> NDHWC."""
    return make_call(
        "layout_transform", (data,), {"src_layout": src_layout, "dst_layout": dst_layout}
    )


def cast(data: Expr, dtype: str) -> Call:
    return make_call("cast", (data,), {"dtype": dtype})
