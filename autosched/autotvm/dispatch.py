"""``apply_history_best(log)``: template calls get the best tuned configuration of a log."""

from __future__ import annotations

import os
import warnings

from codegen.target import Target

from ..measure.data import usable_result
from ..measure.dispatch import missing_logs_message
from ..measure.records import RecordWarning
from .context import DispatchContext, quiet_fallback
from .record import checked_input, load_from_file

__all__ = ["ApplyHistoryBest", "apply_history_best"]


class ApplyHistoryBest(DispatchContext):
    """Answer template calls with the best error-free record of their workload.

    Parameters
    ----------
    records : str, Path, or iterable
        A log file, or an iterable of log files and/or ``(MeasureInput, MeasureResult)``
        pairs (``autotvm.record.load_from_file(...)``).

    Notes
    -----
    A record matches a call when the workloads are equal and the record's target string is the
    call's target (``with Target(...)``); failing that, a record of the same target kind
    (``llvm -mcpu=...`` for ``llvm``) is used. A workload with no record falls through to the
    fallback configuration (one warning per workload). ``hits`` / ``misses`` count the answers.

    A record whose config is not a point of its task's config space is never applied: files
    are checked as they load (:func:`~autosched.autotvm.record.load_from_file` warns with the
    file and line), and any record not checked then (pairs given directly, or a template
    registered after the load) is checked when its workload is asked for; an invalid one is
    skipped with a :class:`RecordWarning` and the next best record answers.
    """

    def __init__(self, records):
        super().__init__()
        # key -> [(inp, res)], ascending cost once sorted (_ordered)
        self.best_by_target: dict[tuple[str, tuple], list] = {}
        self.best_by_kind: dict[tuple[str, tuple], list] = {}
        self._sorted: set[int] = set()
        self._checked: dict[int, object] = {}  # id(inp) -> config, or None when invalid
        self._spaces: dict = {}
        self.hits = 0
        self.misses = 0
        self.missing_logs: list[str] = []
        self.load(records)

    def load(self, records) -> None:
        """Add records (a path, or an iterable of paths and/or pairs). A path that does not
        exist adds none, with ONE warning naming it (as TVM; the calls then get fallback
        configurations, without a warning per workload)."""
        missing = len(self.missing_logs)
        self._load(records)
        if len(self.missing_logs) > missing:
            warnings.warn(missing_logs_message(self.missing_logs[missing:]), stacklevel=3)

    def _load(self, records) -> None:
        if isinstance(records, str | os.PathLike):
            if not os.path.exists(records):
                self.missing_logs.append(os.fspath(records))
                return
            records = load_from_file(records)
        for item in records:
            if isinstance(item, str | os.PathLike):
                self._load(item)
                continue
            inp, res = item
            if not usable_result(res):
                continue
            target = Target(inp.target)
            for table, key in (
                (self.best_by_target, (str(target), inp.task.workload)),
                (self.best_by_kind, (str(target.kind), inp.task.workload)),
            ):
                table.setdefault(key, []).append((inp, res))
                self._sorted.discard(id(table[key]))

    def _ordered(self, records: list) -> list:
        if id(records) not in self._sorted:
            records.sort(key=lambda p: p[1].mean_cost)
            self._sorted.add(id(records))
        return records

    def _valid_config(self, inp):
        """The record's config as a point of its space, None (warned once) if it is not one."""
        if id(inp) not in self._checked:
            try:
                self._checked[id(inp)] = checked_input(inp, self._spaces).config
            except ValueError as exc:
                warnings.warn(
                    f"apply_history_best: skipped a record of {inp.task.workload!r}: {exc}",
                    RecordWarning,
                    stacklevel=5,
                )
                self._checked[id(inp)] = None
        return self._checked[id(inp)]

    def _best(self, tables) -> tuple | None:
        """The cheapest valid record among ``tables`` (lists of records), or None."""
        found = None
        for records in tables:
            for inp, res in self._ordered(records):
                if found is not None and res.mean_cost >= found[1]:
                    break
                config = self._valid_config(inp)
                if config is not None:
                    found = (config, res.mean_cost)
                    break
        return found

    def query(self, target, workload):
        if not self.missing_logs:
            return super().query(target, workload)
        with quiet_fallback():  # the missing log was the one warning
            return super().query(target, workload)

    def _query_inside(self, target, workload):
        if workload is None:
            return None
        found = None
        if target is not None:
            target = Target(target)
            found = self._best([self.best_by_target.get((str(target), workload), [])]) or (
                self._best([self.best_by_kind.get((str(target.kind), workload), [])])
            )
        else:
            found = self._best([v for (_, w), v in self.best_by_kind.items() if w == workload])
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        return found[0]


apply_history_best = ApplyHistoryBest
