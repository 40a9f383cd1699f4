"""CPU sketch rules (TVM ``sketch_policy_rules.cc``, notes 3.3).

A rule has ``meet_condition(ctx, state, stage_id) -> SKIP | APPLY | APPLY_AND_SKIP_REST`` and
``apply(ctx, state, stage_id) -> [(new_state, next_stage_id), ...]``. Rules never mutate the
state they are given: they work on ``state.copy()`` (stage data is immutable, so a copy is
cheap). :class:`CustomSketchRule` wraps two user functions (TVM PreloadCustomSketchRule).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tensorir.dag import SIMPLIFY_CONST_TENSOR_INDICES

from . import state_utils as su
from .dot_product import DOT_GROUP, int8_dot_axes

__all__ = [
    "APPLY",
    "APPLY_AND_SKIP_REST",
    "SKIP",
    "AddCacheWrite",
    "AddRfactor",
    "AlwaysInline",
    "CustomSketchRule",
    "MultiLevelTiling",
    "MultiLevelTilingWithFusion",
    "SimplifyComputeWithConstTensor",
    "SketchContext",
    "SkipStage",
    "cpu_rules",
    "do_multi_level_tiling",
    "dot_product_inner_tiles",
    "follow_tiling",
]

SKIP, APPLY, APPLY_AND_SKIP_REST = 0, 1, 2


@dataclass(frozen=True)
class SketchContext:
    """What rules may read besides the state: the task's hardware and the search params.

    ``dot_lanes`` is the int32 lanes of the target's ``vpdpbusd`` (16, 8) or None
    (:func:`autosched.search.dot_product.dot_lanes`)."""

    num_cores: int
    params: object  # SearchParams
    dot_lanes: int | None = field(default=None, kw_only=True)

    @property
    def tiling_structure(self) -> str:
        return self.params.cpu_multi_level_tiling_structure


# ----------------------------------------------------------------------------- helpers


def do_multi_level_tiling(state, sid: int, structure: str, inner_tiles=None):
    """Split every spatial loop into ``#S`` and every reduce loop into ``#R`` parts with
    undefined (None) lengths and order them level by level as ``structure`` says.

    ``inner_tiles`` (iterator name -> length, in the order wanted) gives those iterators one
    more part, of that fixed length, placed innermost after all levels (the vpdpbusd tiles of
    :func:`dot_product_inner_tiles`); sampling and mutation keep fixed lengths.

    Returns ``(new_state, spatial_split_step_ids)``; the step ids are in loop order (follow
    tiling relies on it).
    """
    s = state.copy()
    inner_tiles = dict(inner_tiles or {})
    n_space = sum(c in "sS" for c in structure)
    n_reduce = sum(c in "rR" for c in structure)
    space = [[] for _ in range(n_space)]
    reduce = [[] for _ in range(n_reduce)]
    innermost = {}
    split_ids = []
    for it in state.stages[sid].iters:
        n, levels = (n_space, space) if it.kind == "spatial" else (n_reduce, reduce)
        fixed = inner_tiles.get(it.name)
        if n == 1 and fixed is None:
            levels[0].append(it.name)
            continue
        lengths = [None] * (n - 1) + ([] if fixed is None else [fixed])
        parts = s.split(sid, it.name, lengths)
        if fixed is not None:
            innermost[it.name] = parts.pop().name
        for lv, p in zip(levels, parts):
            lv.append(p.name)
        if it.kind == "spatial":
            split_ids.append(len(s.steps) - 1)
    order, si, ri = [], 0, 0
    for c in structure:
        if c in "sS":
            order += space[si]
            si += 1
        else:
            order += reduce[ri]
            ri += 1
    s.reorder(sid, order + [innermost[name] for name in inner_tiles if name in innermost])
    return s, split_ids


def dot_product_inner_tiles(ctx, state, sid: int) -> dict[str, int] | None:
    """``{output axis: lanes, reduce axis: 4}`` when the stage is a uint8 x int8 reduction
    that the target's vpdpbusd runs in the vertical form (:mod:`autosched.search.dot_product`),
    else None (no VNNI, not int8, or ``SearchParams.cpu_int8_dot_product_tiling`` off)."""
    if not ctx.dot_lanes or not getattr(ctx.params, "cpu_int8_dot_product_tiling", True):
        return None
    stage = state.stages[sid]
    axes = int8_dot_axes(stage.op, ctx.dot_lanes)
    if axes is None:
        return None
    names = {it.name for it in stage.iters}
    if not set(axes) <= names or su.is_tiled(stage):
        return None
    return {axes[0]: ctx.dot_lanes, axes[1]: DOT_GROUP}


def _tile(ctx, state, sid: int):
    """Multi-level tiling of stage ``sid``, for vpdpbusd where it applies: then the output
    lanes loop (the second to last) is vectorized in the sketch."""
    inner = dot_product_inner_tiles(ctx, state, sid)
    s, split_ids = do_multi_level_tiling(state, sid, ctx.tiling_structure, inner)
    if inner:
        s.vectorize(sid, len(s.stages[sid].iters) - 2)
    return s, split_ids


def follow_tiling(state, sid: int, split_ids, n_split: int):
    """Split each spatial loop of stage ``sid`` like the producer's SplitStep (FSP with
    ``n_split``) and order the parts level by level (TVM FollowTiling)."""
    s = state.copy()
    levels = [[] for _ in range(n_split + 1)]
    for k, it in enumerate(state.stages[sid].iters):
        parts = s.follow_split(sid, it.name, split_ids[k], n_split)
        for lv, p in zip(levels, parts):
            lv.append(p.name)
    s.reorder(sid, [name for lv in levels for name in lv])
    return s


# ----------------------------------------------------------------------------- rules


class SketchRule:
    """Base class: subclasses set ``name`` and implement the two methods."""

    name = "rule"

    def meet_condition(self, ctx, state, sid: int) -> int:
        raise NotImplementedError

    def apply(self, ctx, state, sid: int) -> list:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class SkipStage(SketchRule):
    """Move on to the previous stage unchanged (always applies; last rule)."""

    name = "SkipStage"

    def meet_condition(self, ctx, state, sid):
        return APPLY

    def apply(self, ctx, state, sid):
        return [(state, sid - 1)]


class AlwaysInline(SketchRule):
    """Inline strictly inlinable, non-output, reduction-free stages (CPU rule)."""

    name = "AlwaysInline"

    def meet_condition(self, ctx, state, sid):
        s = state.stages[sid]
        if s.is_placeholder or su.is_output(state, sid) or su.has_reduce_iter(s):
            return SKIP
        if su.current_dag(state).is_strictly_inlinable(s.name):
            return APPLY_AND_SKIP_REST
        return SKIP

    def apply(self, ctx, state, sid):
        s = state.copy()
        s.compute_inline(sid)
        return [(s, sid - 1)]


class SimplifyComputeWithConstTensor(SketchRule):
    """Winograd-style stages: unroll the const-tensor indices, tile the others in 2 levels."""

    name = "SimplifyComputeWithConstTensor"

    def meet_condition(self, ctx, state, sid):
        s = state.stages[sid]
        if not s.is_placeholder and SIMPLIFY_CONST_TENSOR_INDICES in s.op.attrs:
            return APPLY_AND_SKIP_REST
        return SKIP

    def apply(self, ctx, state, sid):
        stage = state.stages[sid]
        const = set(stage.op.attrs[SIMPLIFY_CONST_TENSOR_INDICES])
        s = state.copy()
        tiled, unrolled = [], []
        for it in stage.iters:
            if it.name in const:
                s.unroll(sid, it.name)
                unrolled.append(it.name)
            else:
                tiled.append([p.name for p in s.split(sid, it.name, [None])])
        s.reorder(sid, [t[0] for t in tiled] + [t[1] for t in tiled] + unrolled)
        return [(s, sid - 1)]


class AddRfactor(SketchRule):
    """Reductions with little spatial parallelism: rfactor the outer or the inner part of the
    fused reduction (two sketches). The split uses factor 1 here because rfactor needs a
    concrete split; :func:`autosched.search.sketch.generate_sketches` resets it to None."""

    name = "AddRfactor"

    def meet_condition(self, ctx, state, sid):
        if su.needs_rfactor(state, sid, ctx.num_cores) and not su.has_cache_write_stage(state, sid):
            return APPLY
        return SKIP

    def apply(self, ctx, state, sid):
        base = state.copy()
        stage = state.stages[sid]
        space = [it.name for it in stage.iters if it.kind == "spatial"]
        red = [it.name for it in stage.iters if it.kind == "reduce"]
        fused = base.fuse(sid, red).name if len(red) > 1 else red[0]
        parts = [p.name for p in base.split(sid, fused, [1])]
        out = []
        for k, part in enumerate(parts):
            s = base.copy()
            s.rfactor(sid, part, len(space))
            if k == 1:  # the factored axis innermost, for vectorization
                names = [it.name for it in s.stages[sid].iters]
                fa = names.pop(len(space))
                s.reorder(sid, names + [fa])
            out.append((s, sid - 1))
        return out


class AddCacheWrite(SketchRule):
    """Tiled stages without a fusible consumer get a ``.local`` cache stage (and the stage is
    revisited, so the fusion rule fires on the cache stage); CPU keeps the uncached variant."""

    name = "AddCacheWrite"

    def meet_condition(self, ctx, state, sid):
        if su.needs_multi_level_tiling(state, sid) and (
            su.has_single_elementwise_consumer(state, sid) is None
        ):
            return APPLY
        return SKIP

    def apply(self, ctx, state, sid):
        s = state.copy()
        s.cache_write(sid, "local")
        return [(s, sid)]


class MultiLevelTilingWithFusion(SketchRule):
    """Tile the stage and fuse it into its elementwise consumer at tile level 1 and 2."""

    name = "MultiLevelTilingWithFusion"

    def meet_condition(self, ctx, state, sid):
        if not su.needs_multi_level_tiling(state, sid):
            return SKIP
        if su.has_single_elementwise_consumer(state, sid) is None:
            return SKIP
        return APPLY_AND_SKIP_REST if su.has_cache_write_stage(state, sid) else APPLY

    def apply(self, ctx, state, sid):
        tid = su.has_single_elementwise_consumer(state, sid)
        structure = ctx.tiling_structure
        base, split_ids = _tile(ctx, state, sid)
        out = []
        for level in (1, 2):
            if structure[level - 1] not in "sS":
                continue
            s = follow_tiling(base, tid, split_ids, level)
            target_iter = s.stages[tid].iters[level * len(split_ids) - 1]
            s.compute_at(sid, tid, target_iter.name)
            out.append((s, sid - 1))
        return out


class MultiLevelTiling(SketchRule):
    """Plain ``SSRSRS`` tiling of a data-reuse stage (with the vpdpbusd inner tiles where
    they apply, as in :class:`MultiLevelTilingWithFusion`)."""

    name = "MultiLevelTiling"

    def meet_condition(self, ctx, state, sid):
        return APPLY_AND_SKIP_REST if su.needs_multi_level_tiling(state, sid) else SKIP

    def apply(self, ctx, state, sid):
        s, _ = _tile(ctx, state, sid)
        return [(s, sid - 1)]


@dataclass(frozen=True)
class CustomSketchRule(SketchRule):
    """A user rule from two functions, tried before the built-in ones.

    Parameters
    ----------
    meet_condition_func : callable
        ``(ctx, state, stage_id) -> 0 | 1 | 2`` (SKIP, APPLY, APPLY_AND_SKIP_REST).
    apply_func : callable
        ``(ctx, state, stage_id) -> [(new_state, next_stage_id), ...]``; must not mutate
        ``state``.
    name : str
    """

    meet_condition_func: Callable
    apply_func: Callable
    name: str = "CustomSketchRule"

    def meet_condition(self, ctx, state, sid):
        return self.meet_condition_func(ctx, state, sid)

    def apply(self, ctx, state, sid):
        return list(self.apply_func(ctx, state, sid))


def cpu_rules() -> list[SketchRule]:
    """The CPU rule list in TVM's order."""
    return [
        AlwaysInline(),
        SimplifyComputeWithConstTensor(),
        AddRfactor(),
        AddCacheWrite(),
        MultiLevelTilingWithFusion(),
        MultiLevelTiling(),
        SkipStage(),
    ]
