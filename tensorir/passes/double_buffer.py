"""Double-buffered shared-memory staging: a software pipeline of depth 2 over a loop.

A loop annotated ``("pragma", "double_buffer")`` (the tensor-core sketch marks its k-tile
loop, :mod:`autosched.search.sketch_rules_tensor_core`) is lowered to the loop of TVM's
``double_buffer`` / CUTLASS's two-stage mainloop when its body is what lowering emits for
shared stages attached at that loop::

    for k in range(K):                     allocate S0[2, ...], S1[2, ...] shared
      allocate S0, S1 shared               barrier()
        barrier()                          copies(k=0) -> S*[0]                  # prologue
        copies(k) -> S0, S1        ==>     barrier()
        barrier()                          for k in range(K):
        rest(k) reads S0, S1                 if k + 1 < K:
                                               copies(k+1) -> S*[(k + 1) % 2]    # in flight
                                             rest(k) reads S*[k % 2]             # meanwhile
                                             barrier()

Each buffer is allocated twice over (the validity check, which reads the allocations, counts
the doubled bytes), the copies of tile ``k + 1`` are issued before the computation of tile
``k``, and one barrier per iteration replaces two. On sm_80+ the CUDA backend issues those
copies as ``cp.async`` and waits for them (``cp.async.wait_all``) before every barrier
(:mod:`codegen.cuda`), so the loads of the next tile overlap the tensor-core work of this one;
elsewhere they are ordinary loads and stores, and the loop computes the same values.

Why there is no race (``B = k % 2`` is the half that ``rest(k)`` reads):

- read after write: ``rest(k)`` reads half ``B``, written by ``copies(k)`` in iteration
  ``k - 1`` (or the prologue), whose writes every thread has finished (and, with ``cp.async``,
  waited for) before the barrier that ends iteration ``k - 1`` (or the prologue's barrier);
- write after read: ``copies(k + 1)`` in iteration ``k`` writes half ``1 - B``, last read by
  ``rest(k - 1)``, which every thread finished before the barrier that ends iteration
  ``k - 1``; ``rest(k)`` never touches that half;
- the prologue's leading barrier orders its writes after the reads of an enclosing loop's
  previous pass, as the per-iteration leading barrier did before.

A loop whose body has another shape (a copy that reads a shared buffer, a store to a staged
buffer outside the copies, no barrier pair), or that is not sequential, is left as it was,
with a debug log line; a loop of extent 1 has nothing to overlap. Both lose the annotation, so
no backend sees a pipeline that is not there.
"""

from __future__ import annotations

import logging

from ..expr import Const, Expr, floormod, walk
from ..loops import Allocate, Barrier, Buffer, For, If, Load, Seq, Stmt, Store, seq, walk_stmts
from ..transform import rewrite, substitute

__all__ = ["DOUBLE_BUFFER", "double_buffer_loop", "is_double_buffered"]

log = logging.getLogger(__name__)

DOUBLE_BUFFER = ("pragma", "double_buffer")
"""The loop annotation this pass acts on (and keeps on the loops it pipelined)."""


def is_double_buffered(s: Stmt) -> bool:
    """Whether ``s`` is a loop this pass pipelined."""
    return isinstance(s, For) and DOUBLE_BUFFER in s.annotations


def _without_pragma(loop: For) -> For:
    ann = tuple(a for a in loop.annotations if a != DOUBLE_BUFFER)
    return For(loop.var, loop.extent, loop.body, loop.kind, loop.thread_tag, ann)


def _split_body(loop: For):
    """``(shared allocations, copies, rest)`` of a loop body of the documented shape, or a
    string saying why not."""
    if loop.kind not in ("serial", "unrolled"):
        return f"it is a {loop.kind} loop, not a sequential one"
    allocs, body = [], loop.body
    while isinstance(body, Allocate):
        if body.buffer.scope != "shared":
            return f"buffer {body.buffer.name} allocated in the loop is not shared"
        allocs.append(body.buffer)
        body = body.body
    if not allocs:
        return "no shared buffer is allocated in the loop"
    stmts = body.stmts if isinstance(body, Seq) else (body,)
    bars = [k for k, s in enumerate(stmts) if isinstance(s, Barrier)]
    if len(bars) < 2 or bars[0] != 0:
        return "the loop body is not barrier, copies, barrier, computation"
    copies, rest = stmts[1 : bars[1]], stmts[bars[1] + 1 :]
    staged = {id(b) for b in allocs}
    for s in copies:
        for x in walk_stmts(s):
            if isinstance(x, Barrier):
                return "a copy contains a barrier"
            if isinstance(x, Store) and id(x.buffer) not in staged:
                return f"a copy stores to {x.buffer.name}, which is not staged in the loop"
            for e in _exprs(x):
                if any(isinstance(n, Load) and n.buffer.scope == "shared" for n in walk(e)):
                    return "a copy reads shared memory"
    for s in rest:
        for x in walk_stmts(s):
            if isinstance(x, Store) and id(x.buffer) in staged:
                return f"{x.buffer.name} is written outside its copy"
    return allocs, copies, rest


def _exprs(s: Stmt) -> tuple:
    if isinstance(s, Store):
        return (s.index, s.value)
    if isinstance(s, If):
        return (s.cond,)
    return ()


def _retarget(s: Stmt, fix, stores: dict) -> Stmt:
    """``s`` with every expression passed through ``fix`` and the stores to a buffer of
    ``stores`` (``id(old) -> (new, offset)``) moved to ``new[offset + index]``."""
    if isinstance(s, Store):
        hit = stores.get(id(s.buffer))
        if hit is not None:
            return Store(hit[0], hit[1] + fix(s.index), fix(s.value))
        return Store(s.buffer, fix(s.index), fix(s.value))
    if isinstance(s, For):
        body = _retarget(s.body, fix, stores)
        return For(s.var, s.extent, body, s.kind, s.thread_tag, s.annotations)
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _retarget(s.body, fix, stores))
    if isinstance(s, Seq):
        return Seq(tuple(_retarget(x, fix, stores) for x in s.stmts))
    if isinstance(s, If):
        els = None if s.else_ is None else _retarget(s.else_, fix, stores)
        return If(fix(s.cond), _retarget(s.then, fix, stores), els)
    return s


def double_buffer_loop(loop: For) -> Stmt:
    """The pipelined form of the annotated ``loop`` (module docstring), or ``loop`` without
    its annotation when it cannot or need not be pipelined."""
    if loop.extent < 2:
        return _without_pragma(loop)
    got = _split_body(loop)
    if isinstance(got, str):
        log.debug("double_buffer on loop %s not applied: %s", loop.var.name, got)
        return _without_pragma(loop)
    allocs, copies, rest = got
    k = loop.var
    twice = {id(b): Buffer(b.name, (2, *b.shape), b.dtype, b.scope) for b in allocs}

    def half(parity: Expr) -> dict:
        return {id(b): (twice[id(b)], parity * b.size) for b in allocs}

    def reads(parity: Expr):
        table = half(parity)

        def visit(n):
            hit = table.get(id(n.buffer)) if isinstance(n, Load) else None
            return None if hit is None else Load(hit[0], hit[1] + rewrite(n.index, visit), n.dtype)

        return lambda e: rewrite(e, visit)

    def copies_of(tile: Expr, parity: Expr) -> Stmt:
        return seq(*(_retarget(c, lambda e: substitute(e, {k: tile}), half(parity))
                     for c in copies))  # fmt: skip

    zero, one = Const(0, "int32"), Const(1, "int32")
    prologue = copies_of(zero, zero)
    ahead = If(k + one < Const(loop.extent, "int32"), copies_of(k + one, floormod(k + one, 2)))
    compute = [_retarget(r, reads(floormod(k, 2)), {}) for r in rest]
    body = seq(ahead, *compute, Barrier())
    pipelined = For(k, loop.extent, body, loop.kind, loop.thread_tag, loop.annotations)
    out = seq(Barrier(), prologue, Barrier(), pipelined)
    for b in reversed(allocs):
        out = Allocate(twice[id(b)], out)
    return out
