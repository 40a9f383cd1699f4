"""Random annotation of sketches: the CPU init-population rules (notes 4.1-4.5).

``sample_init_population`` turns sketches into concrete states by applying, in TVM's order,
InitFillTileSize, InitChangeComputeLocation, InitParallel, InitUnroll and InitVectorization.
A sample whose steps are rejected (ScheduleError) or whose bounds cannot be inferred is
dropped, as TVM drops ``kInvalid`` results.

Every rule takes ``(ctx, state, rng)`` and returns a new State (never mutates its input).
"""

from __future__ import annotations

from tensorir import steps as st
from tensorir.bounds import LowerError
from tensorir.steps import ScheduleError

from . import state_utils as su
from .params import SearchParams
from .tiling import AnnotateContext, as_random, factorization_schemes

__all__ = [
    "init_change_compute_location",
    "init_fill_tile_size",
    "init_parallel",
    "init_unroll",
    "init_vectorization",
    "sample_init_population",
    "sample_state",
]


# ----------------------------------------------------------------------------- rules


def init_fill_tile_size(ctx, state, rng):
    """Give every undefined split a uniformly chosen exact factorization, then replay.

    Lengths the sketch fixed (ints among the Nones, e.g. the vpdpbusd tiles) are kept; the
    undefined ones factorize what they leave of the extent."""
    steps = list(state.steps)
    first = None
    for k, step in enumerate(steps):
        if isinstance(step, st.SplitStep) and None in step.lengths:
            if not step.extent:
                raise ScheduleError(f"split step {k} has no known extent to factorize")
            lengths = _fill_lengths(ctx, step, k, rng)
            steps[k] = st.SplitStep(step.stage_id, step.iter_id, step.extent, lengths,
                                    step.inner_to_outer)  # fmt: skip
            first = k if first is None else first
    if first is None:
        return state
    return su.replay_steps(ctx.dag, steps)


def _fill_lengths(ctx, step, k: int, rng) -> tuple[int, ...]:
    fixed = [x for x in step.lengths if x is not None]
    n_open = len(step.lengths) - len(fixed)
    extent = step.extent
    for x in fixed:
        if extent % x:
            raise ScheduleError(f"split step {k}: fixed length {x} does not divide {step.extent}")
        extent //= x
    # the innermost-length bound is for the innermost loop: a fixed one is not sampled
    max_inner = ctx.params.max_innermost_split_factor if step.lengths[-1] is None else extent
    cands = factorization_schemes(extent, n_open, max_inner)
    if not cands:
        raise ScheduleError(f"split step {k}: no factorization of {step.extent}")
    drawn = iter(cands[rng.randrange(len(cands))])
    return tuple(next(drawn) if x is None else x for x in step.lengths)


def init_change_compute_location(ctx, state, rng):
    """Randomly inline / root / attach every non-tiled, non-tiling stage (last to first)."""
    if ctx.params.disable_change_compute_location:
        return state
    s = state.copy()
    for sid in range(len(s.stages) - 1, -1, -1):
        stage = s.stages[sid]
        if stage.is_placeholder or stage.compute_at == "inline":
            continue
        if su.is_tiled(stage) or su.needs_multi_level_tiling(s, sid):
            continue
        cands = su.get_compute_location_candidates(s, sid)
        choice = rng.randrange(len(cands) + 2)
        if choice == 0:
            # TVM only inlines stages that are currently attached somewhere
            if not su.has_reduce_iter(stage) and stage.compute_at == "iter":
                s.compute_inline(sid)
        elif choice == 1:
            if stage.compute_at != "root":  # TVM records a no-op CR step; skip it
                s.compute_root(sid)
        else:
            tid, iid = cands[choice - 2]
            s.compute_at(sid, tid, iid)
    return s


def init_parallel(ctx, state, rng, extents=None):
    """Fuse the outer spatial loops of each root stage up to ``16 * num_cores`` iterations
    and parallelize them; if they all have extent 1, recurse into the attached stages.

    ``extents`` are bound-inferred extents (see :func:`state_utils.bound_extents`)."""
    s = state.copy()
    extents = extents if extents is not None else su.bound_extents(s)
    limit = ctx.num_cores * 16

    def annotate(sid: int, offset: int) -> None:
        stage = s.stages[sid]
        amap = su.attached_map(s)
        to_fuse, degree = [], 1
        k = offset
        while k < len(stage.iters):
            it = stage.iters[k]
            if it.kind != "spatial" or it.annotation != "none":
                break
            to_fuse.append(it.name)
            degree *= _extent(it, extents[sid])
            if degree > limit or (sid, k) in amap:
                break
            k += 1
        if degree == 1:
            # all outer loops are trivial: parallelize inside instead (TVM also annotates the
            # trivial loops; skipping that avoids a nested parallel annotation)
            for att in amap.get((sid, k), ()):
                annotate(att, 0)
            if (sid, k) in amap:
                annotate(sid, k + 1)
            return
        if len(to_fuse) > 1:
            s.parallel(sid, s.fuse(sid, to_fuse))
        elif to_fuse:
            s.parallel(sid, to_fuse[0])

    for sid, stage in enumerate(state.stages):
        if not stage.is_placeholder and stage.compute_at == "root":
            annotate(sid, 0)
    return s


def init_unroll(ctx, state, rng):
    """``auto_unroll_max_step`` pragma with a random candidate on every stage with a
    reduction (on its outermost loop)."""
    s = state.copy()
    cands = ctx.unroll_configs
    for sid, stage in enumerate(state.stages):
        if stage.is_placeholder or stage.compute_at == "inline":
            continue
        if su.has_reduce_iter(stage):
            value = cands[rng.randrange(len(cands))]
            s.pragma(sid, 0, f"auto_unroll_max_step${value}")
    return s


def init_vectorization(ctx, state, rng, extents=None):
    """Vectorize the innermost spatial loops of each stage (fused, up to
    ``max_vectorize_size`` iterations; tiled stages: the innermost loop only).

    TVM fuses ``U{1..count-1}`` of ``count`` fusible loops, never all of them (a quirk that
    e.g. never vectorizes a whole 4x4 inner block); here the count is ``U{1..count}``."""
    s = state.copy()
    extents = extents if extents is not None else su.bound_extents(s)
    max_vec = ctx.params.max_vectorize_size
    for sid, stage in enumerate(state.stages):
        if stage.is_placeholder or stage.compute_at == "inline":
            continue
        stage = s.stages[sid]
        amap = su.attached_map(s)
        tiled = su.is_tiled(stage)
        n, prod = 0, 1
        while n < len(stage.iters):
            k = len(stage.iters) - 1 - n
            it = stage.iters[k]
            if (sid, k) in amap or it.kind != "spatial" or it.annotation != "none":
                break
            if tiled and n:
                break
            prod *= _extent(it, extents[sid])
            if prod > max_vec:
                break
            n += 1
        if n > 1:
            n = 1 + rng.randrange(n)
        if n == 1:
            s.vectorize(sid, len(stage.iters) - 1)
        elif n > 1:
            names = [it.name for it in stage.iters[-n:]]
            s.vectorize(sid, s.fuse(sid, names))
    return s


def _extent(it, bound: dict) -> int:
    if it.extent is not None:
        return it.extent
    if it.name in bound:
        return bound[it.name]
    # a loop fused after bound inference: the product of its parts ("a@b@")
    prod = 1
    for part in it.name.split("@")[:-1]:
        prod *= bound[part]
    return prod


# ----------------------------------------------------------------------------- sampling


def sample_state(ctx, sketch, rng):
    """One concrete state from ``sketch`` (all init rules), or None when invalid."""
    try:
        s = init_fill_tile_size(ctx, sketch, rng)
        s = init_change_compute_location(ctx, s, rng)
        ext = su.bound_extents(s)  # TVM runs InferBound here; failure = invalid
        s = init_parallel(ctx, s, rng, ext)
        s = init_unroll(ctx, s, rng)
        s = init_vectorization(ctx, s, rng, ext)
    except (ScheduleError, LowerError):
        return None
    return s


def sample_init_population(task, sketches, n, rng, params=None, max_tries=None) -> list:
    """Sample ``n`` distinct concrete states from ``sketches`` (each from a uniformly chosen
    sketch); invalid samples are dropped. GPU tasks use the GPU rules of
    :mod:`autosched.search.annotate_gpu` and keep only states that pass ``verify_gpu_program``.

    Parameters
    ----------
    task : SearchTask
        Supplies ``compute_dag`` and ``hardware_params.num_cores``.
    sketches : list of State
        From :func:`autosched.search.sketch.generate_sketches`.
    n : int
        How many states to return (fewer if ``max_tries`` samples do not give that many).
    rng : random.Random, int or numpy Generator
        The only source of randomness: equal seeds give equal populations.
    params : SearchParams, optional
    max_tries : int, optional
        Samples to draw at most (default ``4 * n + 16``; GPU ``10 * n + 16``).

    Returns
    -------
    list of State
        Concrete states, distinct by step list.
    """
    rng = as_random(rng)
    params = params or SearchParams()
    if not sketches:
        return []
    if task.target.is_gpu:
        from .annotate_gpu import gpu_context, sample_state_gpu

        ctx = gpu_context(task, params)
        # GPU samples breaking a hardware limit (mostly shared memory) are dropped: draw more
        tries = max_tries if max_tries is not None else 10 * n + 16

        def sample(sketch):
            return sample_state_gpu(ctx, sketch, rng, task)
    else:
        ctx = AnnotateContext(task.compute_dag, task.hardware_params.num_cores or 1, params)
        tries = max_tries if max_tries is not None else 4 * n + 16

        def sample(sketch):
            return sample_state(ctx, sketch, rng)

    out, seen = [], set()
    for _ in range(tries):
        if len(out) >= n:
            break
        s = sample(sketches[rng.randrange(len(sketches))])
        if s is None:
            continue
        key = s.steps
        if key in seen:
            continue
        seen.add(key)
        out.append(s)
    return out
