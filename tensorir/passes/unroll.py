"""The ``auto_unroll_max_step`` pass: mark small serial loop nests as explicitly unrolled.

Inside a loop annotated ``("auto_unroll_max_step", N)`` (the stage's outermost loop), every
serial loop whose subtree runs at most N iterations in total (the product of its extent and
the extents of the loops below it, taking the largest branch) becomes kind "unrolled", as
TVM's ``unroll_explicit`` pragma does. Other loop kinds are left alone.
"""

from __future__ import annotations

from ..loops import Allocate, For, If, Program, Seq, Stmt

__all__ = ["subtree_steps", "unroll_loops"]


def subtree_steps(s: Stmt) -> int:
    """Iterations of the deepest loop chain in ``s`` (1 for a loop-free statement)."""
    if isinstance(s, For):
        return s.extent * subtree_steps(s.body)
    if isinstance(s, Allocate):
        return subtree_steps(s.body)
    if isinstance(s, Seq):
        return max((subtree_steps(x) for x in s.stmts), default=1)
    if isinstance(s, If):
        t = subtree_steps(s.then)
        return t if s.else_ is None else max(t, subtree_steps(s.else_))
    return 1


def _mark(s: Stmt, limit: int) -> Stmt:
    if isinstance(s, For):
        limit = max(limit, dict(s.annotations).get("auto_unroll_max_step", 0))
        body = _mark(s.body, limit)
        kind = s.kind
        if limit > 0 and kind == "serial" and s.extent * subtree_steps(body) <= limit:
            kind = "unrolled"
        if body is s.body and kind == s.kind:
            return s
        return For(s.var, s.extent, body, kind, s.thread_tag, s.annotations)
    if isinstance(s, Allocate):
        body = _mark(s.body, limit)
        return s if body is s.body else Allocate(s.buffer, body)
    if isinstance(s, Seq):
        parts = tuple(_mark(x, limit) for x in s.stmts)
        return s if all(a is b for a, b in zip(parts, s.stmts)) else Seq(parts)
    if isinstance(s, If):
        t = _mark(s.then, limit)
        e = None if s.else_ is None else _mark(s.else_, limit)
        return s if (t is s.then and e is s.else_) else If(s.cond, t, e)
    return s


def unroll_loops(program: Program) -> Program:
    """``program`` with serial loops under ``auto_unroll_max_step`` unrolled where small."""
    body = _mark(program.body, 0)
    if body is program.body:
        return program
    return Program(program.name, program.params, program.workspaces, body)
