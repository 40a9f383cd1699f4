"""Re-timing the task scheduler's best candidates at the end of a tune (``retime_top``): the
best candidates of a tune per task, and each one's cost as the mean over all its
measurements (a best picked from many noisy measurements is otherwise the luckiest one).

:meth:`~autosched.network.task_scheduler.TaskScheduler._retime_best` measures them again.
"""

from __future__ import annotations

import json
import logging

from ..measure.data import RETIMED, MeasureErrorNo, steady_costs, steps_json_of

__all__ = ["keep_top", "pooled_means", "retime_best"]

_log = logging.getLogger(__name__)


def keep_top(top: dict, inp, res, limit: int) -> None:
    """Remember ``inp`` (measured as ``res``) in ``top`` (steps text -> (mean cost, input,
    costs)), which keeps the ``limit`` cheapest."""
    key = json.dumps(steps_json_of(inp.state))
    if key not in top:
        top[key] = (res.mean_cost, inp, tuple(res.costs))
    if len(top) > limit:
        del top[max(top, key=lambda k: top[k][0])]


def pooled_means(entries, results) -> list[float]:
    """Per ``(mean cost, input, costs)`` entry of a top, the mean of the steady costs
    (``steady_costs``) of its first measurement and its re-timing ``results`` (left out
    when that failed); ApplyHistoryBest pools a candidate's records the same way."""
    pooled = []
    for (_, _, first), res in zip(entries, results):
        costs = first + (res.costs if res.error_no == MeasureErrorNo.NO_ERROR else ())
        steady = steady_costs(costs)
        pooled.append(sum(steady) / len(steady))
    return pooled


def retime_best(ts, enough: int, now) -> None:
    """Measure the best candidates of this tune of each task of the scheduler ``ts`` with
    at least ``enough`` candidates measured by it once more and give each the mean over all
    its measurements (:func:`pooled_means`); ``ts.best_costs`` then holds the best of those.
    Empties the tops either way; ``now()`` times the re-timing for the closing line."""
    tasks = [i for i in range(len(ts.tasks)) if ts._top[i] and ts._measured_now[i] >= enough]
    top, ts._top = ts._top, [{} for _ in ts.tasks]
    ts._measured_now = [0] * len(ts.tasks)
    if not tasks:
        return
    count = sum(len(top[i]) for i in tasks)
    t0 = now()
    for idx in tasks:
        entries = list(top[idx].values())
        results = ts.measurer.measure([inp for _, inp, _ in entries], note=RETIMED)
        pooled = pooled_means(entries, results)
        before = float(ts.best_costs[idx])
        # A best restored from the log (an earlier run) that beats them stays the best.
        ts.best_costs[idx] = min(min(pooled), float(ts._best_at_start[idx]))
        ts.retimed.add(idx)
        _log.info(
            "task %d (%s): best re-timed %.4f -> %.4f ms (%d candidates)",
            idx, ts._desc(idx), before * 1e3, min(pooled) * 1e3, len(entries),
        )  # fmt: skip
    ts.cur_score = ts._compute_score(ts.best_costs)
    ts._say(
        f"Re-timed the best {ts.retime_top} candidates of {len(tasks)} tasks ({count} "
        f"measurements, {now() - t0:.1f} s); their latencies are the means over all "
        "measurements."
    )
