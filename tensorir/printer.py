"""Deterministic text for expressions, in the form the seed tutorials print."""

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

_INFIX = {"+": "+", "-": "-", "*": "*", "/": "/", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
          "==": "==", "!=": "!=", "&&": " && ", "||": " || ", ">>": " >> ", "<<": " << ",
          "&": " & ", "|": " | ", "^": " ^ "}  # fmt: skip


def expr_str(e: Expr) -> str:
    """Print ``e`` like TVM prints TIR expressions: ``(A[i, k]*B[k, j])``."""
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        if e.dtype == "bool":
            return "True" if e.value else "False"
        if e.dtype in ("int32",):
            return str(e.value)
        if e.dtype == "float32":
            return f"{float(e.value)!r}f"
        return f"{e.dtype}({e.value})"
    if isinstance(e, Binary):
        if e.op in _INFIX:
            return f"({expr_str(e.a)}{_INFIX[e.op]}{expr_str(e.b)})"
        return f"{e.op}({expr_str(e.a)}, {expr_str(e.b)})"
    if isinstance(e, Not):
        return f"!{expr_str(e.a)}"
    if isinstance(e, Select):
        return f"select({expr_str(e.cond)}, {expr_str(e.t)}, {expr_str(e.f)})"
    if isinstance(e, IfThenElse):
        return f"tir.if_then_else({expr_str(e.cond)}, {expr_str(e.t)}, {expr_str(e.f)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_str(e.value)})"
    if isinstance(e, Call):
        return f"tir.{e.name}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, TensorRead):
        return f"{e.tensor.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, Reduce):
        return expr_str(e.source)
    if hasattr(e, "to_text"):
        return e.to_text(expr_str)
    raise TypeError(f"cannot print {type(e).__name__}")
