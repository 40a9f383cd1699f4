"""Mutation rules of the evolutionary search (CPU and GPU, notes 5.5).

``mutate`` picks one rule by weight (``SearchParams.mutate_*_weight``) and returns the
mutated State, or None when the rule does not apply or the result is invalid (TVM's
``kInvalid``: the search simply draws again). Each rule changes one step of the history and
replays the steps on the task's DAG, so the result is a consistent State.

GPU tasks use tile-size (0.90) and auto-unroll (0.10) mutations, and the pipeline-depth one
(0.05) on states with a software pipeline whose search may choose its depth; a mutated GPU state
is returned only when it passes ``verify_gpu_program`` (see :mod:`autosched.search.annotate_gpu`).
"""

from __future__ import annotations

from tensorir import steps as st
from tensorir.bounds import LowerError
from tensorir.steps import ScheduleError

from . import state_utils as su
from .params import SearchParams
from .sketch_rules_tensor_core import pipeline_depth
from .tiling import AnnotateContext, as_random, divisors

__all__ = [
    "mutate",
    "mutate_auto_unroll",
    "mutate_compute_location",
    "mutate_parallel",
    "mutate_pipeline_depth",
    "mutate_tile_size",
]

_STAGE_CHANGING = (st.CacheWriteStep, st.CacheReadStep, st.RfactorStep)


def mutate_tile_size(ctx, state, rng):
    """Move a random divisor from one tile length of a split to another (innermost stays
    ``<= max_innermost_split_factor``, or the block's thread limit for the thread split of a
    cross-thread reduction; an innermost length the sketch fixed, the vpdpbusd tiles of
    :func:`state_utils.has_fixed_innermost`, stays as it is)."""
    steps = state.steps
    tile_cap = ctx.params.max_innermost_split_factor
    ids = [
        k
        for k, s in enumerate(steps)
        if isinstance(s, st.SplitStep)
        and s.extent
        and s.extent > 1
        and None not in s.lengths
        # only a split past the tile cap needs the (costlier) cross-thread check
        and (s.lengths[-1] <= tile_cap or s.lengths[-1] <= _innermost_cap(ctx, state, k))
    ]
    if not ids:
        return None
    step_id = ids[rng.randrange(len(ids))]
    max_inner = _innermost_cap(ctx, state, step_id)
    ps = steps[step_id]
    lengths = [1, *ps.lengths]
    inner = 1
    for x in ps.lengths:
        inner *= x
    lengths[0] = ps.extent // inner
    movable = len(lengths) - 1 if su.has_fixed_innermost(state, step_id) else len(lengths)
    if movable < 2:
        return None
    perm = list(range(movable))
    rng.shuffle(perm)
    for i, src in enumerate(perm):
        if lengths[src] <= 1:
            continue
        dst = perm[(i + 1) % len(perm)]
        factors = divisors(lengths[src])  # factors[0] == 1
        if dst == len(lengths) - 1:
            top = len(factors) - 1
            while top >= 1 and factors[top] * lengths[dst] > max_inner:
                top -= 1
            if top == 0:
                continue
            d = factors[1 + rng.randrange(top)]
        else:
            d = factors[1 + rng.randrange(len(factors) - 1)]
        new = list(lengths)
        new[src] //= d
        new[dst] *= d
        new_step = st.SplitStep(ps.stage_id, ps.iter_id, ps.extent, tuple(new[1:]),
                                ps.inner_to_outer)  # fmt: skip
        return _replay_with(ctx, steps, step_id, new_step)
    return None


def _innermost_cap(ctx, state, step_id: int) -> int:
    """The largest innermost length split ``step_id`` may get: ``max_innermost_split_factor``
    (a register or loop tile), except for the thread split of a cross-thread reduction
    (:func:`state_utils.is_cross_thread_split`), a thread count: up to the block's limit. At
    most 64 threads left each 768-wide row of bert-base's layer norm 12 serial loads a pass
    per thread in a block of two warps; with the split-K sum recomputed in the norm, 384
    threads took 5.53 us where 64 took 6.24 (H100, benchmarks/bench_row_threads.py)."""
    cap = ctx.params.max_innermost_split_factor
    max_threads = getattr(ctx, "max_threads", 0)  # GPU contexts only
    if max_threads and su.is_cross_thread_split(state, step_id):
        return max(cap, max_threads)
    return cap


def mutate_auto_unroll(ctx, state, rng):
    """Give a random ``auto_unroll_max_step`` pragma another candidate value (TVM may draw
    the same value again; a no-op mutation only wastes a slot, so it is excluded)."""
    steps = state.steps
    ids = [
        k
        for k, s in enumerate(steps)
        if isinstance(s, st.PragmaStep) and s.pragma_type.startswith("auto_unroll_max_step")
    ]
    if not ids:
        return None
    step_id = ids[rng.randrange(len(ids))]
    ps = steps[step_id]
    old = ps.pragma_type.partition("$")[2]
    cands = [v for v in ctx.unroll_configs if str(v) != old]
    if not cands:
        return None
    value = cands[rng.randrange(len(cands))]
    new_step = st.PragmaStep(ps.stage_id, ps.iter_id, f"auto_unroll_max_step${value}")
    return _replay_with(ctx, steps, step_id, new_step)


def mutate_pipeline_depth(ctx, state, rng):
    """Give the software pipeline (``double_buffer`` / ``software_pipeline_<N>`` pragmas,
    :mod:`tensorir.passes.double_buffer`) another number of stages among those that fit
    (:func:`~autosched.search.annotate_gpu.pipeline_depth_choices`); None when there is no
    pipeline or no other choice."""
    from .annotate_gpu import pipeline_depth_choices, shared_bytes_per_kernel

    now = su.pipeline_stages(state)
    if not now:
        return None
    try:  # the loops are bound: bound inference gives the block's footprint
        shared = max(shared_bytes_per_kernel(state).values(), default=0)
    except (ScheduleError, LowerError):
        return None
    cands = [n for n in pipeline_depth_choices(ctx, state, shared) if n != now]
    if not cands:
        return None
    try:
        return su.with_pipeline_stages(state, cands[rng.randrange(len(cands))])
    except ScheduleError:
        return None


def mutate_compute_location(ctx, state, rng):
    """Re-attach a random non-tiled stage's compute_at step to another candidate location."""
    if ctx.params.disable_change_compute_location:
        return None
    steps = state.steps
    ids = []
    for k, s in enumerate(steps):
        if isinstance(s, st.ComputeAtStep):
            sid = su.target_stage_id_in_state(steps, k)
            if su.is_tiled(state.stages[sid]) or su.needs_multi_level_tiling(state, sid):
                continue
            ids.append(k)
    if not ids:
        return None
    step_id = ids[rng.randrange(len(ids))]
    ps = steps[step_id]
    inc = su.target_stage_id_in_state(steps, step_id) - ps.stage_id
    cands = su.get_compute_location_candidates(state, ps.stage_id + inc)
    # candidates index the final state; exclude the current location (a no-op)
    cands = [c for c in cands if (c[0] - inc, c[1]) != (ps.target_stage_id, ps.target_iter_id)]
    if not cands:
        return None
    tid, iid = cands[rng.randrange(len(cands))]
    new_step = st.ComputeAtStep(ps.stage_id, tid - inc, iid)
    out = _replay_with(ctx, steps, step_id, new_step)
    if out is None:
        return None
    try:
        su.bound_extents(out)  # the new location must admit bound inference
    except (ScheduleError, LowerError):
        return None
    return out


def mutate_parallel(ctx, state, rng):
    """Re-fuse a different number of outer loops before a ``fuse -> parallel`` pair."""
    steps = state.steps
    ids = [
        k
        for k, s in enumerate(steps)
        if isinstance(s, st.AnnotationStep)
        and s.annotation == "parallel"
        and s.iter_id == 0
        and k > 0
        and isinstance(steps[k - 1], st.FuseStep)
        and steps[k - 1].fused_ids[0] == 0
    ]
    if not ids:
        return None
    step_id = ids[rng.randrange(len(ids))]
    fuse = steps[step_id - 1]
    sid = fuse.stage_id
    try:
        prefix = su.replay_steps(ctx.dag, steps[: step_id - 1])
    except ScheduleError:
        return None
    stage = prefix.stages[sid]
    amap = su.attached_map(prefix)
    max_fusable = 0
    while max_fusable < len(stage.iters):
        it = stage.iters[max_fusable]
        if it.kind != "spatial" or it.annotation != "none" or (sid, max_fusable) in amap:
            break
        max_fusable += 1
    if max_fusable == 0:
        return None
    m = 1 + rng.randrange(max_fusable)
    offset = fuse.fused_ids[-1] - (m - 1)
    if offset == 0:
        return None
    new_steps = list(steps[: step_id - 1])
    new_steps += [st.FuseStep(sid, tuple(range(m))), steps[step_id]]
    for s in steps[step_id + 1 :]:
        if isinstance(s, _STAGE_CHANGING):
            return None  # later stage ids would need remapping too (TVM gives up as well)
        if s.stage_id == sid:
            if isinstance(s, st.AnnotationStep):
                s = st.AnnotationStep(sid, s.iter_id + offset if s.iter_id else 0, s.annotation)
            elif isinstance(s, st.PragmaStep):
                s = st.PragmaStep(sid, s.iter_id + offset if s.iter_id else 0, s.pragma_type)
            else:
                return None
        elif isinstance(s, st.ComputeAtStep) and s.target_stage_id == sid:
            return None
        new_steps.append(s)
    try:
        return su.replay_steps(ctx.dag, new_steps, step_id - 1, prefix.stages)
    except ScheduleError:
        return None


def _replay_with(ctx, steps, step_id, new_step):
    new_steps = list(steps)
    new_steps[step_id] = new_step
    try:
        return su.replay_steps(ctx.dag, new_steps)
    except ScheduleError:
        return None


RULES = (
    ("mutate_tile_size_weight", mutate_tile_size),
    ("mutate_auto_unroll_weight", mutate_auto_unroll),
    ("mutate_compute_location_weight", mutate_compute_location),
    ("mutate_parallel_weight", mutate_parallel),
)


def mutate(task, state, rng, params: SearchParams | None = None):
    """Apply one mutation rule chosen by weight.

    Parameters
    ----------
    task : SearchTask
    state : State
        A concrete state (from sampling or an earlier mutation).
    rng : random.Random, int or numpy Generator
    params : SearchParams, optional
        Rule weights and limits.

    Returns
    -------
    State or None
        The mutated state, or None when the chosen rule found nothing to change or produced
        an invalid state.
    """
    rng = as_random(rng)
    params = params or SearchParams()
    if task.target.is_gpu:
        return _mutate_gpu(task, state, rng, params)
    ctx = AnnotateContext(task.compute_dag, task.hardware_params.num_cores or 1, params)
    return _pick_rule(RULES, params, rng)(ctx, state, rng)


def _pick_rule(rules, params, rng):
    """One rule of ``rules`` (``(weight attribute of params, rule)`` pairs), drawn by weight."""
    weights = [getattr(params, w) for w, _ in rules]
    x = rng.random() * sum(weights)
    for w, (_, rule) in zip(weights, rules):
        if x < w:
            return rule
        x -= w
    return rules[-1][1]


GPU_RULES = (
    ("mutate_tile_size_weight", mutate_tile_size),
    ("mutate_auto_unroll_weight_gpu", mutate_auto_unroll),
)


def _mutate_gpu(task, state, rng, params):
    """GPU: tile sizes (also the thread and cooperative-fetch vector splits), the unroll
    pragma and the software pipeline's depth (only offered to states that have one to
    change, so the other states draw as before); the result must still fill a warp per tiling
    root and pass the verifier."""
    from .annotate_gpu import gpu_context, gpu_state_errors, threads_fill_warps

    ctx = gpu_context(task, params)
    rules = GPU_RULES
    if su.pipeline_stages(state) and pipeline_depth(ctx) > 2:  # else the rule has no choice
        rules = (*GPU_RULES, ("mutate_pipeline_depth_weight_gpu", mutate_pipeline_depth))
    out = _pick_rule(rules, params, rng)(ctx, state, rng)
    if out is None or not threads_fill_warps(ctx, out) or gpu_state_errors(task, out):
        return None
    return out
