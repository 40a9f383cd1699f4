"""The auto-scheduler's dispatch context: :class:`ApplyHistoryBest`, the best record per
(workload key, target) of the logs it is given, for ``build`` and ``SearchTask.apply_best``.

The records are read by :mod:`autosched.measure.records`; which of them may be a best is
:func:`~autosched.measure.data.usable_result`, the rule every reader shares. AutoTVM's own
context (:mod:`autosched.autotvm.dispatch`) shares :func:`missing_logs_message`.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace

from .data import RETIMED, MeasureInput, MeasureResult, steps_json_of, usable_result
from .records import load_records

__all__ = ["ApplyHistoryBest", "missing_logs_message"]


def _records_of(records, dags=None) -> Iterator[tuple[MeasureInput, MeasureResult]]:
    if isinstance(records, str | os.PathLike):
        yield from load_records(records, dags)
        return
    for item in records:
        if isinstance(item, str | os.PathLike):
            yield from load_records(item, dags)
        else:
            yield item


def _existing_logs(records, missing: list[str]) -> Iterator:
    """The items of ``records`` (a path or an iterable) less the paths that do not exist,
    which are appended to ``missing``."""
    items = [records] if isinstance(records, str | os.PathLike) else records
    for item in items:
        if isinstance(item, str | os.PathLike) and not os.path.exists(item):
            missing.append(os.fspath(item))
            continue
        yield item


def missing_logs_message(paths: Sequence[str]) -> str:
    """The one warning for tuning logs that do not exist (both ``ApplyHistoryBest``s)."""
    names = ", ".join(repr(str(p)) for p in paths)
    return (
        f"ApplyHistoryBest: no tuning log {names} (was the tuning step skipped?); the "
        "kernels use default schedules, which may be slow: tune first to write the log"
    )


class ApplyHistoryBest:
    """Dispatch context: the best error-free record per (workload key, target).

    Parameters
    ----------
    records : str, Path, or iterable
        A log path, or an iterable of paths and/or ``(MeasureInput, MeasureResult)`` pairs.
        A path that does not exist (a script run with its tuning step commented out) gives
        no records and ONE warning naming it, as TVM: the build then uses default schedules.
    dags : optional
        As for :func:`load_records`.

    Attributes
    ----------
    missing_logs : list of str
        The paths given that did not exist.

    Examples
    --------
    >>> with ApplyHistoryBest("log.json") as ctx:
    ...     steps = ApplyHistoryBest.current().query(dag.workload_key, "llvm")
    >>> print(ctx.summary())    # "2 of 3 tasks used a tuned record; missing: ..."
    """

    _stack: list[ApplyHistoryBest] = []

    def __init__(self, records, dags=None):
        # A re-timed record (the task scheduler measures each task's best few again, marked
        # RETIMED) joins its candidate's record: the costs of both, so that the candidate's
        # mean is not the luckiest of its measurements.
        entries: list[list] = []
        first_of: dict[tuple[str, str, str], list] = {}
        self.missing_logs: list[str] = []
        for inp, res in _records_of(_existing_logs(records, self.missing_logs), dags):
            if not usable_result(res):
                continue
            steps = getattr(inp.state, "steps_json", None) or json.dumps(steps_json_of(inp.state))
            cand = (inp.task.workload_key, str(inp.task.target), steps)
            if res.error_msg == RETIMED and cand in first_of:
                entry = first_of[cand]
                entry[1] = replace(entry[1], costs=entry[1].costs + res.costs)
                continue
            entry = [inp, res]
            entries.append(entry)
            first_of.setdefault(cand, entry)
        ranked: dict[tuple[str, str], list[tuple[MeasureInput, MeasureResult]]] = {}
        for inp, res in entries:
            key = (inp.task.workload_key, str(inp.task.target))
            ranked.setdefault(key, []).append((inp, res))
        # Every usable record per (key, target), best first (stable: earlier lines win ties),
        # so a best record that no longer replays can give way to the next best.
        self._ranked = {k: sorted(v, key=lambda r: r[1].mean_cost) for k, v in ranked.items()}
        self.best: dict[tuple[str, str], tuple[MeasureInput, MeasureResult]] = {
            k: v[0] for k, v in self._ranked.items()
        }
        self.hit_keys: set[str] = set()
        self.missed_keys: set[str] = set()
        if self.missing_logs:
            warnings.warn(missing_logs_message(self.missing_logs), stacklevel=2)

    @classmethod
    def current(cls) -> ApplyHistoryBest | None:
        """The innermost active context, or None outside any."""
        return cls._stack[-1] if cls._stack else None

    def lookup(self, workload_key: str, target=None):
        """``(MeasureInput, MeasureResult)`` of the best record, or None (no bookkeeping)."""
        if target is not None:
            return self.best.get((workload_key, str(target)))
        found = [v for (k, _), v in self.best.items() if k == workload_key]
        return min(found, key=lambda v: v[1].mean_cost) if found else None

    def candidates(self, workload_key: str, target) -> list:
        """Every usable ``(MeasureInput, MeasureResult)`` of ``workload_key`` on ``target``,
        best first (no bookkeeping)."""
        return list(self._ranked.get((workload_key, str(target)), ()))

    def targets_of(self, workload_key: str) -> list[str]:
        """The target strings that have records of ``workload_key``."""
        return [t for k, t in self._ranked if k == workload_key]

    def query(self, workload_key: str, target=None) -> tuple | None:
        """The best record's steps (replay them with ``tensorir.schedule.replay``), or None.

        Every call is counted: see :attr:`hit_keys`, :attr:`missed_keys` and :meth:`summary`.
        """
        found = self.lookup(workload_key, target)
        if found is None:
            self.missed_keys.add(workload_key)
            return None
        self.hit_keys.add(workload_key)
        return found[0].state.steps

    def summary(self) -> str:
        """``"N of M tasks used a tuned record"`` plus the missing workload keys."""
        missed = self.missed_keys - self.hit_keys
        total = len(self.hit_keys | missed)
        text = f"{len(self.hit_keys)} of {total} tasks used a tuned record"
        if missed:
            text += "; no record for: " + ", ".join(sorted(missed))
        return text

    def __enter__(self) -> ApplyHistoryBest:
        ApplyHistoryBest._stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        ApplyHistoryBest._stack.remove(self)
