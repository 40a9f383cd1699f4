"""Warpgroup tensor-core tiles in loop IR: which fragment nests a Hopper GPU runs as one
``wgmma.mma_async`` of four warps.

The warpgroup sketch (:mod:`autosched.search.sketch_rules_warpgroup`) builds the same marked
nests as the wmma sketch (:mod:`tensorir.passes.tensor_core`): 16x16x16 multiply-adds, fills
and stores, warp-uniform. Two things make a kernel a *warpgroup* kernel:

- its block has :data:`WARPGROUP_LANES` (128) ``threadIdx.x`` lanes, not 32: each
  ``threadIdx.y`` value is a warpgroup of four warps, and (read as plain loops) all 128 lanes
  compute the same tile, which is what makes the scalar reading equal to the collective
  ``wgmma`` calls;
- the unrolled loops around each mma nest walk a warpgroup tile: ``m_tiles`` x 64 rows (a loop
  over 16-row fragments whose extent is a multiple of 4) by ``N`` columns (a loop over 16-column
  fragments, ``N`` up to 256), read from K-major shared tiles whose rows are 128 bytes (the
  128-byte swizzle's row, :func:`codegen.cuda_wgmma.swizzle128_offset`): 64 elements of
  float16 / bfloat16, 32 of float32 (which ``wgmma`` reads as TF32, ``k8`` a product).

:func:`warpgroup_tile` reads that tile off a :class:`~tensorir.passes.tensor_core.FragmentPlan`
or says, in one line, why the nest is no warpgroup tile; the GPU validity check reports that
reason, and the CUDA backend (:mod:`codegen.cuda_warpgroup`) renders the tile.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arith import linear_form
from ..dtype import itemsize
from ..loops import For

__all__ = [
    "SWIZZLE_ROW",
    "SWIZZLE_ROW_BYTES",
    "WGMMA_DTYPES",
    "WARPGROUP_LANES",
    "WARPGROUP_K_ROWS",
    "WARPGROUP_M",
    "WARPGROUP_MAX_N",
    "WarpgroupTile",
    "is_warpgroup_kernel",
    "swizzle_row",
    "warpgroup_tile",
]

WARPGROUP_LANES = 128
"""Threads of a warpgroup: four warps, the ``threadIdx.x`` extent of a warpgroup kernel."""
WARPGROUP_M = 64
"""Rows of one ``wgmma`` (m64): four warps of 16 rows."""
WARPGROUP_MAX_N = 256
"""The widest ``wgmma`` (n256)."""
SWIZZLE_ROW_BYTES = 128
"""Bytes of a shared operand row: the 128-byte swizzle's row."""
SWIZZLE_ROW = 64
"""Elements of a 16-bit operand's shared row (:func:`swizzle_row` of float16)."""
WGMMA_DTYPES = ("float16", "bfloat16", "float32")
"""Operand dtypes ``wgmma`` takes into float32 accumulators here: float32 runs as TF32 (only
marked for a ``-allow_tf32=1`` target, as the wmma nests are)."""
_FRAG = 16


def swizzle_row(dtype: str) -> int:
    """Elements of ``dtype`` in one 128-byte swizzled operand row (64 halves, 32 floats)."""
    return SWIZZLE_ROW_BYTES // itemsize(dtype)


WARPGROUP_K_ROWS = tuple(sorted({swizzle_row(d) for d in WGMMA_DTYPES}))
"""The k tile lengths of the warpgroup sketch, one swizzled row of each dtype: (32, 64)."""


@dataclass(frozen=True)
class WarpgroupTile:
    """One warpgroup's accumulator tile around an mma nest: ``m_tiles`` x 64 rows by ``n``
    columns; ``row_loop`` walks its 16-row fragments, ``col_loop`` its 16-column ones, and
    ``outer`` is the outermost unrolled loop around the nest (the k steps of one shared tile):
    the backend fences before it and waits for the products after it."""

    row_loop: For
    col_loop: For | None  # None when N = 16
    outer: For
    n: int
    m_tiles: int


def _coefficients(index, loops) -> dict | None:
    form = linear_form(index)
    if form is None:
        return None
    terms, _ = form
    return {id(f): terms.get(f.var, 0) for f in loops}


def warpgroup_tile(plan, key) -> WarpgroupTile | str:
    """The warpgroup tile of the mma nest ``plan.mma[key]`` (module docstring), or why not."""
    m = plan.mma[key]
    chain = plan.chains.get(key, ())
    if m.a.buffer.dtype not in WGMMA_DTYPES or m.acc.dtype != "float32":
        return (
            f"wgmma takes float16 / bfloat16 / float32 (TF32) operands with float32 "
            f"accumulators, not {m.a.buffer.dtype} into {m.acc.dtype}"
        )
    row = swizzle_row(m.a.buffer.dtype)
    for tag, op, layout in (("A", m.a, "row_major"), ("B", m.b, "col_major")):
        if op.buffer.scope != "shared" or op.layout != layout or op.ldm != row:
            return (
                f"operand {tag} ({op.buffer.name}) must be a K-major shared tile with rows of "
                f"{row} elements ({op.layout}, {op.buffer.scope}, ldm {op.ldm})"
            )
    acc = _coefficients(m.acc_base, chain)
    if acc is None:
        return "the accumulator index is not linear in the fragment loops"
    ldm = m.acc_ldm
    rows = [f for f in chain if acc[id(f)] == _FRAG * ldm]
    cols = [f for f in chain if acc[id(f)] == _FRAG]
    # One loop over 16-row fragments; one over 16-column ones, or none for N = 16 (lowering
    # drops loops of extent 1).
    if (
        len(rows) != 1
        or len(cols) > 1
        or any(acc[id(f)] for f in chain if f is not rows[0] and f not in cols)
    ):
        return "the fragment loops around the mma nest are not one row and one column loop"
    row_loop, col_loop = rows[0], (cols[0] if cols else None)
    n = _FRAG * (col_loop.extent if col_loop is not None else 1)
    if n != ldm or n > WARPGROUP_MAX_N:
        return f"the warpgroup tile is {n} columns wide ({ldm} accumulated); wgmma takes 16..256"
    if row_loop.extent % (WARPGROUP_M // _FRAG):
        return f"the warpgroup tile has {row_loop.extent * _FRAG} rows, not a multiple of 64"
    a = _coefficients(m.a.base, chain)
    b = _coefficients(m.b.base, chain)
    row_step = _FRAG * row
    if (
        a is None
        or b is None
        or a[id(row_loop)] != row_step
        or (col_loop is not None and b[id(col_loop)] != row_step)
    ):
        return "the operand tiles do not follow the fragment loops row by row"
    if (col_loop is not None and a[id(col_loop)]) or b[id(row_loop)]:
        return "operand A depends on the column loop or B on the row loop"
    return WarpgroupTile(row_loop, col_loop, chain[0], n, row_loop.extent // 4)


def is_warpgroup_kernel(extents: dict) -> bool:
    """Whether a kernel of launch ``extents`` runs its fragment nests as warpgroups."""
    return extents.get("threadIdx.x", 1) == WARPGROUP_LANES
