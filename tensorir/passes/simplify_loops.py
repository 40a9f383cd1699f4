"""Loop-IR pass: simplify every expression of a program under its loop ranges.

Folds Ifs whose condition the ranges decide and removes loops of extent 1; the expression
rules live in :mod:`tensorir.arith`.
"""

from __future__ import annotations

from dataclasses import replace

from ..arith import Ranges, simplify_expr
from ..expr import Const, Not
from ..loops import Allocate, Barrier, For, If, Program, Seq, Stmt, Store, seq

__all__ = ["simplify_program", "simplify_stmt"]


# ----------------------------------------------------------------------------- statements


def simplify_stmt(s: Stmt, ranges: Ranges | None = None) -> Stmt | None:
    """Simplify every expression of ``s``; Ifs whose condition is decided are folded and
    loops of extent 1 (other than thread-bound ones) are removed.

    Returns None when nothing remains (e.g. an If that never runs).
    """
    return _stmt(s, dict(ranges or {}), {})


def _stmt(s: Stmt, r: Ranges, memo: dict) -> Stmt | None:
    # ``memo``: the simplifier's memo of the expressions simplified under ``r`` (a new one
    # with every new ranges dict), shared by the statements that see the same ranges.
    if isinstance(s, For):
        r2 = dict(r)
        r2[s.var] = (0, s.extent - 1)
        body = _stmt(s.body, r2, {})
        if body is None or s.extent <= 0:
            return None
        if s.extent == 1 and s.kind != "thread":
            # A loop of one iteration is no loop (as TVM's MakeLoopNest): the simplifier
            # already replaced its var by 0; annotations move to the loops just inside.
            return _push_annotations(body, s.annotations)
        return For(s.var, s.extent, body, s.kind, s.thread_tag, s.annotations)
    if isinstance(s, Store):
        return Store(s.buffer, simplify_expr(s.index, r, memo), simplify_expr(s.value, r, memo))
    if isinstance(s, Allocate):
        body = _stmt(s.body, r, memo)
        return None if body is None else Allocate(s.buffer, body)
    if isinstance(s, Seq):
        parts = [_stmt(x, r, memo) for x in s.stmts]
        parts = [p for p in parts if p is not None]
        return seq(*parts) if parts else None
    if isinstance(s, If):
        cond = simplify_expr(s.cond, r, memo)
        if isinstance(cond, Const):
            branch = s.then if cond.value else s.else_
            return None if branch is None else _stmt(branch, r, memo)
        then = _stmt(s.then, r, memo)
        els = None if s.else_ is None else _stmt(s.else_, r, memo)
        if then is None and els is None:
            return None
        if then is None:
            return If(Not(cond), els)
        return If(cond, then, els)
    if isinstance(s, Barrier):
        return s
    raise TypeError(f"simplify_stmt: unknown statement {type(s).__name__}")


def _push_annotations(s: Stmt, ann: tuple) -> Stmt:
    if not ann:
        return s
    if isinstance(s, For):
        merged = dict(s.annotations)
        for k, v in ann:
            merged.setdefault(k, v)
        return For(s.var, s.extent, s.body, s.kind, s.thread_tag, tuple(merged.items()))
    if isinstance(s, Seq):
        return Seq(tuple(_push_annotations(x, ann) for x in s.stmts))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _push_annotations(s.body, ann))
    if isinstance(s, If):
        els = None if s.else_ is None else _push_annotations(s.else_, ann)
        return If(s.cond, _push_annotations(s.then, ann), els)
    return s


def simplify_program(p: Program) -> Program:
    """``p`` with every expression simplified under its loop ranges."""
    body = _stmt(p.body, {}, {})
    if body is None:
        body = Seq(())
    return replace(p, body=body)
