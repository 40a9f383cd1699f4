"""AutoTVM records in a network build: the fused groups whose anchor operator was tuned.

``with autotvm.apply_history_best(log): ansor.build(mod, target, params=params)``: for each
fused group without an auto-scheduler record, :func:`group_state` looks up the group's anchor
call (its ``nn.conv2d`` / ``nn.dense``) as a template workload and, when the log has a record of
it, schedules the group with that template and configuration (the element-wise ops after the
anchor inlined into the tiled output, :mod:`.templates.epilogue`).

Workloads are those of the graph the build compiles: the build's passes convert NCHW networks
to NHWC, so records of NHWC tasks (``extract_from_program`` on an NHWC network) apply.
"""

from __future__ import annotations

import logging

from ..network.build import RecordSource, register_record_source
from .context import DispatchContext
from .dispatch import ApplyHistoryBest
from .space import ConfigEntity

__all__ = ["active_history", "group_state"]

_log = logging.getLogger(__name__)


def active_history() -> ApplyHistoryBest | None:
    """The innermost ``apply_history_best`` context, or None."""
    ctx = DispatchContext.current
    while ctx is not None:
        if isinstance(ctx, ApplyHistoryBest):
            return ctx
        ctx = getattr(ctx, "_old_ctx", None)
    return None


def group_state(group, dag, target):
    """The State of a fused group under the active AutoTVM records, or None.

    Parameters
    ----------
    group : the graph's fused group (its ``calls``)
    dag : ComputeDAG
        The group's DAG.
    target : Target

    Returns
    -------
    (State, tuple) or None
        The scheduled state and the template workload it came from; None when no record
        applies (no context, no anchor with a template, no record of its workload).

    Raises
    ------
    Exception
        Whatever the template's steps raise on this group (the caller falls back).
    """
    from .templates import SCHEDULES, workload_of_call

    history = active_history()
    if history is None:
        return None
    anchors = [c for c in group.calls if c.op in ("nn.conv2d", "nn.dense")]
    if len(anchors) != 1:
        return None
    found = workload_of_call(anchors[0], target)
    if found is None:
        return None
    name, args = found
    workload = (name, *args)
    cfg = history._query_inside(target, workload)
    if not isinstance(cfg, ConfigEntity):
        return None
    state = dag.get_init_state()
    SCHEDULES[name](cfg, state)
    _log.debug("group %s scheduled with template %s config %s", dag, name, cfg.index)
    return state, workload


# The network build (a lower layer, which never imports AutoTVM) consults these records through
# its registry; registered on import, before any apply_history_best can be entered.
register_record_source(RecordSource("AutoTVM", group_state, lambda: DispatchContext.current))
