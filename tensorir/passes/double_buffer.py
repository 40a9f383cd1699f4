"""Multi-buffered shared-memory staging: a software pipeline of N = 2..4 stages over a loop.

A loop annotated ``("pragma", "double_buffer")`` (N = 2) or ``("pragma",
"software_pipeline_<N>")`` (N = 3, 4; :data:`PIPELINE_PRAGMAS`; the tensor-core sketch marks its
k-tile loop, :mod:`autosched.search.sketch_rules_tensor_core`) is lowered to the loop of TVM's
``double_buffer`` / CUTLASS's N-stage mainloop when its body is what lowering emits for shared
stages attached at that loop::

    for k in range(K):                     allocate S0[N, ...], S1[N, ...] shared
      allocate S0, S1 shared               barrier()
        barrier()                          for p in range(N - 1):                # prologue
        copies(k) -> S0, S1        ==>       if p < K: copies(p) -> S*[p]        # (commit)
        barrier()                          barrier()
        rest(k) reads S0, S1               for k in range(K):
                                             if k + N - 1 < K:
                                               copies(k+N-1) -> S*[(k+N-1) % N]  # in flight
                                             (commit)
                                             rest(k) reads S*[k % N]             # meanwhile
                                             barrier()

For N = 2 the prologue is ``copies(0) -> S*[0]`` without a loop (the code lowering emitted
before deeper pipelines existed, unchanged). Each buffer is allocated N times over (the
validity check, which reads the allocations, counts the N copies), the copies of tile
``k + N - 1`` are issued before the computation of tile ``k``, and one barrier per iteration
replaces two. On sm_80+ the CUDA backend issues those copies as ``cp.async``
(:mod:`codegen.cuda`): for N = 2 it waits for all of them (``cp.async.wait_all``) before every
barrier; for N >= 3 it closes a group after each tile's copies (``cp.async.commit_group``: after
each prologue iteration and after the guarded copies of each loop iteration, so that every
iteration commits exactly one group, empty past the last tile) and waits with
``cp.async.wait_group N-2`` before every barrier, so that N - 2 later tiles stay in flight while
tile ``k`` is multiplied. The prologue loop carries :data:`PIPELINE_PROLOGUE` so that the
backend finds it. Elsewhere the copies are ordinary loads and stores, and the loop computes the
same values.

Why there is no race (``B = k % N`` is the buffer that ``rest(k)`` reads; tile ``t`` is staged
in buffer ``t % N`` and, with ``cp.async``, is the ``t``-th committed group of each thread):

- read after write: ``rest(k)`` reads buffer ``B``, written by ``copies(k)`` (issued in
  iteration ``k - N + 1`` or in the prologue). Before the barrier that ends iteration
  ``k - 1`` (or the prologue's barrier, ``k = 0``) a thread has committed ``k + N - 1``
  groups (tiles ``0 .. k + N - 2``); ``wait_group N-2`` leaves only the newest N - 2 of them
  in flight, so tile ``k``'s copies of that thread are done, and the barrier makes every
  thread's writes visible to every other;
- write after read: ``copies(k + N - 1)`` in iteration ``k`` writes buffer ``(k - 1) % N``,
  last read by ``rest(k - 1)``, which every thread finished before the barrier that ends
  iteration ``k - 1``; ``rest(k)`` reads ``B``, another buffer;
- write after write, and reads of a buffer still being written: the tiles in flight in
  iteration ``k`` are ``k + 1 .. k + N - 1``, which with tile ``k`` are N consecutive tiles,
  so in N different buffers: no two pending copies share a buffer and ``rest(k)`` reads none
  of theirs;
- the prologue's leading barrier orders its writes after the reads of an enclosing loop's
  previous pass, as the per-iteration leading barrier did before (the groups still pending
  then are empty: the guards issue no tile past ``K - 1``).

A warpgroup (``wgmma``) pipeline of N >= 3 stages *lags* by one tile (:func:`pipeline_lag`):
the copies of tile ``k + N - 2`` are issued in iteration ``k`` (the prologue stages N - 2 tiles),
into buffer ``(k - 2) % N``, so that the products of tile ``k - 1``, issued asynchronously, may
still read buffer ``(k - 1) % N`` after the barrier that ends iteration ``k - 1``; the backend
waits for all but the newest group of products before that barrier (``wgmma.wait_group 1``),
so every warp's products of tile ``k - 2`` are done when iteration ``k`` overwrites their
buffer. Then ``wait_group N-3`` leaves N - 3 tiles of copies in flight. The loop carries
``(PIPELINE_LAG, 1)``. Read as plain loops it computes the same values.

A loop whose body has another shape (a copy that reads a shared buffer, a store to a staged
buffer outside the copies, no barrier pair), or that is not sequential, is left as it was,
with a debug log line; a loop of extent 1 has nothing to overlap. Both lose the annotation, so
no backend sees a pipeline that is not there.
"""

from __future__ import annotations

import logging

from ..expr import Const, Expr, Var, floormod, walk
from ..loops import Allocate, Barrier, Buffer, For, If, Load, Seq, Stmt, Store, seq, walk_stmts
from ..transform import rewrite, substitute
from .warpgroup import WARPGROUP_LANES

__all__ = [
    "DOUBLE_BUFFER",
    "MAX_STAGES",
    "PIPELINE_PRAGMAS",
    "PIPELINE_LAG",
    "PIPELINE_PROLOGUE",
    "double_buffer_loop",
    "is_double_buffered",
    "lag_of",
    "pipeline_lag",
    "pipeline_pragma",
    "pipeline_stages",
    "pipelined_shared_limit",
    "shared_memory_limit",
]

log = logging.getLogger(__name__)

DOUBLE_BUFFER = ("pragma", "double_buffer")
"""The loop annotation of a two-stage pipeline (and kept on the loops it pipelined)."""

MAX_STAGES = 4
"""The deepest pipeline this pass builds (CUTLASS's sm80 mainloops use 3 to 5 stages)."""

PIPELINE_PRAGMAS = {"double_buffer": 2, **{f"software_pipeline_{n}": n for n in (3, 4)}}
"""Loop pragma -> pipeline stages N (the annotations this pass acts on, kept on the loops it
pipelined); ``double_buffer`` keeps its name so that records of two-stage states replay."""

PIPELINE_LAG = "pipeline_lag"
"""Annotation key of a pipelined loop whose copies run one tile later (value: 1), so that one
tile of asynchronous products may still read its buffer after the barrier
(:func:`pipeline_lag`)."""

PIPELINE_PROLOGUE = "pipeline_prologue"
"""Annotation key of the prologue loop of an N >= 3 stage pipeline (value: N), for backends."""


def pipeline_pragma(stages: int) -> str:
    """The loop pragma of an N-stage pipeline (:data:`PIPELINE_PRAGMAS`)."""
    for name, n in PIPELINE_PRAGMAS.items():
        if n == stages:
            return name
    raise ValueError(f"a software pipeline has 2 to {MAX_STAGES} stages, not {stages!r}")


def _stages_of(annotations) -> int:
    for key, value in annotations:
        if key == "pragma" and value in PIPELINE_PRAGMAS:
            return PIPELINE_PRAGMAS[value]
    return 0


def pipeline_stages(s: Stmt) -> int:
    """The stages N of ``s`` if it is a loop this pass pipelined, else 0."""
    return _stages_of(s.annotations) if isinstance(s, For) else 0


def is_double_buffered(s: Stmt) -> bool:
    """Whether ``s`` is a loop this pass pipelined (with any number of stages)."""
    return pipeline_stages(s) > 0


def shared_memory_limit(stmt: Stmt, limits: dict) -> tuple[int | None, str]:
    """``(bytes, limit's name)``: the shared memory a kernel ``stmt`` may use under the GPU
    ``limits`` (``tensorir.passes.verify_gpu``). A kernel with a pipelined loop may opt in to
    ``max_shared_memory_per_block_optin`` (CUDA's dynamic shared memory) for the copies of its
    staged tiles; every other kernel gets ``max_shared_memory_per_block``."""
    cap = limits.get("max_shared_memory_per_block")
    pipelined = pipelined_shared_limit(cap, limits.get("max_shared_memory_per_block_optin"))
    if pipelined != cap and any(is_double_buffered(s) for s in walk_stmts(stmt)):
        return pipelined, "max_shared_memory_per_block_optin (less the arrays' alignment)"
    return cap, "max_shared_memory_per_block"


OPTIN_ALIGNMENT_SLACK = 1024
"""Bytes of the opt-in a pipelined kernel leaves unused: its arrays start at 128-byte
boundaries of one dynamic buffer (``codegen.cuda_shared``), which costs up to 127 bytes an
array beyond what they hold."""


def pipelined_shared_limit(cap: int | None, optin: int | None) -> int | None:
    """The shared bytes a pipelined kernel may use, given the static limit ``cap`` and the
    device's opt-in ``optin``: the opt-in less :data:`OPTIN_ALIGNMENT_SLACK` where that is
    more than ``cap`` (``None``: unchecked), else ``cap``."""
    if optin and cap is not None and optin - OPTIN_ALIGNMENT_SLACK > cap:
        return optin - OPTIN_ALIGNMENT_SLACK
    return cap


def _without_pragma(loop: For) -> For:
    ann = tuple(a for a in loop.annotations
                if not (a[0] == "pragma" and a[1] in PIPELINE_PRAGMAS))  # fmt: skip
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


def pipeline_lag(stages: int, copies, rest) -> int:
    """Tiles of computation a pipeline lets run past its barrier: 1 for a warpgroup (wgmma)
    pipeline of three or more stages (its copies run on 128 ``threadIdx.x`` lanes and its
    computation holds ``tensor_core`` nests, :mod:`tensorir.passes.warpgroup`), else 0."""
    if stages < 3:
        return 0
    lanes = any(isinstance(x, For) and x.thread_tag == "threadIdx.x"
                and x.extent == WARPGROUP_LANES for c in copies for x in walk_stmts(c))  # fmt: skip
    marked = any(isinstance(x, For) and ("pragma", "tensor_core") in x.annotations
                 for r in rest for x in walk_stmts(r))  # fmt: skip
    return 1 if lanes and marked else 0


def lag_of(s: Stmt) -> int:
    """The lag (:func:`pipeline_lag`) this pass gave loop ``s``; 0 for any other statement."""
    if not isinstance(s, For):
        return 0
    return next((v for key, v in s.annotations if key == PIPELINE_LAG), 0)


def double_buffer_loop(loop: For) -> Stmt:
    """The pipelined form of the annotated ``loop`` (module docstring; its pragma gives the
    stages), or ``loop`` without its annotation when it cannot or need not be pipelined."""
    n = _stages_of(loop.annotations)
    if loop.extent < 2 or not n:
        return _without_pragma(loop)
    got = _split_body(loop)
    if isinstance(got, str):
        log.debug("double_buffer on loop %s not applied: %s", loop.var.name, got)
        return _without_pragma(loop)
    allocs, copies, rest = got
    k = loop.var
    many = {id(b): Buffer(b.name, (n, *b.shape), b.dtype, b.scope) for b in allocs}

    def part(slot: Expr) -> dict:
        return {id(b): (many[id(b)], slot * b.size) for b in allocs}

    def reads(slot: Expr):
        table = part(slot)

        def visit(x):
            hit = table.get(id(x.buffer)) if isinstance(x, Load) else None
            return None if hit is None else Load(hit[0], hit[1] + rewrite(x.index, visit), x.dtype)

        return lambda e: rewrite(e, visit)

    def copies_of(tile: Expr, slot: Expr) -> Stmt:
        return seq(*(_retarget(c, lambda e: substitute(e, {k: tile}), part(slot))
                     for c in copies))  # fmt: skip

    lag = pipeline_lag(n, copies, rest)
    zero, extent = Const(0, "int32"), Const(loop.extent, "int32")
    ahead_by = Const(n - 1 - lag, "int32")
    if n == 2:
        prologue = copies_of(zero, zero)
    else:  # tiles 0 .. N-2-lag, one per iteration (a cp.async group each, codegen.cuda)
        p = Var(f"{k.name}_pre", "int32")
        fill = If(p < extent, copies_of(p, p))
        prologue = For(p, n - 1 - lag, fill, "serial", None, ((PIPELINE_PROLOGUE, n),))
    ahead = If(k + ahead_by < extent, copies_of(k + ahead_by, floormod(k + ahead_by, n)))
    compute = [_retarget(r, reads(floormod(k, n)), {}) for r in rest]
    body = seq(ahead, *compute, Barrier())
    notes = loop.annotations + (((PIPELINE_LAG, lag),) if lag else ())
    pipelined = For(k, loop.extent, body, loop.kind, loop.thread_tag, notes)
    out = seq(Barrier(), prologue, Barrier(), pipelined)
    for b in reversed(allocs):
        out = Allocate(many[id(b)], out)
    return out
