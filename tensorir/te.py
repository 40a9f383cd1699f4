"""The ``te`` namespace: ``from autosched import te`` gives what TVM users know."""

from __future__ import annotations

from . import tensor as _t
from .dtype import check_dtype as _check_dtype
from .expr import (
    Expr,
    IterVar,
    Var,
    all_,
    any_,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    call,
    cast,
    const,
    equal,
    floordiv,
    floormod,
    if_then_else,
    left_shift,
    not_equal,
    right_shift,
    saturate_cast,
    select,
)
from .tensor import Tensor, TensorError, compute, placeholder, reduce_axis

__all__ = [
    "Expr", "IterVar", "Tensor", "TensorError", "Var", "abs", "all", "any", "bitwise_and",
    "bitwise_not", "bitwise_or", "bitwise_xor", "cast", "ceil", "compute", "const", "equal",
    "erf", "exp", "floor", "floordiv", "floormod", "if_then_else", "left_shift", "log", "max",
    "max_value", "min", "min_value", "not_equal", "placeholder", "power", "reduce_axis",
    "right_shift", "saturate_cast", "select", "sigmoid", "sqrt", "sum", "tanh", "var",
]  # fmt: skip

all = all_  # noqa: A001 - te naming
any = any_  # noqa: A001


def var(name: str = "v", dtype: str = "int32") -> Var:
    return Var(name, _check_dtype(dtype))


def sum(expr, axis, where=None):  # noqa: A001
    """Sum of ``expr`` over the reduce axes ``axis``."""
    return _t.sum(expr, axis, where)


def _min_max(kind: str):
    reducer = getattr(_t, kind)
    elementwise = getattr(__import__("tensorir.expr", fromlist=["x"]), f"{kind}_")

    def f(expr, axis=None, where=None):
        # te.max(a, b) is the elementwise maximum; te.max(expr, axis=k) the reduction.
        if axis is None or not isinstance(axis, IterVar | list | tuple):
            if axis is None:
                raise TensorError(f"te.{kind}: give axis= for a reduction, or two values")
            return elementwise(expr, axis)
        return reducer(expr, axis, where)

    f.__name__ = kind
    f.__doc__ = f"te.{kind}(a, b) elementwise, or te.{kind}(expr, axis=k) as a reduction."
    return f


max = _min_max("max")  # noqa: A001
min = _min_max("min")  # noqa: A001


def _math(name: str):
    def f(x):
        return call(name, x)

    f.__name__ = name
    return f


exp = _math("exp")
log = _math("log")
sqrt = _math("sqrt")
tanh = _math("tanh")
sigmoid = _math("sigmoid")
erf = _math("erf")
floor = _math("floor")
ceil = _math("ceil")


def abs(x):  # noqa: A001
    return call("fabs", x) if not _is_int(x) else max(x, -x)


def power(x, y):
    return call("pow", x, y)


def _is_int(x) -> bool:
    from .dtype import is_int
    from .expr import as_expr

    return is_int(as_expr(x).dtype)


def max_value(dtype: str) -> Expr:
    return _t.reduce_identity("min", dtype)


def min_value(dtype: str) -> Expr:
    return _t.reduce_identity("max", dtype)
