"""Integer index arithmetic: constant bounds, linear forms and the expression simplifier.

The one arithmetic module of tensorir: bound inference (``bounds.py``), lowering's loop pass
(``passes/simplify_loops.py``) and the layout rewrite all use it. Lowering builds index
expressions mechanically (split strides, fuse div/mod, region offsets); backends compile them
inside the hot loop, so they are canonicalized here: linear integer sums are collected
(``i_0*8 + i_1``), ``floordiv``/``floormod`` by constants are reduced with the loop ranges,
comparisons that the ranges decide (tail guards that can never fail) fold to constants.
Ranges are inclusive integer intervals ``{Var: (lo, hi)}``. Integer arithmetic is assumed
not to overflow, as in TVM.
"""

from __future__ import annotations

import math

from .dtype import is_float, is_int
from .expr import (
    Binary,
    Cast,
    Const,
    Expr,
    IfThenElse,
    Not,
    Select,
    Var,
)
from .transform import map_children

__all__ = [
    "build_linear",
    "const_bound",
    "linear_diff",
    "linear_form",
    "simplify_expr",
]

INF = math.inf
Ranges = dict  # Var -> (lo, hi), inclusive


# ----------------------------------------------------------------------------- const bounds


def _mul_iv(a, b):
    prods = []
    for x in a:
        for y in b:
            if x == 0 or y == 0:
                prods.append(0)
            else:
                prods.append(x * y)
    return min(prods), max(prods)


def _fdiv(x, c):
    if x in (INF, -INF):
        return x if c > 0 else -x
    return x // c


def const_bound(e: Expr, ranges: Ranges | None = None) -> tuple:
    """Inclusive bounds ``(lo, hi)`` of an integer expression (``-inf``/``inf`` if unknown).

    Vars missing from ``ranges`` are unbounded.
    """
    ranges = ranges or {}
    return _bound(e, ranges)


def _bound(e: Expr, r: Ranges) -> tuple:
    if isinstance(e, Const):
        if isinstance(e.value, bool):
            return int(e.value), int(e.value)
        if isinstance(e.value, int):
            return e.value, e.value
        return -INF, INF
    if isinstance(e, Var):
        return r.get(e, (-INF, INF))
    if isinstance(e, Binary):
        op = e.op
        if op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||"):
            return 0, 1
        if is_float(e.dtype):
            return -INF, INF
        a = _bound(e.a, r)
        b = _bound(e.b, r)
        if op == "+":
            return a[0] + b[0], a[1] + b[1]
        if op == "-":
            return a[0] - b[1], a[1] - b[0]
        if op == "*":
            return _mul_iv(a, b)
        if op == "min":
            return min(a[0], b[0]), min(a[1], b[1])
        if op == "max":
            return max(a[0], b[0]), max(a[1], b[1])
        if op == "floordiv":
            if b[0] == b[1] and b[0] not in (0, INF, -INF):
                c = b[0]
                lo, hi = _fdiv(a[0], c), _fdiv(a[1], c)
                return (lo, hi) if c > 0 else (hi, lo)
            if b[0] > 0 and a[0] >= 0:
                return 0, (a[1] if b[0] >= 1 else INF)
            return -INF, INF
        if op == "floormod":
            if b[0] == b[1] and b[0] not in (0, INF, -INF) and b[0] > 0:
                c = b[0]
                if a[0] > -INF and a[1] < INF and a[0] // c == a[1] // c:
                    k = a[0] // c
                    return a[0] - k * c, a[1] - k * c
                return 0, c - 1
            if b[0] > 0:
                return 0, b[1] - 1
            return -INF, INF
        return -INF, INF
    if isinstance(e, Not):
        return 0, 1
    if isinstance(e, Select | IfThenElse):
        t = _bound(e.t, r)
        f = _bound(e.f, r)
        return min(t[0], f[0]), max(t[1], f[1])
    if isinstance(e, Cast):
        if is_int(e.dtype) and (is_int(e.value.dtype) or e.value.dtype == "bool"):
            return _bound(e.value, r)
        return -INF, INF
    return -INF, INF


# ----------------------------------------------------------------------------- linear forms


def linear_form(e: Expr):
    """``(terms, const)`` with ``e == sum(coef * atom) + const`` for an integer expression.

    ``terms`` maps each non-linear atom (compared structurally; Vars by identity) to its
    coefficient, in first-seen order. Returns None for non-integer expressions.
    """
    if not is_int(e.dtype):
        return None
    terms: dict = {}
    const = _collect(e, 1, terms)
    const += _merge_divmod(terms)[0]
    return {a: c for a, c in terms.items() if c != 0}, const


def _merge_divmod(terms: dict) -> tuple[int, bool]:
    """Rewrite ``k*c*floordiv(x, c) + k*floormod(x, c)`` into ``k*x`` inside ``terms``, and
    ``k*c*floormod(floordiv(x, c), d) + k*floormod(x, c)`` into ``k*floormod(x, c*d)`` (for
    positive ``c``, ``d``: ``x mod cd = (x div c mod d)*c + x mod c``).

    The second rule is what makes a row-major flattening of three or more fused axes fold
    back: fusing ``n, oh, ow`` gives ``n = f div (OH*OW)``, ``oh = f div OW mod OH``,
    ``ow = f mod OW``, and ``(n*OH + oh)*OW + ow`` becomes ``f`` (an implicit-GEMM conv's
    reader at batch > 1, whose GEMM region bound inference could otherwise not narrow to
    the rows of a tile that crosses an image boundary).

    Returns the constant the merges add and whether any merge happened."""
    const = 0
    merged = False
    changed = True
    while changed:
        changed = False
        for atom, k in list(terms.items()):
            if k == 0 or not (isinstance(atom, Binary) and atom.op == "floormod"):
                continue
            c = _int_const(atom.b)
            if c is None:
                continue
            div = Binary("floordiv", atom.a, atom.b, atom.dtype)
            if terms.get(div, 0) == k * c:
                terms[atom] = 0
                terms[div] = 0
                const += _collect(atom.a, k, terms)
                changed = True
                break
            nested = _nested_mod(atom, k, c, terms)
            if nested is not None:
                terms[atom] = 0
                terms[nested[0]] = 0
                terms[nested[1]] = terms.get(nested[1], 0) + k
                changed = True
                break
        merged = merged or changed
    return const, merged


def _nested_mod(atom: Binary, k: int, c: int, terms: dict):
    """``(outer, merged)`` when ``terms`` holds ``outer = floormod(floordiv(x, c), d)`` with
    coefficient ``k*c`` beside ``atom = floormod(x, c)`` of coefficient ``k`` (``c``, ``d``
    positive): their sum is ``k*merged``, ``merged = floormod(x, c*d)``. Else None."""
    if c <= 0:
        return None
    for outer, ko in terms.items():
        if ko != k * c or not (isinstance(outer, Binary) and outer.op == "floormod"):
            continue
        d, inner = _int_const(outer.b), outer.a
        if d is None or d <= 0 or not (isinstance(inner, Binary) and inner.op == "floordiv"):
            continue
        if _int_const(inner.b) == c and inner.a == atom.a:
            return outer, Binary("floormod", atom.a, Const(c * d, atom.dtype), atom.dtype)
    return None


def _collect(e: Expr, scale: int, terms: dict) -> int:
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return scale * e.value
    if isinstance(e, Binary) and e.op in ("+", "-") and is_int(e.dtype):
        c = _collect(e.a, scale, terms)
        return c + _collect(e.b, scale if e.op == "+" else -scale, terms)
    if isinstance(e, Binary) and e.op == "*" and is_int(e.dtype):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, Const) and not isinstance(y.value, bool):
                return _collect(x, scale * int(y.value), terms)
    if isinstance(e, Cast) and is_int(e.dtype) and is_int(e.value.dtype):
        return _collect(e.value, scale, terms)
    terms[e] = terms.get(e, 0) + scale
    return 0


def build_linear(terms: dict, const: int, dtype: str = "int32") -> Expr:
    """The expression ``sum(coef * atom) + const`` (positive terms first where possible)."""
    out: Expr | None = None
    # ``_collect`` looks through integer casts, so an atom may be narrower than the sum (a
    # uint8 load in an int16 sum): cast it back, or the sum would be computed in its dtype.
    items = [(a if a.dtype == dtype else Cast(dtype, a), c) for a, c in terms.items() if c != 0]
    # Start with a positive term so the result reads a + b - c rather than 0 - c + a.
    items.sort(key=lambda ac: ac[1] < 0)
    for atom, c in items:
        if out is None:
            out = atom if c == 1 else Binary("*", atom, Const(c, dtype), dtype)
        elif c > 0:
            t = atom if c == 1 else Binary("*", atom, Const(c, dtype), dtype)
            out = Binary("+", out, t, dtype)
        else:
            t = atom if c == -1 else Binary("*", atom, Const(-c, dtype), dtype)
            out = Binary("-", out, t, dtype)
    if out is None:
        return Const(const, dtype)
    if const > 0:
        out = Binary("+", out, Const(const, dtype), dtype)
    elif const < 0:
        out = Binary("-", out, Const(-const, dtype), dtype)
    return out


def linear_diff(a: Expr, b: Expr):
    """``a - b`` as an int if it is a constant (same atoms on both sides), else None."""
    la, lb = linear_form(a), linear_form(b)
    if la is None or lb is None:
        return None
    terms = dict(la[0])
    for atom, c in lb[0].items():
        terms[atom] = terms.get(atom, 0) - c
    if any(c != 0 for c in terms.values()):
        return None
    return la[1] - lb[1]


# ----------------------------------------------------------------------------- simplifier


def simplify_expr(e: Expr, ranges: Ranges | None = None, memo: dict | None = None) -> Expr:
    """Simplify ``e`` bottom-up using the integer ``ranges`` of its variables.

    ``memo`` (optional, private to one ``ranges``) maps ``id(node)`` to ``(node, result)``:
    a sub-expression object met again (lowering shares one index expression between a store
    and its loads, and substitution shares loop values) is simplified once. The result is
    the same tree as without it; pass the same dict to several calls under the same ranges.
    """
    ranges = ranges or {}
    memo = {} if memo is None else memo

    def visit(node: Expr) -> Expr:
        cls = type(node)
        if cls is Const:  # leaves first: about half of all nodes
            return node
        if cls is Var:
            return _local(node, ranges)
        key = id(node)
        hit = memo.get(key)
        if hit is not None:
            return hit[1]
        if cls is Binary and node.op in _SUM_OPS and _int_sum(node):
            out = _sum(node, visit)
        else:
            out = _local(map_children(node, visit), ranges)
        memo[key] = (node, out)  # keeps ``node`` alive, so its id is not reused
        return out

    return visit(e)


_SUM_OPS = frozenset(("+", "-"))


def _int_sum(e: Binary) -> bool:
    """Whether ``_binary`` would rebuild ``e`` from its linear form (an integer ``+``/``-``,
    ``*`` of integers)."""
    return is_int(e.dtype) and is_int(e.a.dtype) and is_int(e.b.dtype)


def _sum(root: Binary, visit) -> Expr:
    """The simplified integer sum ``root``: its linear form collected in one walk, its div/mod
    atoms merged as they stand, then each atom simplified (``visit``) and collected again.

    One walk: simplifying bottom-up (each inner ``+``, ``-`` and ``* c`` rebuilt from its own
    linear form, then collected again by its parent) made a sum of n terms cost n linear
    forms; index expressions are such sums, and this was a third of lowering.

    Merged first: simplifying the atoms first can hide a merge. In ``(n*OH + oh)*OW + ow``
    with ``n = f div (OH*OW)``, ``oh = f div OW mod OH``, ``ow = f mod OW`` (fused loops) and
    ``f`` a tile's ``B*112 + t``, the range rules rewrite ``f div OW`` to ``B*16 + t div OW``
    (112 a multiple of OW = 7) and ``f mod OW`` to ``t mod OW``, so the atoms no longer share
    ``f``; merged first, the sum is ``f``.
    """
    raw: dict = {}
    const = _collect(root, 1, raw)
    const += _merge_divmod(raw)[0]
    terms: dict = {}
    for atom, k in raw.items():
        if k:
            const += _collect(visit(atom), k, terms)
    const += _merge_divmod(terms)[0]
    return build_linear({a: c for a, c in terms.items() if c != 0}, const, root.dtype)


def _int_const(e: Expr):
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def _bool(v: bool) -> Const:
    return Const(bool(v), "bool")


def _local(e: Expr, r: Ranges) -> Expr:
    if isinstance(e, Var):
        b = r.get(e)
        if b is not None and b[0] == b[1] and is_int(e.dtype):
            return Const(int(b[0]), e.dtype)  # a loop of extent 1
        return e
    if isinstance(e, Binary):
        return _binary(e, r)
    if isinstance(e, Not):
        if isinstance(e.a, Const):
            return _bool(not e.a.value)
        return e
    if isinstance(e, Select | IfThenElse):
        if isinstance(e.cond, Const):
            return e.t if e.cond.value else e.f
        return e
    if isinstance(e, Cast):
        v = e.value
        if isinstance(v, Const):
            if is_float(e.dtype):
                return Const(float(v.value), e.dtype)
            if e.dtype == "bool":
                return Const(bool(v.value), e.dtype)
            if isinstance(v.value, bool | int):
                return Const(int(v.value), e.dtype)
        return e
    return e


_ATOM_OPS = frozenset(("floordiv", "floormod", "min", "max"))


def _is_scaled_atom(a: Expr, b: Expr, dt: str) -> bool:
    """Whether ``a * b`` is an atom of linear_form (what it does not look into: a Var, a div /
    mod / min / max) of dtype ``dt`` times a literal int. A mod by a literal 0 is left to the
    general path (linear_form's div/mod merge would treat it specially)."""
    if not (type(b) is Const and type(b.value) is int and a.dtype == dt):
        return False
    if type(a) is Var:
        return True
    return (type(a) is Binary and a.op in _ATOM_OPS
            and not (a.op == "floormod" and _int_const(a.b) == 0))  # fmt: skip


def _binary(e: Binary, r: Ranges) -> Expr:
    op, a, b, dt = e.op, e.a, e.b, e.dtype
    if op in ("&&", "||"):
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const):
                if op == "&&":
                    return y if x.value else _bool(False)
                return _bool(True) if x.value else y
        return e
    if not (is_int(a.dtype) and is_int(b.dtype)):
        return e
    if op in ("<", "<=", ">", ">=", "==", "!="):
        return _compare(e, r)
    if not is_int(dt):
        return e
    if op == "*" and _is_scaled_atom(a, b, dt):
        # ``atom * c`` (every term of a flattened index): linear_form gives ``{atom: c}`` and
        # build_linear rebuilds it as ``atom * c`` (``atom`` for 1, ``0`` for 0).
        c = b.value
        if c == 0:
            return Const(0, dt)
        if c == 1:
            return a
        return e if b.dtype == dt else Binary("*", a, Const(c, dt), dt)
    if op in ("+", "-", "*"):
        lf = linear_form(e)
        return build_linear(lf[0], lf[1], dt)
    ca, cb = _int_const(a), _int_const(b)
    if op in ("min", "max"):
        if ca is not None and cb is not None:
            return Const(min(ca, cb) if op == "min" else max(ca, cb), dt)
        d = linear_diff(a, b)
        if d is not None:
            return (a if d <= 0 else b) if op == "min" else (a if d >= 0 else b)
        ba, bb = _bound(a, r), _bound(b, r)
        if ba[1] <= bb[0]:
            return a if op == "min" else b
        if bb[1] <= ba[0]:
            return b if op == "min" else a
        return e
    if op in ("floordiv", "floormod") and cb is not None and cb > 0:
        return _divmod(op, a, cb, dt, r)
    return e


def _divmod(op: str, a: Expr, c: int, dt: str, r: Ranges) -> Expr:
    if c == 1:
        return a if op == "floordiv" else Const(0, dt)
    lf = linear_form(a)
    terms, const = lf
    q_terms = {t: k // c for t, k in terms.items() if k % c == 0}
    r_terms = {t: k for t, k in terms.items() if k % c != 0}
    qc, rc = divmod(const, c)
    rest = build_linear(r_terms, rc, dt)
    lo, hi = _bound(rest, r)
    if op == "floormod":
        if lo >= 0 and hi < c:
            return rest
        if not r_terms:
            return Const(rc, dt)
        if q_terms or qc:
            return Binary("floormod", rest, Const(c, dt), dt)
        return Binary("floormod", a, Const(c, dt), dt)
    # floordiv
    if lo >= 0 and hi < c:
        return build_linear(q_terms, qc, dt)
    # floordiv(floordiv(x, c1), c2) == floordiv(x, c1*c2) for positive divisors
    if not q_terms and qc == 0 and not rc and len(r_terms) == 1:
        ((atom, k),) = r_terms.items()
        if k == 1 and isinstance(atom, Binary) and atom.op == "floordiv":
            c1 = _int_const(atom.b)
            if c1 is not None and c1 > 0:
                return _divmod("floordiv", atom.a, c1 * c, dt, r)
    if q_terms or qc:
        inner = Binary("floordiv", rest, Const(c, dt), dt)
        terms2 = dict(q_terms)
        terms2[inner] = terms2.get(inner, 0) + 1
        return build_linear(terms2, qc, dt)
    return Binary("floordiv", a, Const(c, dt), dt)


def _compare(e: Binary, r: Ranges) -> Expr:
    op = e.op
    a, b = e.a, e.b
    if type(a) is Var and type(b) is Const and type(b.value) is int:
        # ``v op k`` (winograd's matrices are chains of them): the general path below
        # builds ``v - k`` (``v + -k``, or ``v``) and bounds it; the same bounds, directly
        # (``_binary`` checked that ``v`` is an integer).
        lo, hi = r.get(a, (-INF, INF))
        k = b.value
        lo, hi = lo - k, hi - k
    else:
        d = linear_form(Binary("-", a, b, "int32"))
        diff = build_linear(d[0], d[1])
        ca = _int_const(diff)
        lo, hi = (ca, ca) if ca is not None else _bound(diff, r)
    decided = None
    if op == "<":
        decided = True if hi < 0 else (False if lo >= 0 else None)
    elif op == "<=":
        decided = True if hi <= 0 else (False if lo > 0 else None)
    elif op == ">":
        decided = True if lo > 0 else (False if hi <= 0 else None)
    elif op == ">=":
        decided = True if lo >= 0 else (False if hi < 0 else None)
    elif op == "==":
        decided = True if lo == hi == 0 else (False if lo > 0 or hi < 0 else None)
    elif op == "!=":
        decided = False if lo == hi == 0 else (True if lo > 0 or hi < 0 else None)
    if decided is not None:
        return _bool(decided)
    return e
