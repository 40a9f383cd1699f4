"""Which fragment store nests of a tensor-core kernel write their epilogue 16 bytes at a time.

A store nest copies a warp's 16x16 accumulator tile (staged in shared memory by
``store_matrix_sync``) to the output through its epilogue: ``out[index(i, j)] = f(acc[i, j],
in0[..], ...)``. Lane by lane that is 8 iterations of one 2-byte store per lane for a float16
output (and a 2-byte load per lane of each input the epilogue reads, a residual or a bias), so
a memory-bound 1x1 conv spent more instructions on its epilogue than on its mma. When the
output index is ``start + j`` with ``start`` a known multiple of the word's elements (16 bytes:
8 halves, 4 floats) and no guard depends on the column ``j``, each lane instead takes one run
of that many consecutive columns of one row: it loads its accumulators as words, computes the
epilogue for each column in registers, loads each input read at ``start' + j`` (same proof) as
one word, and stores one word.

:func:`word_store_plan` is the analysis (:func:`wide_store`: the same for wmma, under its
switch); ``codegen.cuda_word_epilogue`` emits a run, for the wmma renderer and for the
warpgroup one (whose lanes trade accumulators first: ``codegen.warpgroup_epilogue``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorir.arith import simplify_expr
from tensorir.dtype import itemsize
from tensorir.expr import Expr, Var, walk
from tensorir.loops import Load, Store

from .llvm_vector import depends_on
from .vector_gather import aligned_rest

__all__ = ["WORD_BYTES", "WIDE_EPILOGUE", "WideStore", "wide_store", "word_store_plan"]

WORD_BYTES = 16
WIDE_EPILOGUE = False
"""Write fragment epilogues a 16-byte word per lane where :func:`wide_store` allows it (a
one-line switch, like ``codegen.cuda_gather.VECTOR_GATHER``: set it for tuning and building
alike). Off: on an H200 (benchmarks/RESULTS.md, 2026-11-28, ``bench_epilogue_words.py``) words
made resnet-50 B16's bottleneck 1x1 convs with a residual 8% faster but its 14x14 3x3 conv
1.39x slower, 7% slower in the weighted sum of the network's tensor-core kernels; until the
search chooses them per state, one element a lane stays the default."""


@dataclass(frozen=True)
class WideStore:
    """How a store nest writes words.

    Attributes
    ----------
    lanes : int
        Consecutive columns a lane computes and stores as one 16-byte word.
    word_loads : tuple of Load
        The epilogue's global loads that are read as one word each (their index is a
        word-aligned start plus the column); other loads stay one per column.
    """

    lanes: int
    word_loads: tuple[Load, ...]


def wide_store(store: Store, col: Var, guard: Expr | None, acc_dtype: str) -> WideStore | None:
    """The word plan of a wmma store nest (:func:`word_store_plan`) when ``WIDE_EPILOGUE`` is
    on, else None (one element a lane)."""
    if not WIDE_EPILOGUE:
        return None
    return word_store_plan(store, col, guard, acc_dtype)


def word_store_plan(store: Store, col: Var, guard: Expr | None, acc_dtype: str) -> WideStore | None:
    """The word plan of a store nest writing ``store`` for the tile's column ``col`` (0..15)
    under ``guard``, or None where it must stay one element per lane: the output is not a
    global array of 2- or 4-byte elements, the guard depends on the column, or the index is
    not a multiple of the word's elements plus the column."""
    size = itemsize(store.buffer.dtype)
    if store.buffer.scope != "global" or size not in (2, 4) or itemsize(acc_dtype) not in (2, 4):
        return None  # global arrays are whole allocations: their words are 16-byte aligned
    lanes = WORD_BYTES // size
    if guard is not None and depends_on(guard, col):
        return None  # padded columns: a word could straddle the real ones
    if aligned_rest(simplify_expr(store.index), col, lanes) is None:
        return None
    loads = []
    for node in walk(store.value):
        if (isinstance(node, Load) and node.buffer.scope == "global"
                and itemsize(node.dtype) * lanes == WORD_BYTES
                and node.dtype == node.buffer.dtype
                and aligned_rest(simplify_expr(node.index), col, lanes) is not None
                and not any(node is x for x in loads)):  # fmt: skip
            loads.append(node)
    return WideStore(lanes, tuple(loads))
