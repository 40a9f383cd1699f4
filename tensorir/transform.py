"""Generic rebuilding of expression trees: ``map_children`` and bottom-up ``rewrite``."""

from __future__ import annotations

from collections.abc import Callable

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


def map_children(e: Expr, f: Callable[[Expr], Expr]) -> Expr:
    """Return ``e`` with ``f`` applied to each direct sub-expression (``e`` itself if unchanged)."""
    # Exact-type fast paths for the most frequent nodes (lowering calls this millions of
    # times); any other type, subclasses included, takes the general chain below.
    cls = type(e)
    if cls is Binary:
        a, b = f(e.a), f(e.b)
        return e if (a is e.a and b is e.b) else Binary(e.op, a, b, e.dtype)
    if cls is Var or cls is Const:
        return e
    if isinstance(e, Binary):
        a, b = f(e.a), f(e.b)
        return e if (a is e.a and b is e.b) else Binary(e.op, a, b, e.dtype)
    if isinstance(e, Not):
        a = f(e.a)
        return e if a is e.a else Not(a)
    if isinstance(e, Select | IfThenElse):
        c, t, fl = f(e.cond), f(e.t), f(e.f)
        if c is e.cond and t is e.t and fl is e.f:
            return e
        return type(e)(c, t, fl, e.dtype)
    if isinstance(e, Cast):
        v = f(e.value)
        return e if v is e.value else Cast(e.dtype, v)
    if isinstance(e, Call):
        args = tuple(f(a) for a in e.args)
        return (
            e
            if all(x is y for x, y in zip(args, e.args, strict=True))
            else Call(e.name, args, e.dtype)
        )
    if isinstance(e, TensorRead):
        idx = tuple(f(i) for i in e.indices)
        if all(x is y for x, y in zip(idx, e.indices, strict=True)):
            return e
        return TensorRead(e.tensor, idx, e.dtype)
    if isinstance(e, Reduce):
        src = f(e.source)
        cond = None if e.condition is None else f(e.condition)
        if src is e.source and cond is e.condition:
            return e
        return Reduce(e.combiner, src, e.axes, e.dtype, cond)
    if hasattr(e, "with_children"):  # loop-IR expression nodes (tensorir.loops)
        old = e.expr_children()
        new = tuple(f(c) for c in old)
        return e if all(x is y for x, y in zip(new, old, strict=True)) else e.with_children(new)
    return e  # leaves: Var, Const


def rewrite(e: Expr, fn: Callable[[Expr], Expr | None], memo: dict | None = None) -> Expr:
    """Rebuild ``e`` bottom-up; ``fn(node)`` returns a replacement or None to keep the node.

    ``fn`` is tried on each node before its children are visited; a replacement is not
    visited again. With ``memo`` (a dict, for a pure ``fn`` only), a node object met again
    (a shared sub-expression) is rewritten once and its result reused: the same tree,
    without walking the shared parts again.
    """
    if memo is None:

        def visit(node: Expr) -> Expr:
            out = fn(node)
            if out is not None:
                return out
            return map_children(node, visit)

        return visit(e)

    def visit_memo(node: Expr) -> Expr:
        key = id(node)
        hit = memo.get(key)
        if hit is not None:
            return hit[1]
        out = fn(node)
        if out is None:
            out = map_children(node, visit_memo)
        memo[key] = (node, out)  # keeps ``node`` alive, so its id is not reused
        return out

    return visit_memo(e)


def substitute(e: Expr, mapping: dict) -> Expr:
    """Replace Vars (keys, by identity) with expressions (values) throughout ``e``."""
    if not mapping:
        return e
    memo: dict = {}  # shared sub-expressions are substituted once (the same tree)

    def visit(node: Expr) -> Expr:
        cls = type(node)
        if cls is Var:
            out = mapping.get(node)
            return node if out is None else out
        if cls is Const:
            return node
        key = id(node)
        hit = memo.get(key)
        if hit is not None:
            return hit[1]
        if isinstance(node, Var):
            out = mapping.get(node)
            out = node if out is None else out
        else:
            out = map_children(node, visit)
        memo[key] = (node, out)
        return out

    return visit(e)
