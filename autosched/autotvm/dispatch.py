"""``apply_history_best(log)``: template calls get the best tuned configuration of a log."""

from __future__ import annotations

import os
import warnings

from codegen.target import Target

from ..measure.records import missing_logs_message
from .context import DispatchContext, quiet_fallback
from .record import load_from_file

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
    """

    def __init__(self, records):
        super().__init__()
        self.best_by_target: dict[tuple[str, tuple], tuple] = {}
        self.best_by_kind: dict[tuple[str, tuple], tuple] = {}
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
            if res.error_no != 0 or res.mean_cost >= 1e9:
                continue
            target = Target(inp.target)
            for table, key in (
                (self.best_by_target, (str(target), inp.task.workload)),
                (self.best_by_kind, (str(target.kind), inp.task.workload)),
            ):
                if key not in table or res.mean_cost < table[key][1].mean_cost:
                    table[key] = (inp, res)

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
            found = self.best_by_target.get((str(target), workload)) or self.best_by_kind.get(
                (str(target.kind), workload)
            )
        else:
            candidates = [v for (_, w), v in self.best_by_kind.items() if w == workload]
            if candidates:
                found = min(candidates, key=lambda v: v[1].mean_cost)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        return found[0].config


apply_history_best = ApplyHistoryBest
