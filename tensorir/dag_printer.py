"""The printed form of a ComputeDAG: expressions exactly as TVM's legacy printer writes them.

``ComputeDAG.print_dag`` (TVM's ``PrintDAG``) and ``str(dag)`` print one line per op with
:func:`dag_expr_str`; this module holds that expression printer and the pieces of the line
(the combiner signs of a reduction, the shape of a placeholder, the longest line ``str`` keeps).
"""

from __future__ import annotations

from .expr import (
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    IfThenElse,
    Not,
    Reduce,
    Select,
    TensorRead,
    Var,
)
from .printer import expr_str

MAX_LINE_WIDTH = 256  # str(dag) shortens longer lines like TVM's Python printer

_COMBINER_SIGN = {"sum": " += ", "max": " max= ", "min": " min= "}


def _shape_str(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


_TVM_INFIX = {
    "+": " + ", "-": " - ", "*": "*", "/": "/", "<": " < ", "<=": " <= ", ">": " > ",
    ">=": " >= ", "==": " == ", "!=": " != ", "&&": " && ", "||": " || ", ">>": " >> ",
    "<<": " << ", "&": " & ", "|": " | ", "^": " ^ ",
}  # fmt: skip


def dag_expr_str(e: Expr) -> str:
    """Print ``e`` exactly like TVM's legacy printer (the form in the seed DAG printouts).

    Differs from :func:`tensorir.printer.expr_str` in spacing (``(i + 1)``, ``(i >= 1)``) and
    constants (``0f``, ``-3.40282e+38f``, ``(bool)1``, ``(int64)5``); other nodes (loop-IR
    ones) fall back to ``expr_str``.
    """
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return _const_str(e)
    if isinstance(e, Binary):
        a, b = dag_expr_str(e.a), dag_expr_str(e.b)
        if e.op in _TVM_INFIX:
            return f"({a}{_TVM_INFIX[e.op]}{b})"
        return f"{e.op}({a}, {b})"
    if isinstance(e, Not):
        return f"!{dag_expr_str(e.a)}"
    if isinstance(e, Select):
        return f"select({dag_expr_str(e.cond)}, {dag_expr_str(e.t)}, {dag_expr_str(e.f)})"
    if isinstance(e, IfThenElse):
        parts = ", ".join(dag_expr_str(x) for x in (e.cond, e.t, e.f))
        return f"tir.if_then_else({parts})"
    if isinstance(e, Cast):
        return f"{e.dtype}({dag_expr_str(e.value)})"
    if isinstance(e, Call):
        return f"tir.{e.name}({', '.join(dag_expr_str(a) for a in e.args)})"
    if isinstance(e, TensorRead):
        return f"{e.tensor.name}[{', '.join(dag_expr_str(i) for i in e.indices)}]"
    if isinstance(e, Reduce):
        return dag_expr_str(e.source)
    return expr_str(e)


def _const_str(e: Const) -> str:
    if e.dtype == "int32":
        return str(int(e.value))
    if e.dtype == "float32":
        return f"{float(e.value):g}f"  # C++ ostream default: 6 significant digits
    if e.dtype == "float64":
        return f"{float(e.value):g}"
    if e.dtype == "float16":
        return f"{float(e.value):g}h"
    if e.dtype == "bfloat16":
        return f"bfloat16({float(e.value):g}f)"
    return f"({e.dtype}){int(e.value)}"
