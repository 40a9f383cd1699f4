"""Random annotation of GPU sketches and the GPU validity check (notes 4.1, 4.4, 4.6, 6.1).

``sample_state_gpu`` applies, in TVM's order, InitFillTileSize (here warp-aware, see
:func:`init_fill_tile_size_gpu`), InitThreadBind and InitUnroll, then lowers the state and
drops it when :func:`gpu_state_errors` finds a problem (threads per block, shared / local
memory, vthread extent ... from ``task.hardware_params.as_limits()``), so that the search
only ever scores launchable candidates.

Every rule takes ``(ctx, state, rng)`` and returns a new State (never mutates its input).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tensorir import steps as st
from tensorir.bounds import LowerError
from tensorir.dtype import itemsize
from tensorir.passes.double_buffer import MAX_STAGES, PIPELINE_PRAGMAS, pipelined_shared_limit
from tensorir.steps import ScheduleError

from . import state_utils as su
from .sketch_rules_tensor_core import pipeline_depth
from .sketch_rules_warpgroup import is_warpgroup_state
from .tiling import AnnotateContext, factorization_schemes

__all__ = [
    "GPUAnnotateContext",
    "gpu_context",
    "gpu_state_errors",
    "init_fill_tile_size_gpu",
    "init_pipeline_depth",
    "pipeline_depth_choices",
    "init_thread_bind",
    "init_unroll_gpu",
    "block_shared_bytes",
    "is_valid_gpu_state",
    "threads_fill_warps",
    "sample_state_gpu",
    "shared_bytes_per_kernel",
    "spatial_split_step_ids",
    "store_tile_bytes",
]


@dataclass(frozen=True)
class GPUAnnotateContext(AnnotateContext):
    """:class:`AnnotateContext` plus the GPU's limits."""

    hw: object = None  # HardwareParams

    @property
    def warp(self) -> int:
        return self.hw.gpu_value("warp_size")

    @property
    def max_threads(self) -> int:
        return self.hw.gpu_value("max_threads_per_block")

    @property
    def max_vthread(self) -> int:
        return self.hw.gpu_value("max_vthread_extent")

    @property
    def unroll_configs(self) -> tuple[int, ...]:
        return self.params.auto_unroll_configs_gpu


def gpu_context(task, params) -> GPUAnnotateContext:
    return GPUAnnotateContext(
        task.compute_dag, task.hardware_params.num_cores or 1, params, task.hardware_params
    )


def _n_space_levels(ctx) -> int:
    return sum(c in "sS" for c in ctx.params.gpu_multi_level_tiling_structure)


# ----------------------------------------------------------------------------- tile sizes


def init_fill_tile_size_gpu(ctx, state, rng, tries: int = 64):
    """Fill every undefined split with an exact factorization (as InitFillTileSize), choosing
    the multi-level tiling splits of a stage jointly so that the vthread level (product of
    ``lengths[0]``) stays within ``max_vthread_extent`` and the threadIdx level (product of
    ``lengths[1]``) within ``max_threads_per_block``, preferring thread counts that are
    multiples of the warp size (at least one warp when the stage has that many points)."""
    steps = list(state.steps)
    max_inner = ctx.params.max_innermost_split_factor
    n_tile = _n_space_levels(ctx) - 1
    groups: dict[int, list[int]] = {}
    undefined = []
    for k, step in enumerate(steps):
        if isinstance(step, st.SplitStep) and None in step.lengths:
            if not step.extent:
                raise ScheduleError(f"split step {k} has no known extent to factorize")
            if len(step.lengths) == n_tile:
                groups.setdefault(step.stage_id, []).append(k)
            else:
                undefined.append(k)
    if not groups and not undefined:
        return state

    def draw(k):
        step = steps[k]
        cands = factorization_schemes(step.extent, len(step.lengths), max_inner)
        if not cands:
            raise ScheduleError(f"split step {k}: no factorization of {step.extent}")
        return cands[rng.randrange(len(cands))]

    chosen = {k: draw(k) for k in undefined}
    for ids in groups.values():
        points = math.prod(steps[k].extent for k in ids)
        best, best_score = None, -1
        for _ in range(tries):
            pick = {k: draw(k) for k in ids}
            vt = math.prod(p[0] for p in pick.values())
            th = math.prod(p[1] for p in pick.values())
            if vt > ctx.max_vthread or th > ctx.max_threads:
                score = 0
            elif th % ctx.warp == 0:
                score = 3
            elif th >= ctx.warp or points <= 2 * ctx.warp:
                score = 2
            else:
                score = 1
            if score > best_score:
                best, best_score = pick, score
            if score == 3:
                break
        chosen.update(best)
    for k, lengths in chosen.items():
        step = steps[k]
        steps[k] = st.SplitStep(step.stage_id, step.iter_id, step.extent, tuple(lengths),
                                step.inner_to_outer)  # fmt: skip
    return su.replay_steps(ctx.dag, steps)


# ----------------------------------------------------------------------------- thread binding


def spatial_split_step_ids(state, sid: int, n_lengths: int) -> list[int]:
    """Ids of the SplitSteps (in step order) that split spatial loops of stage ``sid`` into
    ``n_lengths + 1`` parts (the multi-level tiling splits)."""
    steps = state.steps
    out = []
    for k, step in enumerate(steps):
        if (
            isinstance(step, st.SplitStep)
            and len(step.lengths) == n_lengths
            and su.target_stage_id_in_state(steps, k) == sid
        ):
            out.append(k)
    return out


def _tiling_roots(state) -> dict[int, int]:
    """Root stage id -> the tiled stage attached to it (TVM's multi-level-tiling roots)."""
    ids = {s.name: k for k, s in enumerate(state.stages)}
    out = {}
    for k, s in enumerate(state.stages):
        if s.compute_at == "iter" and su.is_tiled(s) and su.needs_multi_level_tiling(state, k):
            out[ids[s.attach[0]]] = k
    return out


def _outer_space_iters(state, sid: int) -> list[str]:
    """Leading spatial, unannotated loops of a stage, up to the first one with attached
    stages (included), as TVM's FuseAllOuterSpaceIterators."""
    stage = state.stages[sid]
    amap = su.attached_map(state)
    out = []
    for k, it in enumerate(stage.iters):
        if it.kind != "spatial" or it.annotation != "none":
            break
        out.append(it.name)
        if (sid, k) in amap:
            break
    return out


def _fuse(s, sid, names):
    return s.fuse(sid, names).name if len(names) > 1 else names[0]


def init_thread_bind(ctx, state, rng, extents=None):
    """Bind every kernel's loops to blocks / vthreads / threads (TVM InitThreadBind).

    - Root stage with a cross-thread reduction (its own or an attached stage's): fuse the outer
      spatial loops -> blockIdx.x.
    - Tiling root: fuse the ``.0`` loops -> blockIdx.x, the ``.1`` -> vthread, the ``.2`` ->
      threadIdx.x.
    - Other root stages: fuse the outer spatial loops, split by a thread count (a multiple of
      the warp size; mutated later) and bind blockIdx.x / threadIdx.x.
    - ``.shared`` stages: cooperative fetching: fuse all loops, split off a vector part (width
      from {1, 2, 4...} up to ``vector_unit_bytes``; mutated later), split the rest by the
      thread count of the tiled stage (FFSP at level 1) and bind threadIdx.x.

    ``extents`` are bound-inferred extents of ``state`` (see :func:`state_utils.bound_extents`).
    """
    ext = extents if extents is not None else su.bound_extents(state)
    roots = _tiling_roots(state)
    n_tile = _n_space_levels(ctx) - 1
    s = state.copy()
    for sid in range(len(state.stages) - 1, -1, -1):
        stage = s.stages[sid]
        if stage.is_placeholder or stage.compute_at == "inline":
            continue
        if stage.compute_at == "root" and _has_xthread(s, sid):
            names = _outer_space_iters(s, sid)
            if names:
                s.bind(sid, _fuse(s, sid, names), "blockIdx.x")
            continue
        if any(it.annotation.startswith("threadIdx") for it in stage.iters):
            continue
        if stage.compute_at == "root" and (sid in roots or su.is_tiled(stage) and
                                           su.needs_multi_level_tiling(s, sid)):  # fmt: skip
            tiled = s.stages[roots.get(sid, sid)]
            n = sum(it.kind == "spatial" for it in tiled.root_iters)
            for level, tag in enumerate(("blockIdx.x", "vthread", "threadIdx.x")):
                names = [it.name for it in s.stages[sid].iters[level : level + n]]
                if not all(nm.endswith(f".{level}") for nm in names):
                    raise ScheduleError(f"stage {stage.name}: unexpected tiling {names}")
                fused = _fuse(s, sid, names)
                it = s.stages[sid].iters[level]
                if tag == "vthread" and it.extent > ctx.max_vthread:
                    raise ScheduleError(f"vthread extent {it.extent} > {ctx.max_vthread}")
                if tag == "threadIdx.x" and it.extent < ctx.warp:
                    points = math.prod(x.extent for x in stage.root_iters if x.kind == "spatial")
                    if points > 2 * ctx.warp:
                        raise ScheduleError(f"{it.extent} threads < warp size {ctx.warp}")
                s.bind(sid, fused, tag)
            continue
        if stage.compute_at == "root":
            names = _outer_space_iters(s, sid)
            if not names:
                continue
            total = math.prod(s.stages[sid].iters[s.stages[sid].iter_index(n)].extent
                              for n in names)  # fmt: skip
            fused = _fuse(s, sid, names)
            if total <= ctx.warp:
                s.bind(sid, fused, "threadIdx.x")
                continue
            choices = [ctx.warp * 2**i for i in range(6) if ctx.warp * 2**i <= ctx.max_threads]
            choices = [c for c in choices if c < total * 2] or [ctx.warp]
            threads = choices[rng.randrange(len(choices))]
            bx, tx = s.split(sid, fused, [threads])
            s.bind(sid, bx.name, "blockIdx.x")
            s.bind(sid, tx.name, "threadIdx.x")
            continue
        if stage.name.endswith(".shared") and stage.compute_at == "iter":
            target = s.stage_id(stage.attach[0])
            ids = spatial_split_step_ids(s, target, n_tile)
            if not ids:
                continue
            names = [it.name for it in stage.iters]
            extent = math.prod(ext[sid][nm] for nm in names)
            fused = _fuse(s, sid, names)
            elem = itemsize(stage.op.dtype)
            max_vec = max(1, (ctx.hw.vector_unit_bytes or 16) // elem)
            widths = [v for v in (1, 2, 4, 8, 16) if v <= max_vec and extent % v == 0]
            v = widths[rng.randrange(len(widths))]
            iid = s.stages[sid].iter_index(fused)
            s = su.replay_steps(ctx.dag, [*s.steps, st.SplitStep(sid, iid, extent, (v,))],
                                len(s.steps), s.stages)  # fmt: skip
            s.vectorize(sid, iid + 1)
            parts = s.follow_fused_split(sid, iid, ids, 1, True)
            s.bind(sid, parts[1].name, "threadIdx.x")
    return s


def _has_xthread(state, sid) -> bool:
    from .sketch_rules_gpu import has_cross_thread_reduction

    return has_cross_thread_reduction(state, sid)


def init_unroll_gpu(ctx, state, rng):
    """``auto_unroll_max_step`` from the GPU candidates on every stage with a reduction."""
    s = state.copy()
    cands = ctx.unroll_configs
    for sid, stage in enumerate(state.stages):
        if stage.is_placeholder or stage.compute_at == "inline":
            continue
        if su.has_reduce_iter(stage):
            value = cands[rng.randrange(len(cands))]
            s.pragma(sid, 0, f"auto_unroll_max_step${value}")
    return s


# ----------------------------------------------------------------------------- validity


def gpu_state_errors(task, state) -> list[str]:
    """Why ``state`` cannot run on the task's GPU (empty: it can).

    Lowers the state and checks it with :func:`tensorir.passes.verify_gpu.gpu_program_errors`
    against ``task.hardware_params.as_limits()``; a state that does not lower gives the
    lowering error. The verifier reads loops, buffers and launch extents only, so the
    lowering skips simplification, which halves the cost of checking each sampled or mutated
    state (the main cost of GPU search)."""
    from tensorir.lower import lower
    from tensorir.passes.verify_gpu import gpu_program_errors

    try:
        program = lower(state, simplify=False)
    except (LowerError, ScheduleError) as exc:
        return [f"lowering failed: {exc}"]
    return gpu_program_errors(program, task.hardware_params.as_limits())


def is_valid_gpu_state(task, state) -> bool:
    return not gpu_state_errors(task, state)


def threads_fill_warps(ctx, state) -> bool:
    """Every tiling root (a root stage with a vthread-bound loop) runs at least a warp of
    threads, unless its stage has at most two warps of points (InitThreadBind's rule, also
    applied after mutations)."""
    for stage in state.stages:
        if stage.compute_at != "root" or not any(it.annotation == "vthread" for it in stage.iters):
            continue
        for it in stage.iters:
            if it.annotation == "threadIdx.x" and it.extent < ctx.warp:
                points = math.prod(x.extent for x in stage.root_iters if x.kind == "spatial")
                if points > 2 * ctx.warp:
                    return False
    return True


def shared_bytes_per_kernel(state, bounded=None) -> dict[str, int]:
    """Root stage name -> bytes of the ``shared`` stages its kernel allocates per block, as
    the verifier counts them, from ``bounded``: the stages of ``state`` after bound inference
    (:func:`tensorir.bounds.infer_bound`; computed when None). Each stage counts its region
    with its rows padded as its ``storage_align`` pads them (what lowering allocates:
    :func:`tensorir.lower.aligned_strides`). Stages staged at a ``double_buffer`` loop count
    once: the tiles fit when they fit single-buffered (:func:`sample_state_gpu` falls back to
    that when the doubled staging does not). The tensor-core store tiles, allocated once
    whatever the pipeline, are :func:`store_tile_bytes`."""
    from tensorir.bounds import infer_bound
    from tensorir.lower import aligned_strides

    if bounded is None:
        bounded = infer_bound(state)
    by_name = {s.name: s for s in state.stages}
    out: dict[str, int] = {}
    for sid, stage in enumerate(state.stages):
        if stage.scope != "shared" or stage.compute_at != "iter":
            continue
        root = stage
        while root.compute_at == "iter":
            root = by_name[root.attach[0]]
        shape = [it.extent for it in bounded[sid].root_iters if it.kind == "spatial"]
        _, alloc = aligned_strides(shape, stage.storage_align, stage.name)
        out[root.name] = out.get(root.name, 0) + math.prod(alloc) * itemsize(stage.op.dtype)
    return out


def store_tile_bytes(state) -> dict[str, int]:
    """Root stage name -> the shared memory of its kernel's tensor-core store nests: one
    16x16 accumulator tile per warp (:func:`tensorir.passes.tensor_core.store_staging_bytes`),
    for the root stage that carries a ``tensor_core`` pragma (the store nest) over a stage
    with one and a reduction (the mma nest). The warps are the root stage's ``threadIdx.y``
    (and ``z``) loops, whose extents the state knows once its tile sizes are filled. Empty
    for kernels without fragments, and for warpgroup (wgmma) kernels."""
    from tensorir.passes.tensor_core import store_staging_bytes

    if is_warpgroup_state(state):  # wgmma tiles store from registers
        return {}

    by_name = {s.name: s for s in state.stages}
    acc_dtype: dict[str, str] = {}  # root stage -> the dtype of its fragment accumulator
    for stage in state.stages:
        if stage.compute_at == "iter" and su.has_tensor_core_pragma(stage):
            root = stage
            while root.compute_at == "iter":
                root = by_name[root.attach[0]]
            if su.has_reduce_iter(stage):
                acc_dtype[root.name] = stage.op.dtype
    out = {}
    for name, dtype in acc_dtype.items():
        stage = by_name[name]
        if su.has_tensor_core_pragma(stage):
            warps = math.prod(it.extent for it in stage.iters
                              if it.annotation in ("threadIdx.y", "threadIdx.z"))  # fmt: skip
            out[name] = store_staging_bytes(warps, dtype)
    return out


def block_shared_bytes(ctx, state) -> dict[str, int]:
    """:func:`shared_bytes_per_kernel` of a state whose tile sizes are filled but whose loops
    are not bound yet, counted per thread block as the verifier will count them.

    A ``shared`` stage is computed once per block, for every virtual thread and thread of
    it: bound inference relaxes the vthread- and threadIdx-bound loops around it. Before
    InitThreadBind those loops (the ``.1`` and ``.2`` tiling levels of the tiling roots) are
    plain loops, so the stage's own extents are one thread's tile, far below the block's
    (most of the samples rejected by the verifier were). Here bound inference runs on a copy
    of the stages whose loops are annotated as InitThreadBind will bind them (without fusing:
    bound inference only needs their kind), which gives the block's footprint without
    binding or lowering the state."""
    stages = list(state.stages)
    for sid, marks in _block_marks(state):
        iters = tuple(it.__class__(it.name, it.extent, it.kind, marks.get(k, it.annotation))
                      for k, it in enumerate(stages[sid].iters))  # fmt: skip
        stages[sid] = stages[sid].with_(iters=iters)
    from tensorir.bounds import infer_bound

    return shared_bytes_per_kernel(state, infer_bound((tuple(stages), state.dag)))


# Loop structure (names and kinds) of a sketch -> the annotations block_shared_bytes gives its
# stages: filling tile sizes changes extents only, so this is computed once per sketch.
_MARKS: dict = {}


def _block_marks(state) -> list[tuple[int, dict[int, str]]]:
    key = tuple(
        (st_.name, st_.compute_at, st_.attach, tuple((it.name, it.kind) for it in st_.iters),
         tuple(it.kind for it in st_.root_iters))
        for st_ in state.stages
    )  # fmt: skip
    marks = _MARKS.get(key)
    if marks is None:
        roots = _tiling_roots(state)
        marks = []
        for sid, stage in enumerate(state.stages):
            if stage.compute_at != "root" or not (
                sid in roots or su.is_tiled(stage) and su.needs_multi_level_tiling(state, sid)
            ):
                continue
            n = sum(it.kind == "spatial" for it in state.stages[roots.get(sid, sid)].root_iters)
            marks.append((sid, {k: tag for level, tag in ((1, "vthread"), (2, "threadIdx.x"))
                                for k in range(level * n, (level + 1) * n)}))  # fmt: skip
        if len(_MARKS) > 4096:
            _MARKS.clear()
        _MARKS[key] = marks
    return marks


def pipeline_depth_choices(ctx, state, shared: int | None = None) -> list[int]:
    """The stages (2 up to :func:`~autosched.search.sketch_rules_tensor_core.pipeline_depth`)
    a state with a software-pipeline pragma may be given: those whose N copies of the staged
    tiles (``shared`` bytes per block single-buffered, :func:`block_shared_bytes` when None)
    and the store tiles once (:func:`store_tile_bytes`) fit in
    the shared memory a pipelined kernel may use (the device's opt-in where it has one, as
    the verifier allows: :func:`tensorir.passes.double_buffer.pipelined_shared_limit`; its
    tiles are drawn to fit ``max_shared_memory_per_block`` once, as every kernel's, and the
    opt-in pays for the deeper pipeline), and at most the k tiles of the pipelined loop (a
    deeper pipeline loads them all in its prologue: the same code, in more shared memory). 2
    is always offered (the verifier judges it, and :func:`sample_state_gpu` falls back to
    single buffering); a warpgroup (wgmma) state may have one stage more, up to
    :data:`~tensorir.passes.double_buffer.MAX_STAGES`, when 3 or more are allowed (the stage
    its lagging pipeline spends on the products in flight). Empty without such a pragma."""
    ids = su.pipeline_steps(state.steps)
    if not ids:
        return []
    hw = ctx.hw
    top = pipeline_depth(ctx)
    if top >= 3 and is_warpgroup_state(state):
        # A warpgroup pipeline of 3+ stages lags a tile (tensorir.passes.double_buffer): its
        # last buffer holds the products in flight, so it may have one more.
        top = min(top + 1, MAX_STAGES)
    limit = pipelined_shared_limit(
        hw.max_shared_memory_per_block, hw.max_shared_memory_per_block_optin
    )
    stage = state.stages[state.steps[ids[0]].stage_id]
    # The k-tile loop is a reduce loop: its extent does not depend on where the stage is
    # attached (which leaves the stage's own extents unknown), only on the splits of k.
    ext = st.derive_extents(stage, {it.name: it.extent for it in stage.root_iters})
    tiles = [ext.get(name) for name, p in stage.pragmas if p in PIPELINE_PRAGMAS]
    tiles = [t for t in tiles if isinstance(t, int)]
    top = min(top, *tiles) if tiles else top
    if top > 2 and shared is None and limit:
        shared = max(block_shared_bytes(ctx, state).values(), default=0)
    fixed = max(store_tile_bytes(state).values(), default=0) if top > 2 and limit else 0
    return [n for n in range(2, top + 1) if n == 2 or not limit or n * shared + fixed <= limit]


def init_pipeline_depth(ctx, state, rng, shared: int | None = None):
    """``state`` (tile sizes filled, loops not bound yet) with its software pipeline given a
    depth drawn uniformly from :func:`pipeline_depth_choices`; ``state`` itself when that is
    2 (the sketch's ``double_buffer``) or there is no choice to make (no pragma, or a search
    whose ``gpu_tensor_core_pipeline`` is 1 or 2: then no number is drawn from ``rng``)."""
    choices = pipeline_depth_choices(ctx, state, shared)
    if len(choices) < 2:
        return state
    n = choices[rng.randrange(len(choices))]
    return state if n == su.pipeline_stages(state) else su.with_pipeline_stages(state, n)


def sample_state_gpu(ctx, sketch, rng, task=None, fill_tries: int = 8):
    """One concrete, verified GPU state from ``sketch``, or None when invalid.

    Tile sizes whose shared cache stages (:func:`block_shared_bytes`) and tensor-core store
    tiles (:func:`store_tile_bytes`) exceed ``max_shared_memory_per_block`` per thread block
    are redrawn, up to ``fill_tries`` times, before binding and lowering: the tile sizes are
    drawn from the same distribution, conditioned on fitting, and the verifier after lowering
    stays the judge of every other limit. The software
    pipeline's stages are drawn among those that fit (:func:`init_pipeline_depth`). A
    pipelined state the verifier refuses (its N copies of the staging over the limit,
    typically) is tried once more with 2 stages when it had more, then single-buffered
    (:func:`~autosched.search.state_utils.single_buffered`): the search keeps every tile size
    it had before the pipeline and pipelines those that fit."""
    limit = ctx.hw.max_shared_memory_per_block
    try:
        for _ in range(fill_tries):
            s = init_fill_tile_size_gpu(ctx, sketch, rng)
            if not limit:
                shared = None
                break
            staged = block_shared_bytes(ctx, s)
            shared = max(staged.values(), default=0)
            stores = store_tile_bytes(s)
            if all(staged.get(k, 0) + stores.get(k, 0) <= limit for k in {*staged, *stores}):
                break
        else:
            return None
        s = init_pipeline_depth(ctx, s, rng, shared)
        ext = su.bound_extents(s)
        s = init_thread_bind(ctx, s, rng, ext)
        s = init_unroll_gpu(ctx, s, rng)
    except (ScheduleError, LowerError):
        return None
    if task is not None and gpu_state_errors(task, s):
        for fallback in ([2] if su.pipeline_stages(s) > 2 else []) + [1]:
            s2 = su.with_pipeline_stages(s, fallback)
            if s2 is not None and not gpu_state_errors(task, s2):
                return s2
        return None
    return s
