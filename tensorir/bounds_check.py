"""Definition-time checks of a compute body: unbound variables and provably out-of-range reads.

:func:`unbound_variable` finds a variable that is neither an axis of the compute nor a reduce
axis of its reducer. :func:`out_of_range_read` finds a tensor read whose index provably leaves
the tensor at some point that is actually evaluated. Both return a one-line description of the
first problem, or None; ``tensorir.tensor.compute`` turns it into a TensorError.

The range check must never reject a valid computation, so it only speaks when it can prove:

- an index is checked only when its exact range over the iteration domain is known: a linear
  form ``c0 + sum(a_k * v_k)`` of axis variables (whose min and max over a box of variable
  ranges are attained), optionally under a floor division by a positive constant;
- a read inside a guard (``if_then_else`` / ``select`` branches, a reducer's ``where``, the right
  operand of ``&&`` / ``||``) is checked with the variable ranges narrowed by the guard when the
  guard is a conjunction of bounds on single variables (``v >= c``, ``v + 2 < c``...); under any
  other guard the read is skipped (it may be masked off), and under a guard that can never hold
  nothing is checked.
"""

from __future__ import annotations

from collections.abc import Mapping

from .dtype import is_int
from .expr import Binary, Cast, Const, Expr, IfThenElse, Not, Reduce, Select, TensorRead, Var
from .expr import children as expr_children

__all__ = ["exact_range", "index_extents", "out_of_range_read", "unbound_variable"]

Ranges = Mapping[Var, tuple[int, int]]  # inclusive [lo, hi] of each variable
_DEAD = "dead"  # a guard that never holds: its branch is never evaluated
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


# ----------------------------------------------------------------------------- variables


def unbound_variable(
    body: Expr, axes: tuple, owner_of: Mapping[Var, str]
) -> tuple[Var, str] | None:
    """The first variable of ``body`` that is not bound, with what it is instead.

    Parameters
    ----------
    body : Expr
        The compute body (a top-level Reduce binds its reduce axes).
    axes : tuple of IterVar
        The compute's own axes.
    owner_of : mapping of Var to str
        What made each known variable: ``"reduce"`` for ``te.reduce_axis``, else the name of
        the compute whose axis it is. Variables absent from it were made with ``te.var``.

    Returns
    -------
    (Var, str) or None
        The variable and its owner ("" for a free ``te.var``), or None when all are bound.
    """
    bound = {ax.var for ax in axes}
    if isinstance(body, Reduce):
        bound |= {ax.var for ax in body.axes}
    from .expr import walk

    for node in walk(body):
        if isinstance(node, Var) and node not in bound:
            return node, owner_of.get(node, "")
    return None


# ----------------------------------------------------------------------------- index ranges


def _linear(e: Expr) -> tuple[int, dict[Var, int]] | None:
    """``(c0, {var: coeff})`` when ``e`` is a linear form of variables, else None."""
    if isinstance(e, Const):
        return (int(e.value), {}) if is_int(e.dtype) else None
    if isinstance(e, Var):
        return 0, {e: 1}
    if isinstance(e, Cast) and is_int(e.dtype) and is_int(e.value.dtype):
        return _linear(e.value)
    if isinstance(e, Binary) and e.op in ("+", "-", "*") and is_int(e.dtype):
        a, b = _linear(e.a), _linear(e.b)
        if a is None or b is None:
            return None
        if e.op == "*":
            if a[1] and b[1]:
                return None  # a product of variables: not linear
            (c, lin), s = (a, b[0]) if not b[1] else (b, a[0])
            return c * s, {v: k * s for v, k in lin.items()}
        sign = 1 if e.op == "+" else -1
        lin = dict(a[1])
        for v, k in b[1].items():
            lin[v] = lin.get(v, 0) + sign * k
        return a[0] + sign * b[0], {v: k for v, k in lin.items() if k != 0}
    return None


def exact_range(e: Expr, ranges: Ranges) -> tuple[int, int] | None:
    """The exact ``[min, max]`` of the integer expression ``e`` over the box ``ranges``.

    None when it cannot be computed exactly (non-linear, a variable without a range).
    """
    if isinstance(e, Binary) and e.op == "floordiv" and isinstance(e.b, Const):
        inner = exact_range(e.a, ranges)
        d = int(e.b.value)
        if inner is None or d <= 0:
            return None
        return inner[0] // d, inner[1] // d  # floor is monotone: both ends are attained
    form = _linear(e)
    if form is None:
        return None
    lo = hi = form[0]
    for v, k in form[1].items():
        if v not in ranges:
            return None
        vlo, vhi = ranges[v]
        lo += min(k * vlo, k * vhi)
        hi += max(k * vlo, k * vhi)
    return lo, hi


# ----------------------------------------------------------------------------- guards


def _bounds(cond: Expr) -> list[tuple[Var | None, str, int]] | None:
    """``cond`` as a conjunction of ``(var, op, bound)`` (var None: a constant comparison)."""
    if isinstance(cond, Binary) and cond.op == "&&":
        a, b = _bounds(cond.a), _bounds(cond.b)
        return None if a is None or b is None else a + b
    if isinstance(cond, Not):
        return _bounds(_negate(cond.a)) if _negate(cond.a) is not None else None
    if isinstance(cond, Const) and cond.dtype == "bool":
        return [(None, "==" if cond.value else "!=", 0)]
    if not (isinstance(cond, Binary) and cond.op in _FLIP):
        return None
    a, b = _linear(cond.a), _linear(cond.b)
    if a is None or b is None:
        return None
    lin = dict(a[1])
    for v, k in b[1].items():
        lin[v] = lin.get(v, 0) - k
    lin = {v: k for v, k in lin.items() if k != 0}
    c = a[0] - b[0]  # cond is: sum(lin) + c  OP  0
    if not lin:
        holds = {"<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0, "==": c == 0, "!=": c != 0}
        return [(None, "==" if holds[cond.op] else "!=", 0)]
    if len(lin) != 1:
        return None
    ((v, k),) = lin.items()
    if k not in (1, -1):
        return None
    op = cond.op if k == 1 else _FLIP[cond.op]
    return [(v, op, -c * k)]  # v OP bound


def _negate(cond: Expr) -> Expr | None:
    """``not cond`` as a comparison or conjunction, when that is simple."""
    if isinstance(cond, Not):
        return cond.a
    if isinstance(cond, Binary) and cond.op in _NEGATE:
        return Binary(_NEGATE[cond.op], cond.a, cond.b, cond.dtype)
    if isinstance(cond, Binary) and cond.op == "||":
        a, b = _negate(cond.a), _negate(cond.b)
        return None if a is None or b is None else Binary("&&", a, b, "bool")
    if isinstance(cond, Const) and cond.dtype == "bool":
        return Const(not cond.value, "bool")
    return None


def _narrow(ranges: Ranges | None, cond: Expr | None):
    """``ranges`` narrowed by ``cond``: a new mapping, None (unknown) or _DEAD."""
    if ranges is None or ranges is _DEAD:
        return ranges
    if cond is None:
        return None
    terms = _bounds(cond)
    if terms is None:
        return None
    out = dict(ranges)
    for v, op, bound in terms:
        if v is None:
            if op == "!=":  # a constant comparison that is false
                return _DEAD
            continue
        if v not in out:
            return None
        lo, hi = out[v]
        if op in ("<", "<="):
            hi = min(hi, bound - 1 if op == "<" else bound)
        elif op in (">", ">="):
            lo = max(lo, bound + 1 if op == ">" else bound)
        elif op == "==":
            lo, hi = max(lo, bound), min(hi, bound)
        else:
            return None  # v != c does not narrow a box
        if lo > hi:
            return _DEAD
        out[v] = (lo, hi)
    return out


# ----------------------------------------------------------------------------- reads


def out_of_range_read(body: Expr, ranges: Ranges) -> str | None:
    """A description of the first read of ``body`` provably out of range, or None.

    Parameters
    ----------
    body : Expr
        A compute body.
    ranges : mapping of Var to (int, int)
        The inclusive range of every axis variable (spatial and reduce).
    """
    stack: list = [(body, dict(ranges))]
    while stack:
        e, rg = stack.pop()
        if rg is None or rg is _DEAD:
            continue  # masked by a guard we cannot read, or never evaluated
        if isinstance(e, Select | IfThenElse):
            stack += [(e.cond, rg), (e.t, _narrow(rg, e.cond)), (e.f, _narrow(rg, _negate(e.cond)))]
        elif isinstance(e, Binary) and e.op in ("&&", "||"):
            guard = e.a if e.op == "&&" else _negate(e.a)
            stack += [(e.a, rg), (e.b, _narrow(rg, guard))]
        elif isinstance(e, Reduce):
            if e.condition is not None:
                stack.append((e.condition, rg))
            stack.append((e.source, rg if e.condition is None else _narrow(rg, e.condition)))
        else:
            if isinstance(e, TensorRead):
                problem = _check_read(e, rg)
                if problem:
                    return problem
            stack += [(c, rg) for c in expr_children(e)]
    return None


def _check_read(e: TensorRead, ranges: Ranges) -> str | None:
    shape = e.tensor.shape
    for k, ix in enumerate(e.indices):
        r = exact_range(ix, ranges)
        if r is None or (r[0] >= 0 and r[1] < shape[k]):
            continue
        return read_error(e.tensor.name, shape, k, str(ix), f"takes values [{r[0]}, {r[1]}]")
    return None


def read_error(tensor: str, shape, dim: int, index: str, values: str) -> str:
    """The one-line message of an out-of-range read (shared with the interpreter)."""
    return (
        f"read of tensor {tensor!r} out of range: index {index} of dimension {dim} {values} but "
        f"the dimension has extent {shape[dim]} (valid 0..{shape[dim] - 1}, shape "
        f"{list(shape)}); guard padded reads with te.if_then_else(cond, A[...], 0) or pad the "
        "tensor first (topi pad)"
    )


def index_extents(ops) -> dict[str, int]:
    """Tensors read as data-dependent indices (``B`` in ``A[B[i], j]``), by name: the smallest
    extent of the axes they index, so values in ``[0, extent)`` are in range for every read
    (what a measurement's random inputs must respect; lowering checks them at run time)."""
    out: dict[str, int] = {}
    from .expr import walk

    for op in ops:
        for node in walk(op.body):
            if not isinstance(node, TensorRead):
                continue
            for axis, index in enumerate(node.indices):
                for inner in walk(index):
                    if isinstance(inner, TensorRead):
                        extent = int(node.tensor.shape[axis])
                        name = inner.tensor.name
                        out[name] = min(out.get(name, extent), extent)
    return out
