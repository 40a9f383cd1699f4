"""Elementwise ops: one output element from the same-index input element (``T_relu`` ...)."""

from __future__ import annotations

from .. import te
from ..dtype import check_dtype, is_float
from ..tensor import Tensor, TensorError
from ._util import cast_to, compute

__all__ = [
    "abs", "cast", "clip", "erf", "exp", "floor", "isinf", "isnan", "log", "logical_not",
    "negative", "relu", "sigmoid", "sqrt", "tanh",
]  # fmt: skip


def _unary(x: Tensor, f, name: str) -> Tensor:
    return compute(x.shape, lambda *i: f(x[i]), name, "ax", tag="elemwise")


def relu(x: Tensor) -> Tensor:
    """``T_relu = max(x, 0)``."""
    return _unary(x, lambda v: te.max(v, te.const(0, x.dtype)), "T_relu")


def clip(x: Tensor, a_min, a_max) -> Tensor:
    """``T_clip = max(min(x, a_max), a_min)`` (topi's order)."""
    if a_min is None or a_max is None:
        raise TensorError("clip: attributes 'a_min' and 'a_max' are required")
    if float(a_min) > float(a_max):
        raise TensorError(f"clip: a_min {a_min} is larger than a_max {a_max}")
    lo = te.const(float(a_min) if is_float(x.dtype) else int(a_min), x.dtype)
    hi = te.const(float(a_max) if is_float(x.dtype) else int(a_max), x.dtype)
    return _unary(x, lambda v: te.max(te.min(v, hi), lo), "T_clip")


def sigmoid(x: Tensor) -> Tensor:
    """``T_sigmoid = 1 / (1 + exp(-x))`` as one math call."""
    return _unary(x, te.sigmoid, "T_sigmoid")


def tanh(x: Tensor) -> Tensor:
    """``T_tanh = tanh(x)``."""
    return _unary(x, te.tanh, "T_tanh")


def exp(x: Tensor) -> Tensor:
    """``T_exp = exp(x)``."""
    return _unary(x, te.exp, "T_exp")


def floor(x: Tensor) -> Tensor:
    """``T_floor = floor(x)`` (float inputs)."""
    if not is_float(x.dtype):
        raise TensorError(f"floor: the input must be a float type, got {x.dtype}")
    return _unary(x, te.floor, "T_floor")


def sqrt(x: Tensor) -> Tensor:
    """``T_sqrt = sqrt(x)``."""
    return _unary(x, te.sqrt, "T_sqrt")


def negative(x: Tensor) -> Tensor:
    """``T_negative = -x``."""
    return _unary(x, lambda v: -v, "T_negative")


def cast(x: Tensor, dtype: str) -> Tensor:
    """``T_cast = dtype(x)``."""
    check_dtype(dtype)
    return _unary(x, lambda v: cast_to(v, dtype), "T_cast")


# --- ONNX import: math and logic (issue 26) ---


def _float_only(x: Tensor, op: str) -> None:
    if not is_float(x.dtype):
        raise TensorError(f"{op}: the input must be a float type, got {x.dtype}")


def erf(x: Tensor) -> Tensor:
    """``T_erf = erf(x)`` (float inputs; the exact Gelu is ``x * 0.5 * (1 + erf(x / sqrt 2))``)."""
    _float_only(x, "erf")
    return _unary(x, te.erf, "T_erf")


def log(x: Tensor) -> Tensor:
    """``T_log = log(x)`` (float inputs)."""
    _float_only(x, "log")
    return _unary(x, te.log, "T_log")


def abs(x: Tensor) -> Tensor:  # noqa: A001 - topi's name
    """``T_abs = |x|``."""
    return _unary(x, te.abs, "T_abs")


def isnan(x: Tensor) -> Tensor:
    """``T_isnan``: bool, true where ``x != x`` (an unordered compare, so only NaN)."""
    _float_only(x, "isnan")
    return _unary(x, lambda v: te.not_equal(v, v), "T_isnan")


def isinf(x: Tensor) -> Tensor:
    """``T_isinf``: bool, true where ``|x|`` is infinite."""
    _float_only(x, "isinf")
    inf = te.const(float("inf"), x.dtype)
    return _unary(x, lambda v: te.equal(te.abs(v), inf), "T_isinf")


def logical_not(x: Tensor) -> Tensor:
    """``T_logical_not``: bool ``!x`` (a non-bool input is compared with 0)."""
    return _unary(x, lambda v: ~(v if v.dtype == "bool" else te.not_equal(v, 0)), "T_logical_not")
