"""Measured programs read back from a log, made ready for feature extraction.

``load_records`` yields ``RecordTask`` / ``RecordState`` stand-ins (a workload key, a target
string, steps kept as JSON) so logs load without their DAGs. The cost model needs what a
``SearchTask`` and a ``State`` give: the DAG, the parsed target, its hardware parameters and
the replayed steps. :func:`resolve_inputs` supplies them, so ``model.update(*zip(*records))``
(transfer learning from a log) trains like ``update`` after a measurement.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from codegen.target import Target

from ..hardware import HardwareParams
from ..measure.data import MeasureInput
from ..suppressed import suppressed

__all__ = ["RecordTaskView", "resolve_inputs"]


@dataclass(frozen=True, eq=False)
class RecordTaskView:
    """What feature extraction reads of a task, built from a record's task."""

    compute_dag: object
    workload_key: str
    target: Target
    hardware_params: HardwareParams


def _needs_resolving(inp) -> bool:
    return not hasattr(inp.task, "hardware_params") or not hasattr(inp.state, "to_json")


def resolve_inputs(inputs, results) -> tuple[list, list]:
    """The pairs whose task and state the features can use, record stand-ins resolved.

    A record whose workload key names no known DAG (neither passed to ``load_records(dags=)``
    nor registered), or whose steps no longer replay on it, is dropped, with ONE warning for
    all of them saying how to keep them.
    """
    inputs, results = list(inputs), list(results)
    if not any(_needs_resolving(inp) for inp in inputs):
        return inputs, results
    views: dict[tuple[str, str], RecordTaskView] = {}
    out_in, out_res, unresolved, stale = [], [], set(), 0
    for inp, res in zip(inputs, results, strict=True):
        if not _needs_resolving(inp):
            out_in.append(inp)
            out_res.append(res)
            continue
        task = inp.task
        dag = getattr(task, "compute_dag", None)
        if dag is None:
            unresolved.add(task.workload_key)
            continue
        key = (task.workload_key, str(task.target))
        if key not in views:
            target = Target(task.target)
            views[key] = RecordTaskView(
                dag, task.workload_key, target, HardwareParams.for_target(target)
            )
        state = inp.state
        if not hasattr(state, "to_json"):
            try:
                state = state.to_state(dag)
            except Exception as exc:  # noqa: BLE001 - records are outside input: a stale one is dropped
                if not isinstance(exc, ValueError):  # ScheduleError: stale; anything else: a bug
                    suppressed("records")
                stale += 1
                continue
        out_in.append(MeasureInput(views[key], state))
        out_res.append(res)
    if unresolved or stale:
        why = []
        if unresolved:
            why.append(
                f"the records of {len(unresolved)} workload(s) whose DAG is unknown here (e.g. "
                f"{sorted(unresolved)[0]}): pass load_records(log, dags=[tasks or DAGs]) or "
                "create their SearchTasks first"
            )
        if stale:
            why.append(f"{stale} record(s) whose steps do not replay on their DAG")
        warnings.warn("cost model update: skipped " + "; and ".join(why), stacklevel=3)
    return out_in, out_res
