"""The ``auto_unroll_max_step`` pass: mark small serial loop nests as explicitly unrolled.

Inside a loop annotated ``("auto_unroll_max_step", N)`` (the stage's outermost loop, or the
loops just inside it when it had extent 1), a serial loop becomes kind "unrolled" when, as in
TVM's ``UnrollLoop`` pass with ``unroll_explicit``:

- every loop inside it is unrolled (explicitly or by this rule) and at most
  ``MAX_DEPTH - 1`` of them are nested, and
- ``extent * steps(body) <= N``, where ``steps`` counts the stores executed by the body
  (statements in sequence add up, loops multiply).

Loops of other kinds (parallel, vectorized, thread, vthread) are never unrolled here and stop
the loops around them from unrolling.
"""

from __future__ import annotations

from dataclasses import replace

from ..loops import Allocate, For, If, Program, Seq, Stmt, Store

__all__ = ["MAX_DEPTH", "subtree_steps", "unroll_loops"]

MAX_DEPTH = 8  # TVM's auto_max_depth


def subtree_steps(s: Stmt) -> int:
    """Stores executed by ``s`` (both branches of an If counted, as TVM does)."""
    if isinstance(s, For):
        return s.extent * subtree_steps(s.body)
    if isinstance(s, Allocate):
        return subtree_steps(s.body)
    if isinstance(s, Seq):
        return sum(subtree_steps(x) for x in s.stmts)
    if isinstance(s, If):
        return subtree_steps(s.then) + (0 if s.else_ is None else subtree_steps(s.else_))
    return 1 if isinstance(s, Store) else 0


def _mark(s: Stmt, limit: int):
    """Returns (new stmt, steps, unroll depth, True if a non-unrolled loop is inside)."""
    if isinstance(s, For):
        limit = max(limit, dict(s.annotations).get("auto_unroll_max_step", 0))
        body, steps, depth, normal = _mark(s.body, limit)
        kind = s.kind
        auto = (
            limit > 0
            and kind == "serial"
            and not normal
            and depth < MAX_DEPTH
            and s.extent * steps <= limit
        )
        if auto:
            kind = "unrolled"
        if kind == "unrolled":
            steps, depth = steps * s.extent, depth + 1
        else:
            normal = True
        out = s
        if body is not s.body or kind != s.kind:
            out = For(s.var, s.extent, body, kind, s.thread_tag, s.annotations)
        return out, steps, depth, normal
    if isinstance(s, Allocate):
        body, steps, depth, normal = _mark(s.body, limit)
        return (s if body is s.body else Allocate(s.buffer, body)), steps, depth, normal
    if isinstance(s, Seq):
        parts = [_mark(x, limit) for x in s.stmts]
        new = tuple(p[0] for p in parts)
        out = s if all(a is b for a, b in zip(new, s.stmts)) else Seq(new)
        return (
            out,
            sum(p[1] for p in parts),
            max((p[2] for p in parts), default=0),
            any(p[3] for p in parts),
        )
    if isinstance(s, If):
        t = _mark(s.then, limit)
        e = None if s.else_ is None else _mark(s.else_, limit)
        new_else = None if e is None else e[0]
        out = s if (t[0] is s.then and new_else is s.else_) else If(s.cond, t[0], new_else)
        steps = t[1] + (0 if e is None else e[1])
        depth = max(t[2], 0 if e is None else e[2])
        return out, steps, depth, t[3] or (e is not None and e[3])
    return s, (1 if isinstance(s, Store) else 0), 0, False


def unroll_loops(program: Program) -> Program:
    """``program`` with serial loops under ``auto_unroll_max_step`` unrolled where small."""
    body = _mark(program.body, 0)[0]
    if body is program.body:
        return program
    return replace(program, body=body)
