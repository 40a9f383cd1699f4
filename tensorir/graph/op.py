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
    "concatenate", "reshape", "transpose", "squeeze", "layout_transform", "cast", "take",
    "gather",
    # ONNX import: reductions, logic, math (issue 26)
    "erf", "log", "abs", "isnan", "isinf", "logical_not", "power", "equal", "not_equal",
    "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "where",
    "sum", "mean", "max", "min", "cumsum", "strided_slice", "broadcast_to", "trilu",
]  # fmt: skip


def var(name: str, shape: Sequence[int], dtype: str = "float32") -> Var:
    """A graph input or weight."""
    return Var(name, tuple(shape), dtype)


def const(value, dtype: str = "float32", name: str = "") -> Constant:
    """A constant tensor (a Python number gives a scalar)."""
    try:
        return Constant(np.asarray(value, dtype=dtype), name)
    except OverflowError:
        raise ValueError(f"op.const: {value} does not fit {dtype}") from None


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


# --- ONNX import: reductions, logic, math (issue 26) ---


def _unary_op(name: str, doc: str):
    def f(data: Expr) -> Call:
        return make_call(name, (data,))

    f.__name__, f.__doc__ = name, doc
    return f


erf = _unary_op("erf", "erf(x) (float).")
log = _unary_op("log", "Natural log (float).")
abs = _unary_op("abs", "|x|.")  # noqa: A001 - Relay's name
isnan = _unary_op("isnan", "bool: x is NaN.")
isinf = _unary_op("isinf", "bool: x is +-inf.")
logical_not = _unary_op("logical_not", "bool: not x.")


def _binary_op(name: str, doc: str):
    def f(lhs, rhs) -> Call:
        return _binary(name, lhs, rhs)

    f.__name__, f.__doc__ = name, doc
    return f


power = _binary_op("power", "lhs ** rhs with numpy broadcasting.")
equal = _binary_op("equal", "bool lhs == rhs with numpy broadcasting.")
not_equal = _binary_op("not_equal", "bool lhs != rhs.")
less = _binary_op("less", "bool lhs < rhs.")
less_equal = _binary_op("less_equal", "bool lhs <= rhs.")
greater = _binary_op("greater", "bool lhs > rhs.")
greater_equal = _binary_op("greater_equal", "bool lhs >= rhs.")
logical_and = _binary_op("logical_and", "bool lhs && rhs (non-zero is true).")
logical_or = _binary_op("logical_or", "bool lhs || rhs.")


def where(condition: Expr, x, y) -> Call:
    """``condition ? x : y`` with the three shapes broadcast (a number takes the other's
    dtype)."""
    if not isinstance(x, Expr):
        x = const(x, y.dtype)
    if not isinstance(y, Expr):
        y = const(y, x.dtype)
    return make_call("where", (condition, x, y))


def _reduce_op(name: str):
    def f(data: Expr, axis=None, keepdims: bool = False, exclude: bool = False) -> Call:
        return make_call(name, (data,), {"axis": axis, "keepdims": keepdims, "exclude": exclude})

    f.__name__ = name
    f.__doc__ = f"The {name} over ``axis`` (an int, ints or None for all dims), Relay's ``{name}``."
    return f


sum = _reduce_op("sum")  # noqa: A001 - Relay's names
mean = _reduce_op("mean")
max = _reduce_op("max")  # noqa: A001
min = _reduce_op("min")  # noqa: A001


def cumsum(data: Expr, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> Call:
    """Running sums along ``axis``; ``exclusive`` leaves each element out, ``reverse`` sums
    from the end (ONNX CumSum's attributes)."""
    return make_call("cumsum", (data,), {"axis": axis, "exclusive": exclusive, "reverse": reverse})


def strided_slice(data: Expr, begin, end, strides=None, axes=None) -> Call:
    """``data[begin:end:strides]`` per dim (or per dim of ``axes``), clamped as Python's
    slices are."""
    attrs = {"begin": tuple(begin), "end": tuple(end)}
    attrs["strides"] = None if strides is None else tuple(strides)
    attrs["axes"] = None if axes is None else tuple(axes)
    return make_call("strided_slice", (data,), attrs)


def broadcast_to(data: Expr, shape: Sequence[int]) -> Call:
    """``data`` broadcast to ``shape`` (numpy's rule)."""
    return make_call("broadcast_to", (data,), {"shape": tuple(int(d) for d in shape)})


def trilu(data: Expr, k: int = 0, upper: bool = True) -> Call:
    """The upper (``col - row >= k``) or lower (``col - row <= k``) triangle of the last two
    dims; zero elsewhere."""
    return make_call("trilu", (data,), {"k": int(k), "upper": bool(upper)})


def take(data: Expr, indices: Expr, axis: int = 0, mode: str = "clip") -> Call:
    """``data`` indexed along ``axis`` by the integer tensor ``indices`` (np.take): an
    embedding lookup is ``take(table, input_ids, axis=0, mode="fast")``. ``mode``: "clip"
    (Relay's default) clamps, "wrap" takes indices modulo the axis, "fast" counts negatives
    from the end and makes any other index outside the axis a run-time error
    (tensorir.ops.indexing)."""
    return make_call("take", (data, indices), {"axis": int(axis), "mode": mode})


def gather(data: Expr, axis: int, indices: Expr, mode: str = "fast") -> Call:
    """``out[i] = data[i[:axis], indices[i], i[axis+1:]]`` (ONNX GatherElements); Relay's
    argument order. ``mode`` as in :func:`take` (default "fast": negatives count from the end,
    anything else outside the axis is an error)."""
    return make_call("gather", (data, indices), {"axis": int(axis), "mode": mode})
