"""Tuning curves and the trials per task, from a record log."""

from __future__ import annotations

import math
from collections import Counter

from ..measure.record_rows import record_rows
from .figure import new_figure

__all__ = ["trials_per_task", "tuning_curve"]


def _best_so_far(rows, metric: str) -> dict[str, tuple[list, list, list]]:
    """Per task: (trial numbers, seconds since the log's first record, best value so far) at
    each record that improved the task's best."""
    start = min((r["time"] for r in rows), default=0.0)
    curves: dict[str, tuple[list, list, list]] = {}
    best: dict[str, float] = {}
    last: dict[str, dict] = {}
    for r in rows:
        value = r["cost"] * 1e3 if metric == "latency" else r["gflops"]
        if math.isnan(value):
            continue
        task = r["task"]
        last[task] = r
        old = best.get(task)
        if old is None or (value < old if metric == "latency" else value > old):
            best[task] = value
            trials, seconds, values = curves.setdefault(task, ([], [], []))
            trials.append(r["trial"] + 1)
            seconds.append(r["time"] - start)
            values.append(value)
    for task, (trials, seconds, values) in curves.items():
        if trials[-1] != last[task]["trial"] + 1:  # the best held until the task's last trial
            trials.append(last[task]["trial"] + 1)
            seconds.append(last[task]["time"] - start)
            values.append(values[-1])
    return curves


def tuning_curve(log, tasks=None, metric: str = "latency"):
    """Each task's best latency (ms, ``metric="latency"``) or GFLOP/s (``"gflops"``) so far,
    against the log's trials (left) and the seconds since its first record (right).

    Parameters
    ----------
    log : str or Path
        A record log.
    tasks : sequence of SearchTask, optional
        Name the tasks (and count their FLOPs, needed for GFLOP/s) from these.
    metric : {"latency", "gflops"}

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        For another ``metric``, or a log without one successful measurement.
    """
    if metric not in ("latency", "gflops"):
        raise ValueError(f"tuning_curve: metric must be 'latency' or 'gflops', got {metric!r}")
    rows = record_rows(log, tasks)
    curves = _best_so_far(rows, metric)
    if not curves:
        unknown = metric == "gflops" and any(r["error"] == "NO_ERROR" for r in rows)
        hint = "; GFLOP/s need the tasks' DAGs: pass tasks=[...]" if unknown else ""
        raise ValueError(f"tuning_curve: {log} has no successful measurement to plot{hint}")
    label = "best latency (ms)" if metric == "latency" else "best GFLOP/s"
    fig, (by_trial, by_time) = new_figure(10, 4, columns=2)
    for task, (trials, seconds, values) in curves.items():
        # A step: the best holds until the next improvement.
        by_trial.step(trials, values, where="post", marker="o", markersize=3, label=task)
        by_time.step(seconds, values, where="post", marker="o", markersize=3, label=task)
    # (each task's last point repeats its best at its last trial, so the flat end shows)
    by_trial.set_xlabel("trials")
    by_trial.xaxis.get_major_locator().set_params(integer=True)
    by_time.set_xlabel("seconds since the first record")
    values = [v for _, _, vs in curves.values() for v in vs]
    for ax in (by_trial, by_time):
        ax.set_ylabel(label)
        if metric == "latency" and max(values) > 20 * min(values):  # decades apart
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    by_time.legend(fontsize="small")
    fig.suptitle(f"Tuning curve: {label} per task")
    return fig


def trials_per_task(log, tasks=None):
    """The trials each task got (the task scheduler's choices), failed ones stacked on top.

    Returns
    -------
    matplotlib.figure.Figure
    """
    rows = record_rows(log, tasks)
    if not rows:
        raise ValueError(f"trials_per_task: {log} holds no records")
    ok = Counter(r["task"] for r in rows if r["error"] == "NO_ERROR")
    failed = Counter(r["task"] for r in rows if r["error"] != "NO_ERROR")
    names = list(dict.fromkeys(r["task"] for r in rows))  # in order of first measurement
    fig, (ax,) = new_figure(max(4.0, 0.5 * len(names) + 2), 4)
    xs = range(len(names))
    ax.bar(xs, [ok[n] for n in names], label="measured")
    ax.bar(xs, [failed[n] for n in names], bottom=[ok[n] for n in names], label="failed")
    ax.set_xticks(list(xs), names, rotation=45, ha="right", fontsize="small")
    ax.set_xlabel("task")
    ax.set_ylabel("trials")
    ax.set_title("Trials per task")
    ax.legend(fontsize="small")
    return fig
