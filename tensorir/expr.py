"""Scalar expressions: the nodes every stage body and every index is built from.

Nodes are frozen dataclasses compared structurally, except :class:`Var` and :class:`IterVar`,
which are compared by identity (two loops both named ``i`` are different loops). Python
operators build nodes (``a + b``, ``a < b``); ``==`` stays structural equality, so use
:func:`equal` / :func:`not_equal` to build comparisons for equality.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .dtype import check_dtype, is_float, is_int, promote

ARITH_OPS = ("+", "-", "*", "/", "floordiv", "floormod", "min", "max")
CMP_OPS = ("<", "<=", ">", ">=", "==", "!=")
LOGIC_OPS = ("&&", "||")
# Integer-only bit operators (TVM's right_shift, left_shift, bitwise_and/or/xor). ``>>`` is
# arithmetic on signed types and logical on unsigned ones, as in C, numpy and LLVM's ashr/lshr.
BITWISE_OPS = (">>", "<<", "&", "|", "^")
MATH_FUNCS = (
    "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "pow", "fabs", "floor", "ceil",
    "round", "sin", "cos",
)  # fmt: skip


class Expr:
    """Base class of scalar expressions; supplies operator overloading."""

    dtype: str

    def __add__(self, other):
        return _binary("+", self, other)

    def __radd__(self, other):
        return _binary("+", other, self)

    def __sub__(self, other):
        return _binary("-", self, other)

    def __rsub__(self, other):
        return _binary("-", other, self)

    def __mul__(self, other):
        return _binary("*", self, other)

    def __rmul__(self, other):
        return _binary("*", other, self)

    def __truediv__(self, other):
        return _binary("/", self, other)

    def __rtruediv__(self, other):
        return _binary("/", other, self)

    def __floordiv__(self, other):
        return _binary("floordiv", self, other)

    def __rfloordiv__(self, other):
        return _binary("floordiv", other, self)

    def __mod__(self, other):
        return _binary("floormod", self, other)

    def __rmod__(self, other):
        return _binary("floormod", other, self)

    def __neg__(self):
        return _binary("-", Const(0, self.dtype), self)

    def __lt__(self, other):
        return _binary("<", self, other)

    def __le__(self, other):
        return _binary("<=", self, other)

    def __gt__(self, other):
        return _binary(">", self, other)

    def __ge__(self, other):
        return _binary(">=", self, other)

    # & | ~ are logical on conditions (bool) and bitwise on integers, as in TVM.
    def __and__(self, other):
        return _logic_or_bitwise("&&", "&", self, other)

    def __rand__(self, other):
        return _logic_or_bitwise("&&", "&", other, self)

    def __or__(self, other):
        return _logic_or_bitwise("||", "|", self, other)

    def __ror__(self, other):
        return _logic_or_bitwise("||", "|", other, self)

    def __xor__(self, other):
        return _binary("^", self, other)

    def __rxor__(self, other):
        return _binary("^", other, self)

    def __lshift__(self, other):
        return _binary("<<", self, other)

    def __rlshift__(self, other):
        return _binary("<<", other, self)

    def __rshift__(self, other):
        return _binary(">>", self, other)

    def __rrshift__(self, other):
        return _binary(">>", other, self)

    def __invert__(self):
        return Not(self) if self.dtype == "bool" else bitwise_not(self)

    def __bool__(self):
        raise TypeError(
            f"cannot use the symbolic expression {self} as a Python bool; "
            "combine conditions with te.all(...)/te.any(...) or & and |"
        )

    def astype(self, dtype: str) -> Expr:
        return cast(dtype, self)

    def __str__(self) -> str:
        from .printer import expr_str

        return expr_str(self)


@dataclass(frozen=True, eq=False, repr=False)
class Var(Expr):
    """A scalar variable (loop index or axis). Compared by identity."""

    name: str
    dtype: str = "int32"

    def __repr__(self) -> str:
        return f"Var({self.name})"


@dataclass(frozen=True, repr=False)
class Const(Expr):
    value: int | float | bool
    dtype: str

    def __repr__(self) -> str:
        return f"Const({self.value!r}, {self.dtype})"


@dataclass(frozen=True, repr=False)
class Binary(Expr):
    """Arithmetic, comparison, logic or bits: ``op`` is in ARITH_OPS, CMP_OPS, LOGIC_OPS or
    BITWISE_OPS."""

    op: str
    a: Expr
    b: Expr
    dtype: str


@dataclass(frozen=True, repr=False)
class Not(Expr):
    a: Expr
    dtype: str = "bool"


@dataclass(frozen=True, repr=False)
class Select(Expr):
    """``cond ? t : f`` with both branches evaluated (they must be safe to evaluate)."""

    cond: Expr
    t: Expr
    f: Expr
    dtype: str


@dataclass(frozen=True, repr=False)
class IfThenElse(Expr):
    """``cond ? t : f`` evaluating only the taken branch (guards out-of-bounds reads)."""

    cond: Expr
    t: Expr
    f: Expr
    dtype: str


@dataclass(frozen=True, repr=False)
class Cast(Expr):
    dtype: str
    value: Expr


@dataclass(frozen=True, repr=False)
class Call(Expr):
    """A math function from MATH_FUNCS applied to ``args``."""

    name: str
    args: tuple[Expr, ...]
    dtype: str


@dataclass(frozen=True, eq=False, repr=False)
class IterVar:
    """An axis of a compute op: a Var with its range ``[dom_min, dom_min + extent)``.

    ``kind`` is "spatial" or "reduce". Compared by identity.
    """

    var: Var
    dom_min: int
    extent: int
    kind: str = "spatial"

    @property
    def name(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        return f"IterVar({self.name}, [{self.dom_min}, {self.dom_min + self.extent}), {self.kind})"

    # Let an IterVar stand for its Var inside index expressions, as in TVM.
    def _as_expr(self) -> Var:
        return self.var

    def __add__(self, o):
        return self.var + o

    def __radd__(self, o):
        return o + self.var

    def __sub__(self, o):
        return self.var - o

    def __rsub__(self, o):
        return o - self.var

    def __mul__(self, o):
        return self.var * o

    def __rmul__(self, o):
        return o * self.var

    def __floordiv__(self, o):
        return self.var // o

    def __mod__(self, o):
        return self.var % o

    def __lt__(self, o):
        return self.var < o

    def __le__(self, o):
        return self.var <= o

    def __gt__(self, o):
        return self.var > o

    def __ge__(self, o):
        return self.var >= o


@dataclass(frozen=True, repr=False)
class TensorRead(Expr):
    """``tensor[indices]`` inside a compute body; ``tensor`` is a tensorir.tensor.Tensor."""

    tensor: Any
    indices: tuple[Expr, ...]
    dtype: str


@dataclass(frozen=True, repr=False)
class Reduce(Expr):
    """A commutative reduction (``combiner`` in "sum", "max", "min") of ``source`` over ``axes``.

    ``init`` is the identity element unless given; ``condition`` masks elements (None = all).
    """

    combiner: str
    source: Expr
    axes: tuple[IterVar, ...]
    dtype: str
    condition: Expr | None = None


# ----------------------------------------------------------------------------- constructors


def const(value, dtype: str | None = None) -> Const:
    """A constant; the dtype defaults to bool / int32 / float32 by the Python type."""
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise TypeError(f"cannot make a constant from {value!r} ({type(value).__name__})")
    check_dtype(dtype)
    if dtype == "bool":
        value = bool(value)
    elif is_float(dtype):
        value = float(value)
    else:
        value = int(value)
    return Const(value, dtype)


def as_expr(value, dtype_hint: str | None = None) -> Expr:
    """Convert an Expr, IterVar or Python scalar to an Expr (scalars take ``dtype_hint``)."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, IterVar):
        return value.var
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return const(value.item(), str(value.dtype))  # numpy scalar
    if isinstance(value, bool | int | float):
        if dtype_hint is not None and not isinstance(value, bool):
            if isinstance(value, float) and not is_float(dtype_hint):
                return const(value)
            return const(value, dtype_hint)
        return const(value)
    raise TypeError(
        f"expected an expression or a number, got {value!r} ({type(value).__name__}); "
        "a tensor must be indexed, e.g. A[i, j]"
    )


def _binary(op: str, a, b) -> Expr:
    if isinstance(a, Expr | IterVar):
        a = as_expr(a)
        b = as_expr(b, a.dtype)
    else:
        b = as_expr(b)
        a = as_expr(a, b.dtype)
    return binary(op, a, b)


def _logic_or_bitwise(logic_op: str, bit_op: str, a, b) -> Expr:
    """``logic_op`` when an operand is a condition (bool), else the integer ``bit_op``."""
    if isinstance(a, Expr | IterVar):
        a = as_expr(a)
        b = as_expr(b, a.dtype)
    else:
        b = as_expr(b)
        a = as_expr(a, b.dtype)
    return binary(logic_op if "bool" in (a.dtype, b.dtype) else bit_op, a, b)


def binary(op: str, a: Expr, b: Expr) -> Expr:
    """Build a Binary node, promoting operand dtypes and picking the result dtype."""
    if op in LOGIC_OPS:
        return Binary(op, _to_bool(a), _to_bool(b), "bool")
    if op in BITWISE_OPS:
        for x in (a, b):
            if not is_int(x.dtype):
                raise TypeError(
                    f"{_BITWISE_NAMES[op]} ({op}) takes integer operands, got {x.dtype} in {x}; "
                    "cast to an integer dtype first"
                )
    dtype = promote(a.dtype, b.dtype)
    if a.dtype != dtype:
        a = Cast(dtype, a)
    if b.dtype != dtype:
        b = Cast(dtype, b)
    if op in CMP_OPS:
        return Binary(op, a, b, "bool")
    if op not in ARITH_OPS and op not in BITWISE_OPS:
        raise ValueError(f"unknown binary operator {op!r}")
    if op == "/" and not is_float(dtype):
        op = "floordiv"  # integer division in index arithmetic means floor division
    return Binary(op, a, b, dtype)


def _to_bool(e: Expr) -> Expr:
    return e if e.dtype == "bool" else Binary("!=", e, Const(0, e.dtype), "bool")


def cast(dtype: str, value) -> Expr:
    check_dtype(dtype)
    value = as_expr(value)
    return value if value.dtype == dtype else Cast(dtype, value)


def saturate_cast(dtype: str, value) -> Expr:
    """``value`` clamped to the range of ``dtype``, then cast: a saturating cast.

    A plain cast wraps integers (300 -> int8 is 44) and is undefined for out-of-range floats;
    quantized kernels need the clamp (int32 accumulators -> int8, scaled floats -> int8).
    The bounds are compared in ``value``'s dtype, so only those it can represent are applied
    (int8 -> uint8 clamps below at 0; uint8 -> int32 needs no clamp). Floats -> integers
    truncate toward zero after the clamp, as ``cast`` does.

    Parameters
    ----------
    dtype : str
        An integer target dtype ("int8", "uint8", "int32", ...).
    value : Expr or number

    Returns
    -------
    Expr
    """
    check_dtype(dtype)
    value = as_expr(value)
    if not is_int(dtype):
        raise TypeError(f"saturate_cast: target dtype must be an integer type, got {dtype!r}")
    info = np.iinfo(dtype)
    src = value.dtype
    if is_int(src):
        src_info = np.iinfo(src)
        lo_ok, hi_ok = src_info.min < info.min, src_info.max > info.max
    elif src == "bool":
        lo_ok = hi_ok = False
    else:  # float: clamp to the largest floats that still convert (int32 max is no float32)
        lo_ok = hi_ok = True
    lo, hi = int(info.min), int(info.max)
    if is_float(src):
        hi_f = np.asarray(hi, dtype=src)
        if int(hi_f) > hi:
            hi_f = np.nextafter(hi_f, np.asarray(0, dtype=src))
        lo, hi = float(lo), float(hi_f)
    out = value
    if hi_ok:
        out = min_(out, Const(hi, src))
    if lo_ok:
        out = max_(out, Const(lo, src))
    return cast(dtype, out)


def equal(a, b) -> Expr:
    """The expression ``a == b`` (Python ``==`` compares expressions structurally)."""
    return _binary("==", a, b)


def not_equal(a, b) -> Expr:
    return _binary("!=", a, b)


def select(cond, t, f) -> Expr:
    t, f = _unify(t, f)
    return Select(_to_bool(as_expr(cond)), t, f, t.dtype)


def if_then_else(cond, t, f) -> Expr:
    t, f = _unify(t, f)
    return IfThenElse(_to_bool(as_expr(cond)), t, f, t.dtype)


def _unify(t, f) -> tuple[Expr, Expr]:
    if isinstance(t, Expr | IterVar):
        t = as_expr(t)
        f = as_expr(f, t.dtype)
    else:
        f = as_expr(f)
        t = as_expr(t, f.dtype)
    dtype = promote(t.dtype, f.dtype)
    return cast(dtype, t), cast(dtype, f)


def min_(a, b) -> Expr:
    return _binary("min", a, b)


def max_(a, b) -> Expr:
    return _binary("max", a, b)


def floordiv(a, b) -> Expr:
    return _binary("floordiv", a, b)


def floormod(a, b) -> Expr:
    return _binary("floormod", a, b)


_BITWISE_NAMES = {
    ">>": "right_shift",
    "<<": "left_shift",
    "&": "bitwise_and",
    "|": "bitwise_or",
    "^": "bitwise_xor",
}


def right_shift(a, b) -> Expr:
    """``a >> b`` on integers: arithmetic for signed dtypes, logical for unsigned ones."""
    return _binary(">>", a, b)


def left_shift(a, b) -> Expr:
    """``a << b`` on integers (wraps in the dtype)."""
    return _binary("<<", a, b)


def bitwise_and(a, b) -> Expr:
    return _binary("&", a, b)


def bitwise_or(a, b) -> Expr:
    return _binary("|", a, b)


def bitwise_xor(a, b) -> Expr:
    return _binary("^", a, b)


def bitwise_not(a) -> Expr:
    """``~a`` on an integer: ``a ^ all-ones`` (so every backend that has xor has it)."""
    a = as_expr(a)
    if not is_int(a.dtype):
        raise TypeError(
            f"bitwise_not (~) takes an integer operand, got {a.dtype} in {a}; "
            "cast to an integer dtype first"
        )
    from .dtype import bits

    ones = -1 if a.dtype.startswith("int") else (1 << bits(a.dtype)) - 1
    return Binary("^", a, Const(ones, a.dtype), a.dtype)


def all_(*conds) -> Expr:
    out = as_expr(conds[0])
    for c in conds[1:]:
        out = _binary("&&", out, c)
    return _to_bool(out)


def any_(*conds) -> Expr:
    out = as_expr(conds[0])
    for c in conds[1:]:
        out = _binary("||", out, c)
    return _to_bool(out)


def call(name: str, *args) -> Expr:
    """A math call; float arguments keep their dtype, integers are cast to float32."""
    if name not in MATH_FUNCS:
        raise ValueError(f"unknown math function {name!r}; use one of {MATH_FUNCS}")
    exprs = [as_expr(a) for a in args]
    dtype = exprs[0].dtype if is_float(exprs[0].dtype) else "float32"
    return Call(name, tuple(cast(dtype, e) for e in exprs), dtype)


def children(e: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``e`` (index expressions included)."""
    if isinstance(e, Binary):
        return (e.a, e.b)
    if isinstance(e, Not):
        return (e.a,)
    if isinstance(e, Select | IfThenElse):
        return (e.cond, e.t, e.f)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, TensorRead):
        return e.indices
    if isinstance(e, Reduce):
        return (e.source,) if e.condition is None else (e.source, e.condition)
    if hasattr(e, "expr_children"):  # loop-IR expression nodes (tensorir.loops)
        return e.expr_children()
    return ()


def walk(e: Expr):
    """Yield ``e`` and all its sub-expressions, parents first."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def walk_distinct(e: Expr):
    """:func:`walk`, but a sub-expression object met again is not walked again.

    The simplifier and inlining share sub-expression objects, so a tree can hold one object
    under many parents; visitors that only collect (names, reads) need each object once. Same
    order as :func:`walk` for the first meeting of each object.
    """
    seen: set = set()
    stack = [e]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))  # ``e`` keeps every node alive: ids are not reused
        yield node
        stack.extend(reversed(children(node)))
