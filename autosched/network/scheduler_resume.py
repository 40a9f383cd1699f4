"""Resuming a task scheduler from the log of a previous run (``load_log_file``): its records
of the scheduler's tasks, the round counts and best-cost histories they stand for, and the
feature rows kept beside the log.

:meth:`~autosched.network.task_scheduler.TaskScheduler._restore_status` sets the scheduler's
state from these.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..measure.data import MAX_COST, MeasureErrorNo, MeasureInput
from ..measure.timing import phase
from ..suppressed import suppressed

__all__ = ["open_feature_store", "read_log", "restore_status", "restored_rounds"]


def read_log(tasks: Sequence, log_file):
    """``(costs, replayed, total, skipped)`` of the records of ``log_file`` (which exists):
    per task, the cost of each of its records (``MAX_COST`` for an error) and the records
    replayed on its DAG (``{i: (inputs, results)}``); the records read and those of these
    tasks that could not be replayed. A record belongs to the first task of its workload key
    and target."""
    from ..measure.records import load_records

    index: dict[tuple[str, str], int] = {}
    for i, task in enumerate(tasks):
        index.setdefault((task.workload_key, str(task.target)), i)
    dags = {task.workload_key: task.compute_dag for task in tasks}
    costs: list[list[float]] = [[] for _ in tasks]
    replayed: dict[int, tuple[list, list]] = {}
    total = skipped = 0
    for inp, res in load_records(log_file, dags):
        total += 1
        i = index.get((inp.task.workload_key, str(inp.task.target)))
        if i is None:
            continue
        ok = res.error_no == MeasureErrorNo.NO_ERROR
        costs[i].append(res.mean_cost if ok else MAX_COST)
        try:
            state = inp.state.to_state(tasks[i].compute_dag)
        except Exception as exc:  # noqa: BLE001 - a record from an older step format
            if not isinstance(exc, ValueError):  # ScheduleError: stale; else a bug
                suppressed("records")
            skipped += 1
            continue
        ins, outs = replayed.setdefault(i, ([], []))
        ins.append(MeasureInput(tasks[i], state))
        outs.append(res)
    return costs, replayed, total, skipped


def restored_rounds(cs: Sequence[float], per_round: int):
    """``(rounds, history, best, best_round)`` of a task whose records cost ``cs`` (in log
    order), rounds of ``per_round`` assumed: its round count, its best cost after each round,
    its best cost and the round that reached it (0: none valid)."""
    # An estimate, as in TVM: exact only if the previous run used the same round size.
    # (At least one round for a task with records: it needs no warm-up round.)
    rounds = max(1, int(len(cs) / per_round + 0.5)) if cs else 0
    # Best cost after each (estimated) round, and the round that reached the best.
    history = [min(cs[: r * per_round] or [MAX_COST]) for r in range(1, rounds + 1)]
    history[-1:] = [min(cs)] if rounds else []
    best = min(cs) if cs else MAX_COST
    best_round = next((r + 1 for r, c in enumerate(history) if c == best < MAX_COST), 0)
    return rounds, history, best, best_round


def open_feature_store(tasks: Sequence, log, load_log_file, records: dict, log_records: int):
    """The feature rows kept beside the log this tune writes (``<log>.features.npz``),
    or None without a log. Resuming from that same log, the store keeps the rows of its
    records (``records``: the replayed ones per task; ``log_records``: the records read from
    it); otherwise it starts afresh."""
    from ..cost_model.feature_pool import store_keys
    from ..cost_model.feature_store import FeatureStore, store_path

    if log is None:
        return None
    try:
        same = load_log_file is not None and os.path.samefile(load_log_file, log)
    except OSError:  # either file is missing: nothing to resume from
        same = False
    if not same:
        return FeatureStore.open(store_path(log))
    with phase("features"):
        keep = {
            key
            for i, (inputs, _) in records.items()
            for key in store_keys(tasks[i], [inp.state for inp in inputs])
        }
        return FeatureStore.open(store_path(log), keep=keep, limit=log_records)


def restore_status(ts, log_file) -> dict[int, tuple[list, list]]:
    """Set the counts, best costs and histories of the scheduler ``ts`` from ``log_file``
    (rounds of ``ts.num_measures_per_round``); returns the replayed records per task index
    (``{i: (inputs, results)}``)."""
    if not os.path.exists(log_file):
        ts._say(f"TaskScheduler: {log_file} does not exist yet; starting from scratch.")
        return {}
    costs, replayed, total, skipped = read_log(ts.tasks, log_file)
    per_round = ts.num_measures_per_round
    for i, cs in enumerate(costs):
        ts.task_trials[i] = len(cs)
        rounds, history, best, best_round = restored_rounds(cs, per_round)
        ts.task_cts[i] = rounds
        ts.task_costs_history[i] = history
        ts.best_costs[i] = best
        ts.task_best_cts[i] = best_round
        if rounds and ts._stalled(i):
            ts.dead_tasks.add(i)
    ts.cur_score = ts._compute_score(ts.best_costs)
    ts._log_records = total
    used = sum(ts.task_trials)
    ts._say(
        f"TaskScheduler: loaded {total} records from {log_file} ({used} of these tasks)"
        + (f" ({skipped} could not be replayed)" if skipped else "")
    )
    return replayed
