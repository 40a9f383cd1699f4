"""The Hopper tensor-core sketch: GEMMs on warpgroup ``wgmma`` tiles (sm_90, fp16 / bf16 into
float32; float32 as TF32 on a ``-allow_tf32=1`` target).

:class:`MultiLevelTilingWarpgroup` is the wmma sketch
(:mod:`autosched.search.sketch_rules_tensor_core`) with warpgroups instead of warps: each
``threadIdx.y`` value is four warps (128 ``threadIdx.x`` lanes) that compute a 64 x N tile
together, N = 16 x the searched fragments per warpgroup along ``j`` (the validity check keeps N
<= 256), and the shared k tile is one 128-byte row of the swizzled layout the CUDA backend
stores it in (:mod:`tensorir.passes.warpgroup`, :mod:`codegen.cuda_warpgroup`): 64 halves in
four k16 products, or 32 floats in four TF32 k8 ones (below, 16-bit)::

    G: b  i.0 j.0.0  i.1 j.0.1  k.0  k.1.0  i.2.0 j.0.2  i.2.1 j.1 k.1.1
       |  block      warpgroups k64  k16 x4 4 x 16 rows  16 16 16  <- pragma tensor_core
       N = 16 * j.0.2 columns per warpgroup

It fires ahead of the wmma rule and lets it fire too (two sketches: the search's samples and
its cost model choose between them), for a target whose ``-arch``, or whose device, is sm_90,
on a GEMM whose operands are both K-major (``X[.., i, k] * Y[.., j, k]``, a dense layer) with
``i`` a multiple of 64, ``k`` of the row (64 or 32) and ``j`` of 16. Float32 GEMMs only reach
it where the tensor-core rules take float32 at all (``-allow_tf32=1``,
:func:`~autosched.search.sketch_rules_tensor_core.tensor_core_dtypes`). The lengths it fixes
(64, the row, 16 or 8, the 128 lanes, the 16-byte vector) stay fixed under mutation
(:func:`autosched.search.state_utils.tensor_core_fixed_split`).
"""

from __future__ import annotations

from codegen.cuda_arch import wgmma_available
from tensorir.expr import Cast
from tensorir.passes.warpgroup import WARPGROUP_LANES, WARPGROUP_M, WGMMA_DTYPES, swizzle_row
from tensorir.stage import SplitRel

from . import state_utils as su
from .sketch_rules import APPLY, SKIP
from .sketch_rules_tensor_core import MultiLevelTilingTensorCore, _dtypes, tensor_core_gemm

__all__ = ["MultiLevelTilingWarpgroup", "is_warpgroup_state", "warpgroup_gemm"]


def warpgroup_gemm(op, dtypes=WGMMA_DTYPES):
    """The :class:`~autosched.search.sketch_rules_tensor_core.TensorCoreGemm` of ``op`` when
    the warpgroup sketch can tile it (module docstring), its operands of one of ``dtypes``
    (the search's tensor-core dtypes: float32 only where TF32 is allowed), else None."""
    gemm = tensor_core_gemm(op, tuple(d for d in dtypes if d in WGMMA_DTYPES))
    if gemm is None or op.body.dtype != "float32":
        return None
    *_, ax_i, ax_j = op.axes
    (k,) = op.body.axes
    if ax_i.extent % WARPGROUP_M or k.extent % swizzle_row(gemm.dtype) or ax_j.extent % 16:
        return None
    y = op.body.source.b  # tensor_core_gemm's Y: a read, maybe cast up
    y = y.value if isinstance(y, Cast) else y
    if tuple(y.indices[-2:]) != (ax_j.var, k.var):  # B K-major: Y[.., j, k]
        return None
    return gemm


def is_warpgroup_state(state) -> bool:
    """Whether ``state`` (a sketch or a state of one) comes from the warpgroup sketch: the
    shared copies of a tensor-core stage run on the 128 lanes of a warpgroup (the wmma
    sketch's run on one warp's 32)."""
    for stage in state.stages:
        if not (stage.name.endswith(".shared") and stage.compute_at == "iter"):
            continue
        if not su.has_tensor_core_pragma(state[stage.attach[0]]):
            continue
        lanes = {it.name for it in stage.iters if it.annotation == "threadIdx.x"}
        for rel in stage.relations:
            if isinstance(rel, SplitRel) and rel.children[-1] in lanes \
                    and tuple(rel.lengths) == (WARPGROUP_LANES,):  # fmt: skip
                return True
    return False


class MultiLevelTilingWarpgroup(MultiLevelTilingTensorCore):
    """Tile a :func:`warpgroup_gemm` stage onto wgmma warpgroup tiles (module docstring)."""

    name = "MultiLevelTilingWarpgroup"
    lanes = WARPGROUP_LANES

    def meet_condition(self, ctx, state, sid):
        if not wgmma_available(getattr(ctx, "device_arch", None) or getattr(ctx, "arch", None)):
            return SKIP
        if super().meet_condition(ctx, state, sid) == SKIP:
            return SKIP
        return SKIP if warpgroup_gemm(state.stages[sid].op, _dtypes(ctx)) is None else APPLY

    def _tile_gemm(self, s, g, gemm, shape):
        parts, split_ids = {}, {}
        # i: 64 rows a warpgroup (four warps' 16), the rest over blocks and warpgroups.
        outer, rows64 = s.split(g, gemm.i, [WARPGROUP_M])
        ids = (len(s.steps) - 1,)
        warp_rows, frag_rows = s.split(g, rows64.name, [shape.m])
        ids += (len(s.steps) - 1,)
        blk, wg = s.split(g, outer.name, [None])
        ids += (len(s.steps) - 1,)
        parts[gemm.i], split_ids[gemm.i] = [blk.name, wg.name, warp_rows.name, frag_rows.name], ids
        # j: 16-column fragments; blocks, warpgroups and fragments per warpgroup searched.
        outer, inner = s.split(g, gemm.j, [shape.n])
        ids = (len(s.steps) - 1,)
        p = s.split(g, outer.name, [None, None])
        ids += (len(s.steps) - 1,)
        parts[gemm.j], split_ids[gemm.j] = [p[0].name, p[1].name, p[2].name, inner.name], ids
        # k: tiles of one 128-byte swizzled row, four wgmma k steps each (k16, TF32 k8).
        ko, k_row = s.split(g, gemm.k, [swizzle_row(gemm.dtype)])
        k4, k16 = s.split(g, k_row.name, [shape.k])
        return parts, [ko.name, k4.name, k16.name], split_ids

    def _follow_axis(self, s, o, name, split_ids) -> list[str]:
        if len(split_ids) == 2:  # j, as the wmma sketch splits it
            return super()._follow_axis(s, o, name, split_ids)
        outer, rows64 = s.follow_split(o, name, split_ids[0], 1)
        warp_rows, frag_rows = s.follow_split(o, rows64.name, split_ids[1], 1)
        blk, wg = s.follow_split(o, outer.name, split_ids[2], 1)
        return [blk.name, wg.name, warp_rows.name, frag_rows.name]

    def _shared_layout(self, s, shared: str, dtype: str) -> None:
        """Rows of exactly 128 bytes, unpadded: the CUDA backend swizzles their 16-byte
        chunks (the layout ``wgmma`` reads), which also spreads them over the banks."""
