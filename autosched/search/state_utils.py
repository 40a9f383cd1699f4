"""Questions the sketch, annotation and mutation rules ask about a State (TVM search utils).

The static access analysis lives on :class:`tensorir.dag.ComputeDAG`; after ``cache_write`` or
``rfactor`` a state computes new ops, so :func:`current_dag` builds (and caches) the DAG of the
state's current ops, like TVM's ``current_compute_dag``. Stages are addressed by id.
"""

from __future__ import annotations

from tensorir import steps as st
from tensorir.dag import ComputeDAG
from tensorir.passes.double_buffer import PIPELINE_PRAGMAS, pipeline_pragma
from tensorir.passes.tensor_core import FRAGMENT_DIMS
from tensorir.passes.warpgroup import WARPGROUP_K_ROWS, WARPGROUP_M
from tensorir.stage import SplitRel

__all__ = [
    "elementwise_fan_in_consumer",
    "attached_map",
    "consumer_ids",
    "current_dag",
    "dot_product_tail",
    "get_compute_location_candidates",
    "has_cache_write_stage",
    "has_fixed_innermost",
    "tensor_core_fixed_split",
    "has_reduce_iter",
    "has_tensor_core_pragma",
    "has_single_elementwise_consumer",
    "is_output",
    "is_tiled",
    "needs_multi_level_tiling",
    "needs_rfactor",
    "single_buffered",
    "single_consumer_id",
    "target_stage_id_in_state",
]

_DAG_CACHE: dict[tuple[int, ...], tuple[tuple, ComputeDAG]] = {}
_DAG_CACHE_LIMIT = 256


def current_dag(state) -> ComputeDAG:
    """The DAG of ``state``'s current ops (the task's DAG while no stage was inserted).

    Cached by op identity; the cache keeps the ops alive so ids are never reused."""
    ops = state.current_ops
    if len(ops) == len(state.dag.ops) and all(a is b for a, b in zip(ops, state.dag.ops)):
        return state.dag
    key = tuple(id(op) for op in ops)
    hit = _DAG_CACHE.get(key)
    if hit is not None:
        return hit[1]
    outputs = {t.name for t in state.dag.output_tensors}
    tensors = state.tensors
    ins = [t for t, s in zip(tensors, state.stages) if s.is_placeholder]
    outs = [t for t, s in zip(tensors, state.stages) if s.name in outputs]
    dag = ComputeDAG(ins + outs)
    if len(_DAG_CACHE) >= _DAG_CACHE_LIMIT:
        _DAG_CACHE.clear()
    _DAG_CACHE[key] = (ops, dag)
    return dag


def _stage_ids(state) -> dict[str, int]:
    return {s.name: k for k, s in enumerate(state.stages)}


def is_output(state, sid: int) -> bool:
    s = state.stages[sid]
    return not s.is_placeholder and s.name in {t.name for t in state.dag.output_tensors}


def has_reduce_iter(stage) -> bool:
    return any(it.kind != "spatial" for it in stage.iters)


def is_tiled(stage) -> bool:
    """TVM's IsTiled: the loop count differs from the op's axis count (a split happened)."""
    return len(stage.iters) != len(stage.root_iters)


def needs_multi_level_tiling(state, sid: int) -> bool:
    s = state.stages[sid]
    return not s.is_placeholder and current_dag(state).needs_multi_level_tiling(s.name)


def consumer_ids(state, sid: int) -> list[int]:
    """Ids of the stages reading stage ``sid``, looking through inlined stages."""
    inlined = [s.name for s in state.stages if s.compute_at == "inline"]
    ids = _stage_ids(state)
    ops = current_dag(state).consumers(state.stages[sid].name, inlined=inlined)
    return sorted(ids[op.name] for op in ops)


def attached_map(state) -> dict[tuple[int, int], list[int]]:
    """``(target stage id, iterator index) -> attached stage ids`` (TVM iter_to_attached_stages)."""
    ids = _stage_ids(state)
    out: dict[tuple[int, int], list[int]] = {}
    for k, s in enumerate(state.stages):
        if s.compute_at == "iter":
            tid = ids[s.attach[0]]
            out.setdefault((tid, state.stages[tid].iter_index(s.attach[1])), []).append(k)
    return out


def has_cache_write_stage(state, sid: int) -> bool:
    """The stage is a ``.local`` cache-write stage or already has one."""
    name = state.stages[sid].name
    if name.endswith(".local"):
        return True
    return sid > 0 and state.stages[sid - 1].name == name + ".local"


def has_single_elementwise_consumer(state, sid: int) -> int | None:
    """The id of the single consumer reached by an elementwise chain, or None.

    Conditions (TVM ``HasSingleElementwiseMatchedConsumer``): exactly one consumer (through
    inlined stages), elementwise matched, not both with reductions, not a ``.shared`` stage."""
    cons = consumer_ids(state, sid)
    if len(cons) != 1:
        return None
    (tid,) = cons
    me, target = state.stages[sid], state.stages[tid]
    if not current_dag(state).elementwise_match(me.name, target.name):
        return None
    if has_reduce_iter(me) and has_reduce_iter(target):
        return None
    if target.name.endswith(".shared"):
        return None
    return tid


def _reads_as_own_axes(op, indices) -> bool:
    """``indices`` are exactly ``op``'s own axes in order (an elementwise read)."""
    axes = [ax.var for ax in op.axes]
    return len(indices) == len(axes) and all(i is a for i, a in zip(indices, axes))


def elementwise_fan_in_consumer(state, sid: int) -> int | None:
    """The single consumer ``tid`` (through inlined stages) of stage ``sid`` when every path
    from ``sid`` to it goes through inlined same-shape ops that read their producer at their
    own axes, possibly several times; None otherwise.

    TVM's ``HasSingleElementwiseMatchedConsumer`` wants a chain of single consumers, so the
    exact gelu epilogue of BERT's FFN ``x * 0.5 * (1 + erf(x / sqrt 2))``, which reads the
    dense's biased output twice, fails it: the dense then goes through ``cache_write`` and the
    whole epilogue becomes a second kernel that re-reads the dense output from global memory.
    Every read is elementwise here, so fusing the epilogue into the dense's register tile is
    as valid as for a chain."""
    cons = consumer_ids(state, sid)
    if len(cons) != 1:
        return None
    (tid,) = cons
    me, target = state.stages[sid], state.stages[tid]
    if target.name.endswith(".shared") or (has_reduce_iter(me) and has_reduce_iter(target)):
        return None
    dag = current_dag(state)
    inlined = {s.name for s in state.stages if s.compute_at == "inline"}
    shape = tuple(dag.ops[dag.op_index(me.name)].shape)
    stack, seen = [me.name], set()
    while stack:
        cur = stack.pop()
        if cur == target.name or cur in seen:
            continue
        seen.add(cur)
        readers = dag.read_by(cur)
        if not readers:
            return None  # another output on the way
        for name, accesses in readers.items():
            op = dag.ops[dag.op_index(name)]
            if tuple(op.shape) != shape or (name != target.name and name not in inlined):
                return None
            if not all(_reads_as_own_axes(op, idx) for idx in accesses):
                return None
            stack.append(name)
    return tid


def _space_reduce_len(stage) -> tuple[int, int]:
    space = reduce = 1
    for it in stage.root_iters:
        if it.kind == "spatial":
            space *= it.extent
        else:
            reduce *= it.extent
    return space, reduce


def needs_rfactor(state, sid: int, num_cores: int) -> bool:
    """TVM's NeedsRfactor: little spatial parallelism compared with the reduction."""
    s = state.stages[sid]
    if s.is_placeholder:
        return False
    space, reduce = _space_reduce_len(s)
    if needs_multi_level_tiling(state, sid):
        return not (space > reduce or space > num_cores * 16)
    if reduce > 1:
        return reduce > num_cores
    return False


def single_consumer_id(state, sid: int) -> int | None:
    """The single consumer, or the common root stage all consumers are attached to."""
    cons = consumer_ids(state, sid)
    if not cons:
        return None
    if len(cons) == 1:
        return cons[0]
    ids = _stage_ids(state)
    roots = set()
    for c in cons:
        s = state.stages[c]
        roots.add(c if s.compute_at == "root" else ids[s.attach[0]])
    return roots.pop() if len(roots) == 1 else None


def get_compute_location_candidates(state, sid: int) -> list[tuple[int, int]]:
    """``(stage id, iterator index)`` pairs where stage ``sid`` may be computed (notes 4.2).

    Iterators of unknown extent (inside attached stages before bound inference) count as
    not 1, as in TVM where GetExtent gives -1 for an undefined range."""
    tid = single_consumer_id(state, sid)
    if tid is None:
        return []
    target = state.stages[tid]
    amap = attached_map(state)
    out: list[tuple[int, int]] = []
    at_other = target.compute_at == "iter"
    tiled = is_tiled(target)
    visited_reduce = False
    for i, it in enumerate(target.iters):
        if it.kind == "reduce":
            visited_reduce = True
            if not tiled:
                break
        elif it.kind == "spatial" and visited_reduce:
            break
        if it.annotation == "unroll":
            break
        if it.extent == 1:
            continue
        if at_other and it.kind == "spatial" and it.name.endswith(".0"):
            continue
        out.append((tid, i))
        if (tid, i) in amap:
            break
    if at_other:
        ttid = _stage_ids(state)[target.attach[0]]
        for i, it in enumerate(state.stages[ttid].iters):
            if it.kind == "reduce" or (ttid, i) in amap or it.annotation == "unroll":
                break
            if it.extent == 1:
                continue
            out.append((ttid, i))
    return out


def target_stage_id_in_state(steps, step_id: int) -> int:
    """The current id of the stage that ``steps[step_id]`` addressed, after later insertions
    (TVM GetTargetStageIDInState)."""
    sid = steps[step_id].stage_id
    inc = 0
    for step in steps[step_id + 1 :]:
        if isinstance(step, st.CacheWriteStep | st.RfactorStep):
            if step.stage_id <= sid + inc:
                inc += 1
        elif isinstance(step, st.CacheReadStep) and step.stage_id < sid + inc:
            inc += 1
    return sid + inc


def replay_steps(dag, steps, start: int = 0, stages=None):
    """Apply ``steps[start:]`` to ``stages`` (the data after ``steps[:start]``; the initial
    stages when None) and return the State. Raises ScheduleError like the State methods.

    Sampling and mutation change a step in the middle of the history; replaying only the
    suffix from a cached prefix avoids redoing the unchanged part."""
    from tensorir.schedule import State

    steps = tuple(steps)
    if stages is None:
        assert start == 0, "a prefix needs its stages"
        stages = State(dag).stages
    for k in range(start, len(steps)):
        stages = steps[k].apply(stages, dag, steps[:k])
        st.check_attachments(stages)
    return State(dag, stages, steps)


def bound_extents(state) -> list[dict[str, int]]:
    """Per stage, iterator name -> extent after bound inference (attached stages included).

    Raises LowerError (or ScheduleError) when bounds cannot be inferred."""
    from tensorir.bounds import infer_bound

    return [{it.name: it.extent for it in s.iters} for s in infer_bound(state)]


def dot_product_tail(stage) -> tuple[str, str] | None:
    """Names of the two innermost loops when they are the vpdpbusd nest of the int8 sketches
    (a vectorized spatial loop around a reduce loop: :func:`sketch_rules.dot_product_inner_tiles`),
    else None. Other sketches never vectorize a loop with a reduction inside."""
    if len(stage.iters) < 2:
        return None
    lane, k = stage.iters[-2:]
    if lane.kind == "spatial" and lane.annotation == "vectorize" and k.kind == "reduce":
        return lane.name, k.name
    return None


def is_cross_thread_split(state, step_id: int) -> bool:
    """Whether SplitStep ``steps[step_id]`` gives a cross-thread reduction its threads: a
    one-length split (the row of a layer norm or softmax cut into ``threads``) whose own stage,
    or a stage that follows it (``follow_split``), binds a reduce loop to threadIdx.x. Its
    innermost length is a thread count, not a register or loop tile."""
    steps = state.steps
    if len(steps[step_id].lengths) != 1:
        return False
    sids = {target_stage_id_in_state(steps, step_id)} | {
        target_stage_id_in_state(steps, k)
        for k, s in enumerate(steps)
        if isinstance(s, st.FollowSplitStep) and s.src_step_id == step_id
    }
    return any(
        it.kind == "reduce" and it.annotation == "threadIdx.x"
        for sid in sids
        for it in state.stages[sid].iters
    )


def has_fixed_innermost(state, step_id: int) -> bool:
    """Whether SplitStep ``steps[step_id]`` made a loop of its stage's dot-product tail: its
    innermost length was fixed by the sketch (the vector lanes, or 4), so mutation keeps it;
    also the splits the tensor-core sketch fixed (:func:`tensor_core_fixed_split`).

    The split is found among the stage's split relations by its parent's extent and its
    lengths (a split of another axis with the very same extent and lengths would count too:
    it then keeps its innermost length, which only narrows the mutation)."""
    if tensor_core_fixed_split(state, step_id):  # fragment sides, 32 lanes, 16-byte fetches
        return True
    step = state.steps[step_id]
    stage = state.stages[target_stage_id_in_state(state.steps, step_id)]
    tail = dot_product_tail(stage)
    if tail is None:
        return False
    roots = {it.name: it.extent for it in stage.root_iters}
    return any(
        isinstance(rel, SplitRel)
        and rel.children[-1] in tail
        and tuple(rel.lengths) == tuple(step.lengths)
        and roots.get(rel.parent) == step.extent
        for rel in stage.relations
    )


def has_tensor_core_pragma(stage) -> bool:
    """Whether ``stage`` carries the tensor-core sketch's ``tensor_core`` pragma."""
    return any(p == "tensor_core" for _, p in stage.pragmas)


def tensor_core_fixed_split(state, step_id: int) -> bool:
    """Whether SplitStep ``steps[step_id]`` is one whose length the tensor-core sketch fixed, so
    that mutation leaves it (any other value fails the fragment rules): a root axis of the
    fragment stage split by a fragment side (16, or TF32's K: 8) or by the warpgroup sketch's
    64 (rows of a warpgroup) or k row (64 halves, 32 floats; these parts split again by a
    fragment side), or a split of a ``.shared`` stage attached to it (the 16-byte vector, the
    32 lanes). A searched split of the same stage
    with the very same extent and length would count too, which only narrows the mutation (see
    :mod:`autosched.search.sketch_rules_tensor_core`)."""
    step = state.steps[step_id]
    if len(step.lengths) != 1:
        return False
    stage = state.stages[target_stage_id_in_state(state.steps, step_id)]
    if stage.name.endswith(".shared") and stage.compute_at == "iter":
        return has_tensor_core_pragma(state[stage.attach[0]])
    fixed = (WARPGROUP_M, *WARPGROUP_K_ROWS)
    if not has_tensor_core_pragma(stage) or step.lengths[0] not in (*FRAGMENT_DIMS, *fixed):
        return False
    extents = {it.name: it.extent for it in stage.root_iters}
    for rel in stage.relations:  # the warpgroup sketch's 64 / k-row parts split again
        if isinstance(rel, SplitRel) and len(rel.lengths) == 1 and rel.lengths[0] in fixed:
            extents.setdefault(rel.children[-1], rel.lengths[0])
    return any(
        isinstance(rel, SplitRel)
        and tuple(rel.lengths) == tuple(step.lengths)
        and extents.get(rel.parent) == step.extent
        for rel in stage.relations
    )


def pipeline_steps(steps) -> list[int]:
    """Indices of the software-pipeline pragmas (``double_buffer``, ``software_pipeline_<N>``:
    :data:`tensorir.passes.double_buffer.PIPELINE_PRAGMAS`) in ``steps``."""
    return [k for k, x in enumerate(steps)
            if isinstance(x, st.PragmaStep) and x.pragma_type in PIPELINE_PRAGMAS]  # fmt: skip


def pipeline_stages(state) -> int:
    """The deepest software pipeline of ``state``'s pragmas (2..4), 0 when it has none."""
    return max((PIPELINE_PRAGMAS[state.steps[k].pragma_type] for k in pipeline_steps(state.steps)),
               default=0)  # fmt: skip


def with_pipeline_stages(state, stages: int):
    """``state`` replayed with every software-pipeline pragma set to ``stages`` stages (1: the
    pragmas dropped, the same tiles staged in one shared buffer each,
    :mod:`tensorir.passes.double_buffer`), or None when it has none."""
    from tensorir.schedule import replay

    ids = set(pipeline_steps(state.steps))
    if not ids:
        return None
    steps = list(state.steps)
    if stages == 1:
        return replay(state.dag, [x for k, x in enumerate(steps) if k not in ids])
    name = pipeline_pragma(stages)
    for k in ids:
        steps[k] = st.PragmaStep(steps[k].stage_id, steps[k].iter_id, name)
    # Renaming the pragma is all that replaying would do (a loop pragma only marks its loop in
    # Stage.pragmas), without the cost of replaying every step (sampling does it per state).
    new = tuple(
        x.with_(pragmas=tuple((it, name if p in PIPELINE_PRAGMAS else p) for it, p in x.pragmas))
        if any(p in PIPELINE_PRAGMAS for _, p in x.pragmas) else x
        for x in state.stages
    )  # fmt: skip
    return type(state)(state.dag, new, steps)


def single_buffered(state):
    """``state`` replayed without its software-pipeline pragmas (the same tiles staged in one
    shared buffer each, :mod:`tensorir.passes.double_buffer`), or None when it has none."""
    return with_pipeline_stages(state, 1)
