"""Fixed tiles for the tensor-core sketch: the schedule an untuned 16-bit GEMM group (a dense
layer, an implicit-GEMM conv2d; float32 ones too on a ``-allow_tf32=1`` target, on TF32
fragments) runs, and the tiles ``benchmarks/bench_tensor_core.py`` times.

The scalar default GPU schedule (:func:`autosched.network.default_schedules.default_gpu_schedule`)
runs one output per thread with the whole reduction in a register: correct, but an implicit-GEMM
conv then reads its im2col gather K times over from global memory and uses no tensor core (issue
28: an untuned fp16 resnet-18 went from 4.23 ms to 7.28 ms when its convs became GEMMs). Where
:class:`~autosched.search.sketch_rules_tensor_core.MultiLevelTilingTensorCore` takes the group,
:func:`default_tensor_core_state` fills the sketch's open splits with the first of
:func:`default_tile_candidates` that passes the device limits instead.
"""

from __future__ import annotations

import dataclasses
import logging
import random

from tensorir import steps as st

from .params import SearchParams

__all__ = [
    "BLOCK_FRAGMENTS",
    "default_tensor_core_state",
    "default_tile_candidates",
    "fixed_tensor_core_state",
]

log = logging.getLogger(__name__)

BLOCK_FRAGMENTS = ((8, 4, 2, 1), (4, 2, 1), (2, 1))
"""Fragments per thread block along the GEMM's i and j, and per shared k tile, tried from large
to small: the tiles :func:`default_tile_candidates` makes of them (128x64 blocks and a k tile of
2 fragments first; 2 warps along an axis of at least 2 fragments). Large tiles reuse each
shared tile more; the small ones keep GEMMs of an odd number of fragments (resnet's 28x28 and
14x14 maps: 49 and 13 fragments of rows) on tensor cores."""


def default_tile_candidates(extents) -> list[tuple[int, int, int]]:
    """``(block_i, block_j, k_tile)`` in elements (the k tile in 16s, as
    :func:`fixed_tensor_core_state` reads it) for a GEMM of ``extents`` fragments along i, j
    and k: each of :data:`BLOCK_FRAGMENTS`' sizes that divides its axis, largest blocks first."""
    options = [[b for b in sizes if n % b == 0] for sizes, n in zip(BLOCK_FRAGMENTS, extents)]
    tiles = [(bi, bj, bk) for bi in options[0] for bj in options[1] for bk in options[2]]
    tiles.sort(key=lambda t: (t[0] * t[1], t[0], t[2]), reverse=True)
    return [(16 * bi, 16 * bj, 16 * bk) for bi, bj, bk in tiles]


def _has_tensor_core(state) -> bool:
    return any(p == "tensor_core" for s in state.stages for _, p in s.pragmas)


def _open_splits(sketch) -> list[int]:
    return [k for k, step in enumerate(sketch.steps)
            if isinstance(step, st.SplitStep) and None in step.lengths]  # fmt: skip


def tensor_core_sketch(task, params: SearchParams | None = None):
    """The task's tensor-core sketch, or None when the rule does not take the task (a float32
    GEMM without TF32, a shape off the fragments, no GEMM at all)."""
    from .sketch import generate_sketches

    for sketch in generate_sketches(task, params=params):
        if _has_tensor_core(sketch) and len(_open_splits(sketch)) == 3:
            return sketch
    return None


def fixed_tensor_core_state(task, block_i, block_j, k_tile, warps=(2, 2), seed=0, sketch=None,
                            params=None):  # fmt: skip
    """The tensor-core sketch (double buffered unless ``params`` says otherwise) with the given
    block tile, warps and k tile (elements), bound and annotated with a draw seeded by ``seed``
    (unroll, fetch vector width); not checked against the GPU's limits.

    Raises ValueError when the task has no tensor-core sketch or the tile does not divide its
    GEMM (``block_i`` must divide the GEMM's rows, ``block_j`` its columns, ``k_tile`` its K)."""
    from tensorir.schedule import replay

    from .annotate_gpu import gpu_context, init_thread_bind, init_unroll_gpu
    from .state_utils import bound_extents

    params = params or SearchParams()
    sketch = sketch if sketch is not None else tensor_core_sketch(task, params)
    if sketch is None:
        raise ValueError(f"{task.desc or 'task'}: the tensor-core sketch does not take it")
    # The rule's searched splits, on axes counted in fragments: i, j (warps, fragments per
    # warp), k (fragments per shared k tile).
    si, sj, sk = _open_splits(sketch)
    lengths = {si: (warps[0], block_i // (16 * warps[0])),
               sj: (warps[1], block_j // (16 * warps[1])), sk: (k_tile // 16,)}  # fmt: skip
    if any(ls[0] * ls[-1] * 16 != b for ls, b in zip(lengths.values(), (block_i, block_j))):
        raise ValueError(f"{task.desc or 'task'}: block {block_i}x{block_j} is not whole "
                         f"fragments per warp for {warps[0]}x{warps[1]} warps")  # fmt: skip
    for k, ls in lengths.items():
        extent = sketch.steps[k].extent
        if min(ls) < 1 or (extent and extent % (ls[0] * (ls[1] if len(ls) > 1 else 1))):
            raise ValueError(
                f"{task.desc or 'task'}: tile {block_i}x{block_j}x{k_tile} does not divide the "
                f"GEMM (iterator {sketch.steps[k].iter_id} of stage {sketch.steps[k].stage_id}: "
                f"{extent} fragments)"
            )
    steps = [dataclasses.replace(step, lengths=lengths[k]) if k in lengths else step
             for k, step in enumerate(sketch.steps)]  # fmt: skip
    state = replay(task.compute_dag, steps)
    ctx, rng = gpu_context(task, params), random.Random(seed)
    state = init_thread_bind(ctx, state, rng, bound_extents(state))
    return init_unroll_gpu(ctx, state, rng)


def default_tensor_core_state(task, check=None):
    """The first of :func:`default_tile_candidates` (:func:`fixed_tensor_core_state`, seed 0,
    2 warps along each axis of at least 2 fragments of the block) that passes
    :func:`~autosched.search.annotate_gpu.gpu_state_errors` and ``check(state)`` (which
    raises); double buffered, else single buffered. None when the tensor-core rule does
    not take the task, the target's ``-arch`` has no wmma for its dtype, or no tile fits."""
    from codegen.cuda import wmma_unavailable_reason

    from .annotate_gpu import gpu_state_errors
    from .sketch_rules_tensor_core import tensor_core_dtypes, tensor_core_gemm
    from .state_utils import single_buffered

    if task.target.kind != "cuda":
        return None
    dtypes = tensor_core_dtypes(task.target)
    gemms = [tensor_core_gemm(op, dtypes) for op in task.compute_dag.compute_ops]
    gemms = [g for g in gemms if g is not None]
    if not gemms or wmma_unavailable_reason(task.target.get("arch"), gemms[0].dtype):
        return None  # cheap exits first: most groups are not GEMMs
    sketch = tensor_core_sketch(task)
    if sketch is None:
        return None
    extents = [sketch.steps[k].extent for k in _open_splits(sketch)]
    for bi, bj, bk in default_tile_candidates(extents):
        warps = (min(2, bi // 16), min(2, bj // 16))
        try:
            double = fixed_tensor_core_state(task, bi, bj, bk, warps, sketch=sketch)
        except ValueError as exc:
            log.debug("tensor-core default of %s: %s", task.desc or "task", exc)
            continue
        for state in (double, single_buffered(double)):
            if state is None:
                continue
            errors = gpu_state_errors(task, state)
            if errors:
                log.debug("tensor-core default %dx%dx%d: %s", bi, bj, bk, errors[0])
                continue
            if check is not None:
                try:
                    check(state)
                except Exception as exc:  # noqa: BLE001 - refused by the caller: next tile
                    log.debug("tensor-core default %dx%dx%d: %s", bi, bj, bk, exc)
                    continue
            return state
    return None
