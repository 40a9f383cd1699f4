"""Index analysis for the features: flat indices as linear forms in the loop variables.

Lowered indices are flat element offsets (``C[i*64 + j]``), so TVM's per-dimension analyses
(coefficient of a loop variable times the dimension's shape stride; per-dimension touched
ranges) are replaced by one linear form per access::

    index = const + sum(coef[v] * v) + sum(mult * nonlinear_term)

Non-linear terms (floordiv, floormod, min, max, selects, products of variables, loads) are kept
whole with their outer multiplier. They are bounded by interval arithmetic when a region size
is needed, and a loop variable that only occurs inside them gets the term's multiplier as its
stride (what TVM's ``CoefficientExtractor`` reports for a variable outside any ``Mul``).
"""

from __future__ import annotations

from tensorir.expr import Binary, Cast, Const, Expr, IfThenElse, Select, Var, walk

__all__ = ["LinearForm", "contiguous_elems", "linearize", "region_size"]


class LinearForm:
    """``const + sum(coefs[v] * v) + sum(mult * term)`` for one index expression.

    Attributes
    ----------
    coefs : dict[Var, int]
        Coefficients of the variables that occur linearly (non-zero only).
    const : int
    nonlinear : list of (Expr, int)
        Terms that are not affine, with their multipliers.
    nl_vars : dict[Var, int]
        Variables occurring inside non-linear terms -> multiplier of the first such term.
    """

    __slots__ = ("coefs", "const", "nl_vars", "nonlinear")

    def __init__(self, coefs=None, const=0, nonlinear=None):
        self.coefs: dict = coefs if coefs is not None else {}
        self.const: int = const
        self.nonlinear: list = nonlinear if nonlinear is not None else []
        self.nl_vars: dict = {}

    def stride(self, var: Var) -> int:
        """The absolute step of the index when ``var`` grows by one (0 if it does not occur)."""
        c = self.coefs.get(var)
        if c is not None:
            return abs(c)
        return self.nl_vars.get(var, 0)

    def touches(self, var: Var) -> bool:
        return var in self.coefs or var in self.nl_vars

    def same_shape(self, other: LinearForm) -> bool:
        """Same coefficients and no non-linear part: the two differ by a constant offset."""
        return not self.nonlinear and not other.nonlinear and self.coefs == other.coefs


def linearize(e: Expr) -> LinearForm:
    """The linear form of an integer index expression (see the module doc)."""
    lf = _lin(e, 1, LinearForm())
    lf.coefs = {v: c for v, c in lf.coefs.items() if c != 0}
    for term, mult in lf.nonlinear:
        for node in walk(term):
            if isinstance(node, Var) and node not in lf.nl_vars:
                lf.nl_vars[node] = abs(mult)
    return lf


def _lin(e: Expr, mult: int, out: LinearForm) -> LinearForm:
    """Accumulate ``mult * e`` into ``out``."""
    if isinstance(e, Var):
        out.coefs[e] = out.coefs.get(e, 0) + mult
    elif isinstance(e, Const):
        out.const += mult * int(e.value)
    elif isinstance(e, Binary) and e.op == "+":
        _lin(e.a, mult, out)
        _lin(e.b, mult, out)
    elif isinstance(e, Binary) and e.op == "-":
        _lin(e.a, mult, out)
        _lin(e.b, -mult, out)
    elif isinstance(e, Binary) and e.op == "*" and isinstance(e.b, Const):
        _lin(e.a, mult * int(e.b.value), out)
    elif isinstance(e, Binary) and e.op == "*" and isinstance(e.a, Const):
        _lin(e.b, mult * int(e.a.value), out)
    elif isinstance(e, Cast) and not e.dtype.startswith("float"):
        _lin(e.value, mult, out)
    else:
        out.nonlinear.append((e, mult))
    return out


def _interval(e: Expr, ranges: dict) -> tuple[float, float] | None:
    """Bounds of ``e`` with each Var in ``ranges`` (others fixed to 0); None if unknown."""
    if isinstance(e, Var):
        hi = ranges.get(e, 0)
        return (0, hi)
    if isinstance(e, Const):
        return (e.value, e.value)
    if isinstance(e, Cast):
        return _interval(e.value, ranges)
    if isinstance(e, Select | IfThenElse):
        t, f = _interval(e.t, ranges), _interval(e.f, ranges)
        if t is None or f is None:
            return None
        return (min(t[0], f[0]), max(t[1], f[1]))
    if not isinstance(e, Binary):
        return None  # loads (indirect indexing), calls
    a, b = _interval(e.a, ranges), _interval(e.b, ranges)
    if a is None or b is None:
        return None
    op = e.op
    if op == "+":
        return (a[0] + b[0], a[1] + b[1])
    if op == "-":
        return (a[0] - b[1], a[1] - b[0])
    if op == "*":
        ps = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
        return (min(ps), max(ps))
    if op == "min":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if op == "max":
        return (max(a[0], b[0]), max(a[1], b[1]))
    if op in ("floordiv", "/") and b[0] == b[1] and b[0] > 0:
        return (a[0] // b[0], a[1] // b[0])
    if op == "floormod" and b[0] == b[1] and b[0] > 0:
        if a[1] - a[0] + 1 >= b[0] or a[0] // b[0] != a[1] // b[0]:
            return (0, b[0] - 1)
        return (a[0] % b[0], a[1] % b[0])
    return None


def region_size(lf: LinearForm, free: dict, limit: int) -> tuple[int, int, int, dict]:
    """Elements touched by one access while the loops in ``free`` run.

    Parameters
    ----------
    lf : LinearForm
    free : dict[Var, int]
        ``var -> extent - 1`` of the loops that run (inner ones); other variables sit at 0,
        as TVM fixes outer loop variables to their minimum.
    limit : int
        The buffer's size in elements (no region is larger).

    Returns
    -------
    size, lo, hi : int
        Distinct elements (variables with equal coefficients are merged, as their ranges
        overlap: ``yy*W + ry*W`` spans ``ext_yy + ext_ry - 1`` rows), and the index hull.
    groups : dict[int, int]
        ``|coefficient| -> summed span`` of the running variables.
    """
    groups: dict = {}
    lo = hi = lf.const
    for v, c in lf.coefs.items():
        span = free.get(v)
        if not span:
            continue
        ac = abs(c)
        groups[ac] = groups.get(ac, 0) + span
        if c > 0:
            hi += c * span
        else:
            lo += c * span
    for term, mult in lf.nonlinear:
        iv = _interval(term, free)
        if iv is None:
            return limit, 0, limit - 1, {}
        span = int(iv[1] - iv[0])
        t_lo, t_hi = sorted((mult * iv[0], mult * iv[1]))
        lo += t_lo
        hi += t_hi
        if span:
            ac = abs(mult)
            groups[ac] = groups.get(ac, 0) + span
    size = 1
    for span in groups.values():
        size *= span + 1
    return min(size, hi - lo + 1, limit), int(lo), int(hi), groups


def contiguous_elems(groups: dict) -> int:
    """Length of the contiguous run of elements a region with these ``groups`` starts with.

    Stride 1 gives a run of ``span + 1``; a group whose stride equals the run so far extends it
    (``i*8 + j`` with ``j < 8`` is one run of ``8 * ext_i``).
    """
    run = 1
    for c in sorted(groups):
        if c != run:
            break
        run *= groups[c] + 1
    return run
