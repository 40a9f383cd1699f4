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

Inside a ``vthread`` loop, a store that the GPU code generators copy once per virtual thread
(:mod:`tensorir.passes.inject_vthread`: stores to local buffers, the register tile, and stores
whose index or value uses the vthread variable) counts once per copy, as it does in TVM, whose
UnrollLoop runs after InjectVirtualThread. Counted once, a register tile of 8 virtual threads
unrolled 8 times the bound: fully unrolled 1568-accumulator conv2d tiles took nvcc over a minute.

Every unrolled loop, by this rule or annotated ``unroll`` in the schedule, is bounded by the code
it expands to (TVM bounds it with ``auto_max_step`` / ``auto_max_extent``): a loop whose
``extent * size(body)`` exceeds ``MAX_UNROLLED_SIZE`` (``size`` counts the stores emitted once
the unrolled loops inside are expanded) stays a serial loop. Unrolling only changes speed, never
results, so a hand-written ``unroll`` of a huge loop is kept as a loop (with a logged note)
rather than refused: fully unrolling a 64^3 matmul would otherwise keep LLVM busy for minutes.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from ..expr import walk
from ..loops import Allocate, For, If, Program, Seq, Stmt, Store

__all__ = ["MAX_DEPTH", "MAX_UNROLLED_SIZE", "expanded_sizes", "subtree_steps", "unroll_loops"]

MAX_DEPTH = 8  # TVM's auto_max_depth
# The most stores one unrolled loop may expand to. The search never asks for more: its largest
# auto_unroll_max_step is 512 on CPUs and 1024 on GPUs.
MAX_UNROLLED_SIZE = 1024

_log = logging.getLogger(f"autosched.{__name__}")


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


def _copies(store: Store, vthreads: tuple) -> int:
    """How many copies of ``store`` virtual-thread injection makes (see the module docstring)."""
    n = 1
    for var, extent in vthreads:
        if store.buffer.scope == "local" or any(
            node is var for e in (store.index, store.value) for node in walk(e)
        ):
            n *= extent
    return n


def _mark(s: Stmt, limit: int, vthreads: tuple = ()):
    """Returns (new stmt, steps, unroll depth, True if a non-unrolled loop is inside, size).

    ``size`` is the number of stores ``s`` emits once its unrolled loops are expanded;
    ``vthreads`` are the enclosing vthread loops' (variable, extent)."""
    if isinstance(s, For):
        limit = max(limit, dict(s.annotations).get("auto_unroll_max_step", 0))
        if s.kind == "vthread":
            vthreads = (*vthreads, (s.var, s.extent))
        body, steps, depth, normal, size = _mark(s.body, limit, vthreads)
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
        if kind == "unrolled" and s.extent * size > MAX_UNROLLED_SIZE:
            if not auto:
                _log.info(
                    "loop %r (extent %d) annotated unroll stays a loop: unrolled it would emit "
                    "%d stores, more than MAX_UNROLLED_SIZE=%d",
                    s.var.name, s.extent, s.extent * size, MAX_UNROLLED_SIZE,
                )  # fmt: skip
            kind = "serial"
        if kind == "unrolled":
            steps, depth, size = steps * s.extent, depth + 1, size * s.extent
        else:
            normal = True
        out = s
        if body is not s.body or kind != s.kind:
            out = For(s.var, s.extent, body, kind, s.thread_tag, s.annotations)
        return out, steps, depth, normal, size
    if isinstance(s, Allocate):
        body, steps, depth, normal, size = _mark(s.body, limit, vthreads)
        return (s if body is s.body else Allocate(s.buffer, body)), steps, depth, normal, size
    if isinstance(s, Seq):
        parts = [_mark(x, limit, vthreads) for x in s.stmts]
        new = tuple(p[0] for p in parts)
        out = s if all(a is b for a, b in zip(new, s.stmts)) else Seq(new)
        return (
            out,
            sum(p[1] for p in parts),
            max((p[2] for p in parts), default=0),
            any(p[3] for p in parts),
            sum(p[4] for p in parts),
        )
    if isinstance(s, If):
        t = _mark(s.then, limit, vthreads)
        e = None if s.else_ is None else _mark(s.else_, limit, vthreads)
        new_else = None if e is None else e[0]
        out = s if (t[0] is s.then and new_else is s.else_) else If(s.cond, t[0], new_else)
        steps = t[1] + (0 if e is None else e[1])
        depth = max(t[2], 0 if e is None else e[2])
        size = t[4] + (0 if e is None else e[4])
        return out, steps, depth, t[3] or (e is not None and e[3]), size
    stores = _copies(s, vthreads) if isinstance(s, Store) else 0
    return s, stores, 0, False, stores


def unroll_loops(program: Program) -> Program:
    """``program`` with serial loops under ``auto_unroll_max_step`` unrolled where small."""
    body = _mark(program.body, 0)[0]
    if body is program.body:
        return program
    return replace(program, body=body)


def expanded_sizes(s: Stmt) -> dict[str, int]:
    """Statements plus expression nodes that code generation emits for ``s``, per stored buffer.

    Unrolled and virtual-thread loops count their body once per iteration (code generation
    copies it); other loops count it once. Keys are the names of the buffers stored to (the
    stages); the conditions of ``If`` statements count under ``""``.
    """
    out: dict[str, int] = {}

    def visit(st: Stmt, times: int) -> None:
        if isinstance(st, For):
            copies = st.extent if st.kind in ("unrolled", "vthread") else 1
            visit(st.body, times * copies)
        elif isinstance(st, Allocate):
            visit(st.body, times)
        elif isinstance(st, Seq):
            for x in st.stmts:
                visit(x, times)
        elif isinstance(st, If):
            out[""] = out.get("", 0) + times * (1 + sum(1 for _ in walk(st.cond)))
            visit(st.then, times)
            if st.else_ is not None:
                visit(st.else_, times)
        elif isinstance(st, Store):
            nodes = 1 + sum(1 for _ in walk(st.index)) + sum(1 for _ in walk(st.value))
            out[st.buffer.name] = out.get(st.buffer.name, 0) + times * nodes

    visit(s, 1)
    return out
