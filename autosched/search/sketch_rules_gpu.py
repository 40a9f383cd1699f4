"""GPU sketch rules (TVM ``sketch_policy_rules.cc``, notes 3.2, 3.3 and 3.5).

Rule order (TVM's): :class:`AddCacheRead`, :class:`AlwaysInlineGPU`,
``SimplifyComputeWithConstTensor``, :class:`CrossThreadReduction`, :class:`AddCacheWriteGPU`,
:class:`MultiLevelTilingWithFusionGPU`, ``MultiLevelTiling`` (with the GPU structure),
``SkipStage``. TVM's ``SpecialComputeLocationGPU`` (Winograd ``input_tile``) is left out: the
always-inline rule inlines that stage instead.

A finished GPU sketch of a tiling op looks like (notes 3.5): the root stage (the elementwise
consumer, or the op itself after ``cache_write("local")``) split in four levels by follow
splits (``.0`` -> blockIdx, ``.1`` -> vthread, ``.2`` -> threadIdx, the rest inside a thread);
the register-tile stage tiled ``SSSRRSRS`` and attached at the root's last threadIdx-level
iterator; one ``.shared`` cache stage per input attached at the outermost reduce tile. The
thread binding itself happens at annotation (:mod:`autosched.search.annotate_gpu`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorir import steps as st
from tensorir.dtype import LOW_PRECISION, itemsize
from tensorir.steps import ScheduleError

from . import state_utils as su
from .sketch_rules import (
    APPLY,
    APPLY_AND_SKIP_REST,
    SKIP,
    MultiLevelTiling,
    SimplifyComputeWithConstTensor,
    SketchContext,
    SketchRule,
    SkipStage,
    do_multi_level_tiling,
    follow_tiling,
)
from .sketch_rules_tensor_core import MultiLevelTilingTensorCore
from .sketch_rules_warpgroup import MultiLevelTilingWarpgroup

__all__ = [
    "AddCacheRead",
    "AddCacheWriteGPU",
    "AlwaysInlineGPU",
    "CrossThreadReduction",
    "GPUSketchContext",
    "MultiLevelTilingWithFusionGPU",
    "gpu_rules",
    "has_cross_thread_reduction",
    "shared_row_target",
    "last_reduce_iter_in_outermost_reduce_tile",
]


@dataclass(frozen=True)
class GPUSketchContext(SketchContext):
    """:class:`SketchContext` plus the GPU facts the rules read. ``tensor_core_dtypes`` are the
    operand dtypes the tensor-core rule may tile
    (:func:`autosched.search.sketch_rules_tensor_core.tensor_core_dtypes` of the target: float32
    only with ``-allow_tf32=1``)."""

    warp_size: int = 32
    max_threads_per_block: int = 1024
    tensor_core_dtypes: tuple[str, ...] = LOW_PRECISION
    arch: str | None = None  # the target's -arch when it names one (sm_80), else unknown
    # ... or else the device's, when this process has one (hardware.known_cuda_arch)
    device_arch: str | None = None

    @property
    def tiling_structure(self) -> str:
        return self.params.gpu_multi_level_tiling_structure


# ----------------------------------------------------------------------------- helpers


def _is_thread_x_reduce(it) -> bool:
    return it.kind == "reduce" and it.annotation == "threadIdx.x"


def has_cross_thread_reduction(state, sid: int) -> bool:
    """The stage, or a stage attached to it, binds a reduce loop to threadIdx.x (TVM
    ``HasCrossThreadReduction``)."""
    if any(_is_thread_x_reduce(it) for it in state.stages[sid].iters):
        return True
    for (tid, _), attached in su.attached_map(state).items():
        if tid == sid:
            for a in attached:
                if any(_is_thread_x_reduce(it) for it in state.stages[a].iters):
                    return True
    return False


def _root_name(iter_name: str) -> str:
    """``rx.0`` -> ``rx`` (the original axis a split part comes from)."""
    head, dot, tail = iter_name.rpartition(".")
    return head if dot and tail.isdigit() else iter_name


def last_reduce_iter_in_outermost_reduce_tile(stage):
    """The first reduce iterator (in loop order) by which every original reduce axis has been
    seen: ``k.0`` for matmul, ``rc.0`` after ``ry.0 rx.0`` for conv2d. None without reduce."""
    want = {it.name for it in stage.root_iters if it.kind == "reduce"}
    seen = set()
    for it in stage.iters:
        if it.kind == "reduce":
            seen.add(_root_name(it.name))
            if want <= seen:
                return it
    return None


def _fusible_consumer(state, sid: int) -> int | None:
    """The consumer a tiled stage fuses into: TVM's single elementwise chain, or an inlined
    elementwise fan-in (:func:`~autosched.search.state_utils.elementwise_fan_in_consumer`)."""
    tid = su.has_single_elementwise_consumer(state, sid)
    return tid if tid is not None else su.elementwise_fan_in_consumer(state, sid)


def shared_row_target(state, sid: int) -> tuple[int, int] | None:
    """``(target stage id, split step id)`` when stage ``sid`` has several consumers that are
    all one target stage or attached into it, and that target's last loop was split and bound
    to threadIdx.x by an earlier cross-thread fusion (the split step's id); else None.

    Layer norm's ``sum`` is read by ``sqsum`` and by the normalisation: once ``sqsum`` is
    computed inside the normalisation's row loop, ``sum`` can join it there, and the whole
    layer norm is one kernel (a block per row) instead of two or three."""
    cons = su.consumer_ids(state, sid)
    if len(cons) < 2:
        return None
    roots = set()
    for c in cons:
        stage = state.stages[c]
        if stage.compute_at == "iter":
            roots.add(state.stage_id(stage.attach[0]))
        elif stage.compute_at == "root":
            roots.add(c)
        else:
            return None
    if len(roots) != 1:
        return None
    (tid,) = roots
    target = state.stages[tid]
    if not target.iters or target.iters[-1].annotation != "threadIdx.x":
        return None
    for k in range(len(state.steps) - 1, -1, -1):
        step = state.steps[k]
        if isinstance(step, st.SplitStep) and step.stage_id == tid:
            return tid, k
    return None


def _reads_directly(state, consumer: int, producer: int) -> bool:
    names = {op.name for op in su.current_dag(state).producers(state.stages[consumer].name)}
    return state.stages[producer].name in names


# ----------------------------------------------------------------------------- rules


def shared_row_align(dtype: str) -> tuple[int, int] | None:
    """``(factor, offset)`` of the ``storage_align`` that makes each row of a ``.shared`` copy
    an odd number of 4-byte banks long, or None for 8-byte elements.

    The multiply loop reads a column of the copy: consecutive threads take consecutive rows at
    one k. A row of k-tile elements is typically a multiple of 8 floats long (24 in bert's
    dense), so 32 threads hit 4 of the 32 banks: an 8-way conflict, and the loop runs at the
    shared-memory port's pace. With an odd row length in banks, each thread of a warp reads
    its own bank; the cost is at most one bank word a row."""
    size = itemsize(dtype)
    if size > 4:
        return None
    words = 4 // size  # elements a bank word holds
    return 2 * words, words


class AddCacheRead(SketchRule):
    """Inputs of a tiled stage get a ``.shared`` copy attached at the outer reduce tile."""

    name = "AddCacheRead"

    def meet_condition(self, ctx, state, sid):
        if state.stages[sid].name.endswith(".shared"):
            return SKIP
        cons = su.consumer_ids(state, sid)
        if not cons:
            return SKIP
        tid = cons[0]
        if not su.needs_multi_level_tiling(state, tid):
            return SKIP
        if has_cross_thread_reduction(state, tid):
            return SKIP
        if not _reads_directly(state, tid, sid):
            return SKIP
        if last_reduce_iter_in_outermost_reduce_tile(state.stages[tid]) is None:
            return SKIP
        return APPLY_AND_SKIP_REST

    def apply(self, ctx, state, sid):
        s = state.copy()
        targets = [
            state.stages[c].name
            for c in su.consumer_ids(state, sid)
            if su.needs_multi_level_tiling(state, c)
            and _reads_directly(state, c, sid)
            and last_reduce_iter_in_outermost_reduce_tile(state.stages[c]) is not None
        ]
        double_buffer = getattr(ctx.params, "gpu_simt_double_buffer", False)
        padding = getattr(ctx.params, "gpu_shared_padding", True)
        for cname in targets:
            shared = s.cache_read(sid, "shared", [cname])
            pos = last_reduce_iter_in_outermost_reduce_tile(s[cname])
            s.compute_at(shared.name, cname, pos.name)
            align = shared_row_align(s[shared.name].op.dtype) if padding else None
            if align is not None and len(s[shared.name].iters) >= 2:
                s.storage_align(shared.name, s[shared.name].iters[-2].name, *align)
            # once per loop: the consumer's second input finds the pragma there
            if double_buffer and (pos.name, "double_buffer") not in s[cname].pragmas:
                s.pragma(cname, pos.name, "double_buffer")
        return [(s, sid)]


class AlwaysInlineGPU(SketchRule):
    """GPU inlines every inlinable stage (not only the strictly inlinable ones)."""

    name = "AlwaysInline"

    def meet_condition(self, ctx, state, sid):
        s = state.stages[sid]
        if s.is_placeholder or su.is_output(state, sid) or su.has_reduce_iter(s):
            return SKIP
        if su.is_tiled(s) or s.compute_at != "root":
            return SKIP
        return APPLY_AND_SKIP_REST

    def apply(self, ctx, state, sid):
        s = state.copy()
        try:
            s.compute_inline(sid)
        except ScheduleError:
            return [(state, sid - 1)]  # not inlinable after all: leave it at root
        return [(s, sid - 1)]


_TENSOR_CORE_RULE = MultiLevelTilingTensorCore()


class CrossThreadReduction(SketchRule):
    """Reductions with little spatial work (fewer outputs than reduced values, or at most a
    block's worth of outputs): fuse the reduce loops, split by the warp size and bind the inner
    part to threadIdx.x (a cross-thread reduction when lowered). When the single consumer
    shares outer loops and needs no tiling (softmax normalisation), the reduction is computed
    inside the consumer, whose last loop gets the same thread split; when that consumer's loops
    are exactly the reduction's outputs (a GEMV's cast, bias and activation), inside its
    innermost loop: a block per output, one kernel."""

    name = "CrossThreadReduction"

    def meet_condition(self, ctx, state, sid):
        s = state.stages[sid]
        if s.is_placeholder or s.compute_at != "root" or su.is_tiled(s):
            return SKIP
        if su.has_cache_write_stage(state, sid) or not su.has_reduce_iter(s):
            return SKIP
        space, reduce = su._space_reduce_len(s)
        if su.needs_multi_level_tiling(state, sid):
            if space > ctx.max_threads_per_block:
                return SKIP
            if space < reduce:
                return APPLY  # TVM's condition
            # We also try it (beside the tiled sketch: APPLY keeps both) where more than a
            # warp's worth is reduced: a tiled sketch of at most max_threads_per_block outputs
            # runs that many threads on the whole device (a batch-1 classifier, 1000 x 512, ran
            # as 25 blocks of 40 threads: 13 us on an H100). Not where tensor cores take it,
            # nor on GPUs without warps (Mali reports a warp size of 1: a block of one thread).
            if (
                1 < ctx.warp_size < reduce
                and _TENSOR_CORE_RULE.meet_condition(ctx, state, sid) == SKIP
            ):
                return APPLY
            return SKIP
        if reduce > 1:
            return APPLY if reduce > ctx.warp_size else SKIP
        return SKIP

    def apply(self, ctx, state, sid):
        stage = state.stages[sid]
        s = state.copy()
        red = [it.name for it in stage.iters if it.kind == "reduce"]
        if [it.kind for it in stage.iters] != ["spatial"] * (len(stage.iters) - len(red)) + [
            "reduce"
        ] * len(red):
            return [(state, sid - 1)]  # reduce loops not innermost: leave it
        fused = s.fuse(sid, red).name if len(red) > 1 else red[0]
        cons = su.consumer_ids(state, sid)
        dag = su.current_dag(state)
        row = shared_row_target(state, sid)
        if row is not None:
            tid, split_id = row
            common = dag.num_common_outer_iterators(stage.name, state.stages[tid].name)
            if 0 < common < len(state.stages[tid].iters) - 1:
                parts = s.follow_split(sid, fused, split_id, 1)
                s.bind(sid, parts[1].name, "threadIdx.x")
                s.compute_at(sid, tid, s[tid].iters[common - 1].name)
                return [(s, sid - 1)]
        tid = cons[0] if len(cons) == 1 else None
        common = dag.num_common_outer_iterators(stage.name, state.stages[tid].name) if tid else 0
        target = state.stages[tid] if tid is not None else None
        joins = (  # an elementwise consumer sharing outer loops: the reduction goes inside it
            target is not None
            and common > 0
            and not su.needs_multi_level_tiling(state, tid)
            and not su.is_tiled(target)
            and not su.has_reduce_iter(target)
            and target.compute_at == "root"
        )
        if joins and common < len(target.iters):
            # Softmax's normalisation: its last loop gets the reduction's thread split.
            last = target.iters[-1].name
            s.split(tid, last, [ctx.warp_size])
            split_id = len(s.steps) - 1
            s.bind(tid, s[tid].iters[-1].name, "threadIdx.x")
            parts = s.follow_split(sid, fused, split_id, 1)
            s.bind(sid, parts[1].name, "threadIdx.x")
        else:
            parts = s.split(sid, fused, [ctx.warp_size])
            s.bind(sid, parts[1].name, "threadIdx.x")
        if joins:
            # With every consumer loop shared (a GEMV's cast, bias, activation), inside its
            # innermost loop: one block per output, one kernel (the value in shared memory).
            s.compute_at(sid, tid, s[tid].iters[common - 1].name)
        return [(s, sid - 1)]


class AddCacheWriteGPU(SketchRule):
    """A tiled stage without a fusible consumer computes into a ``.local`` stage (GPU: the
    only variant), which the fusion rule then tiles."""

    name = "AddCacheWrite"

    def meet_condition(self, ctx, state, sid):
        if (
            su.needs_multi_level_tiling(state, sid)
            and not su.has_cache_write_stage(state, sid)
            and _fusible_consumer(state, sid) is None
        ):
            return APPLY_AND_SKIP_REST
        return SKIP

    def apply(self, ctx, state, sid):
        s = state.copy()
        s.cache_write(sid, "local")
        return [(s, sid)]


class MultiLevelTilingWithFusionGPU(SketchRule):
    """``SSSRRSRS`` tiling, the consumer follows the first three spatial levels (block,
    vthread, thread) and the tiled stage is computed at the consumer's thread level."""

    name = "MultiLevelTilingWithFusion"

    def meet_condition(self, ctx, state, sid):
        if not su.needs_multi_level_tiling(state, sid):
            return SKIP
        if _fusible_consumer(state, sid) is None:
            return SKIP
        return APPLY_AND_SKIP_REST

    def apply(self, ctx, state, sid):
        tid = _fusible_consumer(state, sid)
        base, split_ids = do_multi_level_tiling(state, sid, ctx.tiling_structure)
        level = 3
        s = follow_tiling(base, tid, split_ids, level)
        target_iter = s.stages[tid].iters[level * len(split_ids) - 1]
        s.compute_at(sid, tid, target_iter.name)
        return [(s, sid - 1)]


def gpu_rules() -> list[SketchRule]:
    """The GPU rule list in TVM's order (without SpecialComputeLocationGPU)."""
    return [
        AddCacheRead(),
        AlwaysInlineGPU(),
        SimplifyComputeWithConstTensor(),
        CrossThreadReduction(),
        MultiLevelTilingWarpgroup(),
        MultiLevelTilingTensorCore(),
        AddCacheWriteGPU(),
        MultiLevelTilingWithFusionGPU(),
        MultiLevelTiling(),
        SkipStage(),
    ]
