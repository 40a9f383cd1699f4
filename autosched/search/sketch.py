"""Sketch generation (TVM ``SketchPolicy::GenerateSketches``, notes 3.1-3.2).

A sketch is a State whose split lengths may be undefined (None): the loop structure without
the numbers. Rules are tried on (state, stage_id) pairs from the last stage to the first; see
:mod:`autosched.search.sketch_rules` for the CPU rules and how to write a custom one.

Example
-------
>>> sketches = generate_sketches(task)
>>> print(sketches[0])
"""

from __future__ import annotations

from tensorir import steps as st
from tensorir.schedule import State

from .params import SearchParams
from .sketch_rules import APPLY_AND_SKIP_REST, SKIP, SketchContext, cpu_rules

__all__ = ["default_rules", "generate_sketches"]


def default_rules(target) -> list:
    """The sketch rules a task on ``target`` gets unless told otherwise, in the order they are
    tried: :func:`autosched.search.sketch_rules_gpu.gpu_rules` for a GPU target, else
    :func:`autosched.search.sketch_rules.cpu_rules`. The one place that decides it
    (:func:`generate_sketches` and ``PreloadCustomSketchRule`` both ask here)."""
    if target.is_gpu:
        from .sketch_rules_gpu import gpu_rules

        return gpu_rules()
    return cpu_rules()


def generate_sketches(task, rules=None, params: SearchParams | None = None) -> list[State]:
    """All sketches of ``task`` (CPU rules, or the GPU rules of
    :mod:`autosched.search.sketch_rules_gpu` when ``task.target.is_gpu``).

    Parameters
    ----------
    task : SearchTask
        Supplies ``compute_dag`` and ``hardware_params.num_cores``.
    rules : list, optional
        Rules to try in order; default :func:`default_rules` of the task's target. To add a
        custom rule first (TVM PreloadCustomSketchRule), pass
        ``[my_rule] + default_rules(task.target)``.
    params : SearchParams, optional
        Supplies the tiling structure string.

    Returns
    -------
    list of State
        Non-concrete states in TVM's order (breadth-first over rule applications).
    """
    params = params or SearchParams()
    rules = default_rules(task.target) if rules is None else list(rules)
    hw = task.hardware_params
    if task.target.is_gpu:
        from ..hardware import known_cuda_arch
        from .sketch_rules_gpu import GPUSketchContext
        from .sketch_rules_tensor_core import tensor_core_dtypes

        ctx = GPUSketchContext(
            num_cores=hw.num_cores or 1,
            params=params,
            warp_size=hw.gpu_value("warp_size"),
            max_threads_per_block=hw.gpu_value("max_threads_per_block"),
            tensor_core_dtypes=tensor_core_dtypes(task.target),
            arch=task.target.get("arch"),
            device_arch=known_cuda_arch(task.target),
        )
    else:
        from .dot_product import dot_lanes

        ctx = SketchContext(
            num_cores=hw.num_cores or 1, params=params, dot_lanes=dot_lanes(task.target)
        )
    dag = task.compute_dag
    now = [(dag.get_init_state(), len(dag.ops) - 1)]
    out = []
    while now:
        nxt = []
        for state, sid in now:
            if sid < 0:
                out.append(state)
                continue
            for rule in rules:
                cond = rule.meet_condition(ctx, state, sid)
                if cond == SKIP:
                    continue
                nxt.extend(rule.apply(ctx, state, sid))
                if cond == APPLY_AND_SKIP_REST:
                    break
        now = nxt
    return [_undefine_rfactor_splits(s) for s in out]


def _undefine_rfactor_splits(state: State) -> State:
    """Reset the split before each rfactor to an undefined length so that it is sampled
    (the rule used 1 because rfactor needs a concrete split). The stage data keep the
    placeholder length 1; annotation replays the steps."""
    steps = list(state.steps)
    changed = False
    for k, step in enumerate(steps):
        if isinstance(step, st.RfactorStep):
            prev = steps[k - 1]
            assert isinstance(prev, st.SplitStep), "rfactor sketches split right before RF"
            steps[k - 1] = st.SplitStep(prev.stage_id, prev.iter_id, prev.extent, (None,),
                                        prev.inner_to_outer)  # fmt: skip
            changed = True
    return State(state.dag, state.stages, steps) if changed else state
