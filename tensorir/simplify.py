"""Expression simplifier: constant folding, integer identities and range-aware div/mod rules.

``simplify(e, ranges)`` rewrites ``e`` bottom-up. Integer sums are kept in a canonical linear
form (terms in first-appearance order, the constant last), which folds ``(x + 2) + 3``,
``(x*2)*3`` and ``x - x``; ``floordiv``/``floormod`` by a positive constant pull out the terms
whose coefficients it divides and use the loop ranges for the rest (``floordiv(i*8 + j, 8)`` is
``i`` when ``0 <= j < 8``); comparisons the ranges decide become constants.
``const_int_bound(e, ranges)`` is the interval arithmetic underneath, which lowering uses for
bound inference. Both memoize per call, so shared sub-trees are visited once.

``ranges`` maps a loop Var (or IterVar) to ``(min, extent)``: the var takes the values
``min .. min + extent - 1``. Integer arithmetic is assumed not to overflow, as in TVM.
"""

from __future__ import annotations

import math

import numpy as np

from .dtype import bits, is_float, is_int, to_numpy
from .expr import (
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    IfThenElse,
    IterVar,
    Not,
    Select,
    Var,
)
from .transform import map_children

__all__ = ["const_int_bound", "simplify"]

INF = math.inf
_CMP = ("<", "<=", ">", ">=", "==", "!=")


def _norm_ranges(ranges) -> dict:
    out = {}
    for v, (lo, ext) in (ranges or {}).items():
        out[v.var if isinstance(v, IterVar) else v] = (int(lo), int(lo) + int(ext) - 1)
    return out


# ----------------------------------------------------------------------------- bounds


def const_int_bound(expr: Expr, ranges=None) -> tuple:
    """Inclusive bounds ``(lo, hi)`` of an integer (or bool) expression.

    Parameters
    ----------
    expr : Expr
        The expression; unknown parts (vars without a range, tensor reads, floats) are
        unbounded.
    ranges : dict, optional
        ``{Var: (min, extent)}`` for loop variables.

    Returns
    -------
    tuple
        ``(lo, hi)``: Python ints, or ``-math.inf`` / ``math.inf`` where unbounded.
    """
    return _Bounds(_norm_ranges(ranges)).of(expr)


class _Bounds:
    def __init__(self, ranges: dict):
        self.ranges = ranges
        self.memo: dict[int, tuple] = {}

    def of(self, e: Expr) -> tuple:
        key = id(e)
        hit = self.memo.get(key)
        if hit is None:
            hit = self._of(e)
            self.memo[key] = hit
        return hit

    def _of(self, e: Expr) -> tuple:
        if isinstance(e, Const):
            if is_int(e.dtype) or e.dtype == "bool":
                return int(e.value), int(e.value)
            return -INF, INF
        if isinstance(e, Var):
            return self.ranges.get(e, (-INF, INF))
        if e.dtype == "bool":
            return 0, 1
        if not is_int(e.dtype):
            return -INF, INF
        if isinstance(e, Binary):
            return self._binary(e)
        if isinstance(e, Select | IfThenElse):
            (a, b), (c, d) = self.of(e.t), self.of(e.f)
            return min(a, c), max(b, d)
        if isinstance(e, Cast):
            lo, hi = self.of(e.value) if not is_float(e.value.dtype) else (-INF, INF)
            tlo, thi = _dtype_range(e.dtype)
            if lo >= tlo and hi <= thi:
                return lo, hi
            return tlo, thi
        return _dtype_range(e.dtype) if is_int(e.dtype) else (-INF, INF)

    def _binary(self, e: Binary) -> tuple:
        (a, b), (c, d) = self.of(e.a), self.of(e.b)
        op = e.op
        if op == "+":
            return a + c, b + d
        if op == "-":
            return a - d, b - c
        if op == "*":
            prods = [_mul(x, y) for x in (a, b) for y in (c, d)]
            return min(prods), max(prods)
        if op == "min":
            return min(a, c), min(b, d)
        if op == "max":
            return max(a, c), max(b, d)
        if op in ("floordiv", "/"):
            if c > 0 or d < 0:  # divisor interval excludes 0: extremes are at the corners
                qs = [_fdiv(x, y) for x in (a, b) for y in (c, d)]
                return min(qs), max(qs)
            return -INF, INF
        if op == "floormod":
            if c == d and c > 0:
                if a >= 0 and b < c and a // c == b // c:
                    return a - (a // c) * c, b - (b // c) * c
                if a != -INF and b != INF and a // c == b // c:
                    return a - (a // c) * c, b - (a // c) * c
                return 0, c - 1
            if c > 0:
                return 0, d - 1
            if d < 0:
                return c + 1, 0
            return -INF, INF
        return -INF, INF


def _mul(x, y):
    if x == 0 or y == 0:
        return 0  # 0 * inf is 0 for interval purposes
    return x * y


def _fdiv(x, y):
    if x in (INF, -INF):
        if y in (INF, -INF):
            return 0
        return x if y > 0 else -x
    if y in (INF, -INF):
        return 0 if (x >= 0) == (y > 0) else -1
    return x // y


def _dtype_range(dtype: str) -> tuple:
    if dtype == "bool":
        return 0, 1
    info = np.iinfo(to_numpy(dtype))
    return int(info.min), int(info.max)


# ----------------------------------------------------------------------------- constants


def _wrap_int(value: int, dtype: str) -> int:
    nb = bits(dtype)
    value &= (1 << nb) - 1
    if dtype.startswith("int") and value >= 1 << (nb - 1):
        value -= 1 << nb
    return value


def _make_const(value, dtype: str) -> Const:
    if dtype == "bool":
        return Const(bool(value), "bool")
    if is_int(dtype):
        return Const(_wrap_int(int(value), dtype), dtype)
    return Const(float(np.asarray(value, to_numpy(dtype))), dtype)  # round to the dtype


def _fold_binary(op: str, a: Const, b: Const, dtype: str) -> Const | None:
    x, y = a.value, b.value
    if op in _CMP:
        res = {
            "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y, "==": x == y, "!=": x != y,
        }[op]  # fmt: skip
        return Const(bool(res), "bool")
    if op == "&&":
        return Const(bool(x) and bool(y), "bool")
    if op == "||":
        return Const(bool(x) or bool(y), "bool")
    if is_float(dtype):
        npd = to_numpy(dtype)
        fx, fy = np.asarray(x, npd), np.asarray(y, npd)
        with np.errstate(all="ignore"):
            if op in ("/", "floordiv", "floormod") and fy == 0:
                return None
            res = {
                "+": lambda: fx + fy,
                "-": lambda: fx - fy,
                "*": lambda: fx * fy,
                "/": lambda: fx / fy,
                "floordiv": lambda: np.floor(fx / fy),
                "floormod": lambda: fx - np.floor(fx / fy) * fy,
                "min": lambda: np.minimum(fx, fy),
                "max": lambda: np.maximum(fx, fy),
            }[op]()
        return Const(float(res), dtype)
    if dtype == "bool":
        return None
    x, y = int(x), int(y)
    if op in ("floordiv", "/", "floormod") and y == 0:
        return None  # undefined: leave it for the backend to trap
    res = {
        "+": lambda: x + y,
        "-": lambda: x - y,
        "*": lambda: x * y,
        "/": lambda: x // y,
        "floordiv": lambda: x // y,
        "floormod": lambda: x % y,
        "min": lambda: min(x, y),
        "max": lambda: max(x, y),
    }[op]()
    return _make_const(res, dtype)


def _fold_cast(dtype: str, c: Const) -> Const:
    v = c.value
    if dtype == "bool":
        return Const(bool(v), "bool")
    if is_int(dtype):
        if isinstance(v, float):
            if not math.isfinite(v):
                return None
            v = math.trunc(v)  # C: toward zero
        return _make_const(int(v), dtype)
    return _make_const(float(v), dtype)


def _const_val(e: Expr):
    return e.value if isinstance(e, Const) else None


def _is_const(e: Expr, value) -> bool:
    return isinstance(e, Const) and e.dtype != "bool" and e.value == value


# ----------------------------------------------------------------------------- simplify


def simplify(expr: Expr, ranges=None) -> Expr:
    """Simplify ``expr`` using the loop ``ranges`` ``{Var: (min, extent)}``.

    Returns an equivalent expression (the same object when nothing changed).
    """
    return _Simplifier(_norm_ranges(ranges)).visit(expr)


class _Simplifier:
    def __init__(self, ranges: dict):
        self.bounds = _Bounds(ranges)
        self.memo: dict[int, Expr] = {}
        self.keep: list[Expr] = []  # keep visited nodes alive so their ids stay unique

    def visit(self, e: Expr) -> Expr:
        key = id(e)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.rules(map_children(e, self.visit))
            self.memo[key] = hit
            self.keep.append(e)
        return hit

    def bound(self, e: Expr) -> tuple:
        self.keep.append(e)
        return self.bounds.of(e)

    # -- local rules on a node whose children are already simplified

    def rules(self, e: Expr) -> Expr:
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Not):
            if isinstance(e.a, Const):
                return Const(not bool(e.a.value), "bool")
            if isinstance(e.a, Not):
                return e.a.a
            return e
        if isinstance(e, Select | IfThenElse):
            if isinstance(e.cond, Const):
                return e.t if e.cond.value else e.f
            if e.t == e.f and isinstance(e, Select):
                return e.t
            lo, hi = self.bound(e.cond)
            if lo == hi:
                return e.t if lo else e.f
            return e
        if isinstance(e, Cast):
            if e.value.dtype == e.dtype:
                return e.value
            if isinstance(e.value, Const):
                folded = _fold_cast(e.dtype, e.value)
                return e if folded is None else folded
            return e
        if isinstance(e, Call) and e.name in ("fabs", "floor", "ceil") and e.args:
            (a,) = e.args
            if isinstance(a, Const):
                f = {"fabs": abs, "floor": math.floor, "ceil": math.ceil}[e.name]
                return _make_const(float(f(a.value)), e.dtype)
        return e

    def binary(self, e: Binary) -> Expr:
        a, b, op, dt = e.a, e.b, e.op, e.dtype
        if isinstance(a, Const) and isinstance(b, Const):
            folded = _fold_binary(op, a, b, dt)
            if folded is not None:
                return folded
        if op in ("&&", "||"):
            return self.logic(e)
        if op in _CMP:
            return self.compare(e)
        if is_int(dt):
            if op in ("+", "-", "*"):
                return self.linear_rebuild(e)
            if op in ("floordiv", "/", "floormod"):
                return self.divmod(e)
            if op in ("min", "max"):
                return self.minmax(e)
            return e
        # floats: only identities that are exact
        if op == "+" and _is_const(b, 0):
            return a
        if op == "+" and _is_const(a, 0):
            return b
        if op == "-" and _is_const(b, 0):
            return a
        if op == "*" and _is_const(b, 1):
            return a
        if op == "*" and _is_const(a, 1):
            return b
        if op == "/" and _is_const(b, 1):
            return a
        if op in ("min", "max") and a == b:
            return a
        return e

    def logic(self, e: Binary) -> Expr:
        a, b = e.a, e.b
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const):
                if e.op == "&&":
                    return y if x.value else Const(False, "bool")
                return Const(True, "bool") if x.value else y
        if a == b:
            return a
        return e

    def compare(self, e: Binary) -> Expr:
        a, b = e.a, e.b
        if not (is_int(a.dtype) and is_int(b.dtype)):
            if a == b and not is_float(a.dtype):
                return Const(e.op in ("<=", ">=", "=="), "bool")
            return e
        diff = self.linear_rebuild(Binary("-", a, b, a.dtype))
        lo, hi = self.bound(diff)
        decided = {
            "<": (hi < 0, lo >= 0),
            "<=": (hi <= 0, lo > 0),
            ">": (lo > 0, hi <= 0),
            ">=": (lo >= 0, hi < 0),
            "==": (lo == hi == 0, lo > 0 or hi < 0),
            "!=": (lo > 0 or hi < 0, lo == hi == 0),
        }[e.op]
        if decided[0]:
            return Const(True, "bool")
        if decided[1]:
            return Const(False, "bool")
        return e

    def minmax(self, e: Binary) -> Expr:
        a, b = e.a, e.b
        if a == b:
            return a
        (alo, ahi), (blo, bhi) = self.bound(a), self.bound(b)
        if e.op == "min":
            if ahi <= blo:
                return a
            if bhi <= alo:
                return b
        else:
            if alo >= bhi:
                return a
            if blo >= ahi:
                return b
        return e

    # -- integer linear forms

    def linear(self, e: Expr) -> tuple[dict, int]:
        """``({atom: coeff}, const)`` with atoms in first-appearance order."""
        if isinstance(e, Const) and is_int(e.dtype):
            return {}, int(e.value)
        if isinstance(e, Binary) and is_int(e.dtype) and e.op in ("+", "-"):
            ta, ca = self.linear(e.a)
            tb, cb = self.linear(e.b)
            sign = 1 if e.op == "+" else -1
            terms = dict(ta)
            for atom, k in tb.items():
                terms[atom] = terms.get(atom, 0) + sign * k
            return terms, ca + sign * cb
        if isinstance(e, Binary) and is_int(e.dtype) and e.op == "*":
            for x, y in ((e.a, e.b), (e.b, e.a)):
                if isinstance(y, Const):
                    tx, cx = self.linear(x)
                    s = int(y.value)
                    return {atom: k * s for atom, k in tx.items()}, cx * s
        return {e: 1}, 0

    def build(self, terms: dict, const: int, dtype: str) -> Expr:
        pos = [(a, k) for a, k in terms.items() if k > 0]
        neg = [(a, -k) for a, k in terms.items() if k < 0]

        def term(atom: Expr, k: int) -> Expr:
            return atom if k == 1 else Binary("*", atom, Const(k, dtype), dtype)

        out: Expr | None = None
        for atom, k in pos:
            t = term(atom, k)
            out = t if out is None else Binary("+", out, t, dtype)
        if out is None:  # no positive term: start from the constant, e.g. (1 - x), (0 - x)
            out = _make_const(const, dtype)
            const = 0
        for atom, k in neg:
            out = Binary("-", out, term(atom, k), dtype)
        if const > 0:
            out = Binary("+", out, Const(const, dtype), dtype)
        elif const < 0:
            out = Binary("-", out, Const(-const, dtype), dtype)
        return out

    def linear_rebuild(self, e: Binary) -> Expr:
        terms, const = self.linear(e)
        terms = {a: k for a, k in terms.items() if k != 0}
        out = self.build(terms, const, e.dtype)
        return e if out == e else out

    def divmod(self, e: Binary) -> Expr:
        a, b, dt = e.a, e.b, e.dtype
        is_mod = e.op == "floormod"
        if isinstance(b, Const) and b.value == 1:
            return _make_const(0, dt) if is_mod else a
        if not (isinstance(b, Const) and b.value > 0):
            return e
        c = int(b.value)
        # floordiv(floordiv(x, c1), c2) -> floordiv(x, c1*c2); floormod(floormod(x, k*c), c).
        if isinstance(a, Binary) and isinstance(a.b, Const) and a.b.value > 0:
            if not is_mod and a.op == "floordiv":
                return self.divmod(Binary("floordiv", a.a, Const(a.b.value * c, dt), dt))
            if is_mod and a.op == "floormod" and a.b.value % c == 0:
                return self.divmod(Binary("floormod", a.a, b, dt))
        terms, const = self.linear(a)
        outer = {t: k // c for t, k in terms.items() if k % c == 0 and k != 0}
        rest = {t: k for t, k in terms.items() if k % c != 0}
        q, r = divmod(const, c)
        rest_e = self.build(rest, r, dt)
        lo, hi = self.bound(rest_e)
        if lo != -INF and hi != INF and lo // c == hi // c:
            k = lo // c  # the rest stays within one period [k*c, (k+1)*c)
            if is_mod:
                return self.build(rest, r - k * c, dt)
            return self.build(outer, q + k, dt)
        if is_mod:
            inner = Binary("floormod", rest_e, b, dt)
            return e if inner == e else inner
        if not outer and q == 0:
            inner = Binary("floordiv", rest_e, b, dt)
            return e if inner == e else inner
        inner = Binary("floordiv", rest_e, b, dt)
        out = self.linear_rebuild(Binary("+", self.build(outer, q, dt), inner, dt))
        return out
