"""How a warp turns its ``wgmma`` accumulators into rows of 16-byte words, by shuffles.

After ``wgmma`` a warp holds its 16 x 16 piece of a fragment the ``mma.sync`` way: lane
``l`` has rows ``l / 4`` and ``l / 4 + 8``, columns ``2 (l % 4)``, ``+ 1``, ``+ 8``, ``+ 9``
(register ``q``: bit 0 the column's ``+ 1``, bit 1 the row's ``+ 8``, bit 2 the column's
``+ 8``). Stored as it lies, each store instruction of the warp writes 8 rows x 4 lanes of
one element, 2 columns apart: 8 bytes of each 32-byte sector it touches, every sector twice.
A memory-bound conv (a 1x1 conv with a residual, resnet-50's bottleneck ends) spent its time
there.

The four lanes of a quad (``l / 4`` equal) together hold two whole 16-column rows. Each lane
can instead take whole runs of ``run`` consecutive columns of one row (``run`` = 16 bytes of
the output: 8 halves or 4 floats) and store each as one word: the quad trades accumulators
with ``__shfl_xor_sync`` first. :func:`quad_transpose` plans the trade: which runs each lane
takes, and in each xor step, which register each lane sends; every value moves once, and the
runs are chosen so that each step moves the same count for every lane (8 halves: a pair in
each of 3 steps; 4 floats: two pairs in one step).

The CUDA renderer (:mod:`codegen.cuda_warpgroup`) emits the plan; its register choices depend
on the lane's place in the quad, which it writes as selects, so the accumulators stay in
registers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

__all__ = ["QuadTranspose", "holder_of", "quad_transpose", "register_of"]

QUAD = 4
VALUES_PER_LANE = 8  # a warp's 16 x 16 piece over 32 lanes


def register_of(row_half: int, column: int) -> int:
    """The register (0..7) of the quad lane ``(column / 2) % 4`` that holds the element of
    row ``l / 4 + 8 row_half`` and ``column`` (0..15)."""
    return ((column >> 3) << 2) | (row_half << 1) | (column & 1)


def holder_of(column: int) -> int:
    """The quad lane (0..3) holding ``column`` of either row."""
    return (column >> 1) & 3


@dataclass(frozen=True)
class QuadTranspose:
    """The shuffle plan of one run length.

    Attributes
    ----------
    run : int
        Consecutive columns a lane stores as one word (8 or 4).
    runs : tuple
        ``runs[t]``: quad lane ``t``'s runs in order, each ``(row_half, first_column)``.
    sends : tuple
        One entry per xor step ``(k, regs)``: lanes trade with lane ``l ^ k``; ``regs[x][t]``
        is the register quad lane ``t`` sends as the step's ``x``-th value.
    sources : tuple
        ``sources[t][e]``: where quad lane ``t`` finds element ``e`` of its runs (run
        ``e / run``, column ``e % run`` of it): ``("own", register)`` or ``("step", s, x)``,
        the ``x``-th value received in step ``sends[s]``.
    """

    run: int
    runs: tuple
    sends: tuple
    sources: tuple


def _runs(run: int) -> tuple:
    """Each quad lane's runs, chosen so that a lane's values come from as few lanes as
    possible: 8-column runs take one row-half each; 4-column runs, the same columns of both
    rows, from the lane and its xor-1 neighbour."""
    if run == 8:
        return tuple(((t >> 1, 8 * (t & 1)),) for t in range(QUAD))
    if run == 4:
        return tuple(tuple((h, 4 * (t >> 1) + 8 * (t & 1)) for h in (0, 1)) for t in range(QUAD))
    raise ValueError(f"quad_transpose: runs of {run} columns; 8 (16-bit) or 4 (32-bit) fit a word")


@cache  # one plan per run length, asked for by every store nest the renderer emits
def quad_transpose(run: int) -> QuadTranspose:
    """The shuffle plan that gives each quad lane whole ``run``-column runs (8 or 4)."""
    runs = _runs(run)
    need: dict = {}  # (lane, step k) -> [(element, register)] the lane receives in step k
    own: dict = {}
    for t in range(QUAD):
        elements = [(h, first + c) for h, first in runs[t] for c in range(run)]
        assert len(elements) == VALUES_PER_LANE
        for e, (h, col) in enumerate(elements):
            k = t ^ holder_of(col)
            if k == 0:
                own[(t, e)] = register_of(h, col)
            else:
                need.setdefault((t, k), []).append((e, register_of(h, col)))
    sends, where = [], {}
    for k in range(1, QUAD):
        counts = {len(need.get((t, k), ())) for t in range(QUAD)}
        if counts == {0}:
            continue
        if len(counts) != 1:  # pragma: no cover - the runs above are chosen to avoid it
            raise AssertionError(f"quad_transpose: step {k} moves unequal counts {counts}")
        (count,) = counts
        # Lane t sends, as value x, what its partner t ^ k needs as value x.
        regs = tuple(tuple(need[(t ^ k, k)][x][1] for t in range(QUAD)) for x in range(count))
        for t in range(QUAD):
            for x, (e, _) in enumerate(need[(t, k)]):
                where[(t, e)] = ("step", len(sends), x)
        sends.append((k, regs))
    sources = tuple(
        tuple(("own", own[(t, e)]) if (t, e) in own else where[(t, e)]
              for e in range(VALUES_PER_LANE))
        for t in range(QUAD)
    )  # fmt: skip
    return QuadTranspose(run, runs, tuple(sends), sources)
