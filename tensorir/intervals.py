"""Symbolic intervals of index expressions: what bound inference relaxes a read to.

:func:`sym_interval` gives ``[lo, hi]`` of an index when some loop variables range over
their loops (``lo``/``hi`` symbolic in the others) and a bound on ``hi - lo``;
:func:`min_expr`, :func:`max_expr` join intervals, :func:`region_width` is the width of the
joined region (:mod:`tensorir.bounds` uses them for the regions of attached stages).
"""

from __future__ import annotations

import math

from .arith import const_bound, linear_diff, simplify_expr
from .dtype import is_int
from .expr import Binary, Cast, Const, Expr, IfThenElse, Select, Var, walk
from .lower_error import LowerError

__all__ = ["max_expr", "min_expr", "region_width", "sym_interval"]

INF = math.inf


def _has_any(e: Expr, vars_: dict) -> bool:
    return any(isinstance(n, Var) and n in vars_ for n in walk(e))


def sym_interval(e: Expr, relaxed: dict, ranges: dict):
    """``(lo, hi, width)`` of ``e`` when the Vars in ``relaxed`` range over their intervals.

    ``lo``/``hi`` are expressions in the other (fixed) variables; ``width`` bounds ``hi - lo``
    (an int, or None when unknown). ``ranges`` holds the ranges of every variable (for the
    constant fallback).
    """
    if not _has_any(e, relaxed):
        return e, e, 0
    if isinstance(e, Var):
        lo, hi = relaxed[e]
        return Const(lo, "int32"), Const(hi, "int32"), hi - lo
    if isinstance(e, Binary) and is_int(e.dtype):
        op = e.op
        if op in ("+", "-"):
            a = sym_interval(e.a, relaxed, ranges)
            b = sym_interval(e.b, relaxed, ranges)
            w = None if a[2] is None or b[2] is None else a[2] + b[2]
            if op == "+":
                return a[0] + b[0], a[1] + b[1], w
            return a[0] - b[1], a[1] - b[0], w
        if op == "*":
            for x, y in ((e.a, e.b), (e.b, e.a)):
                if isinstance(y, Const):
                    c = int(y.value)
                    a = sym_interval(x, relaxed, ranges)
                    w = None if a[2] is None else a[2] * abs(c)
                    if c >= 0:
                        return a[0] * c, a[1] * c, w
                    return a[1] * c, a[0] * c, w
        if op in ("floordiv", "floormod") and isinstance(e.b, Const) and int(e.b.value) > 0:
            c = int(e.b.value)
            a = sym_interval(e.a, relaxed, ranges)
            if op == "floordiv":
                w = None if a[2] is None else -(-a[2] // c)
                return a[0] // c, a[1] // c, w
            # floormod: the constant bound below ([0, c) or tighter) is all we use
        if op in ("min", "max"):
            a = sym_interval(e.a, relaxed, ranges)
            b = sym_interval(e.b, relaxed, ranges)
            w = None if a[2] is None or b[2] is None else max(a[2], b[2])
            f = min_expr if op == "min" else max_expr
            return f(a[0], b[0]), f(a[1], b[1]), w
    if isinstance(e, Select | IfThenElse):
        t = sym_interval(e.t, relaxed, ranges)
        f = sym_interval(e.f, relaxed, ranges)
        return min_expr(t[0], f[0]), max_expr(t[1], f[1]), None
    if isinstance(e, Cast) and is_int(e.dtype) and is_int(e.value.dtype):
        return sym_interval(e.value, relaxed, ranges)
    lo, hi = const_bound(e, {**ranges, **relaxed})
    if lo == -INF or hi == INF:
        raise LowerError(f"cannot bound the index expression {e}")
    return Const(int(lo), "int32"), Const(int(hi), "int32"), int(hi - lo)


def min_expr(a: Expr, b: Expr) -> Expr:
    d = linear_diff(a, b)
    if d is not None:
        return a if d <= 0 else b
    return Binary("min", a, b, "int32")


def max_expr(a: Expr, b: Expr) -> Expr:
    d = linear_diff(a, b)
    if d is not None:
        return a if d >= 0 else b
    return Binary("max", a, b, "int32")


def region_width(lo: Expr, hi: Expr, w, ranges: dict) -> int:
    d = linear_diff(hi, lo)
    if d is not None:
        return d
    cands = [] if w is None else [w]
    b = const_bound(simplify_expr(hi - lo, ranges), ranges)
    if b[1] != INF:
        cands.append(int(b[1]))
    if not cands:
        raise LowerError(f"cannot bound the width of the region [{lo}, {hi}]")
    return min(cands)
