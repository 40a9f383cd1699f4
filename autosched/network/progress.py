"""Progress of a task scheduler run: its callbacks' base class, TVM's table, the progress bar,
the estimated-latency log, and the live notebook view.

:class:`PrintTableInfo` (a default callback of the task scheduler) shows the progress: in a
Jupyter kernel one :class:`~autosched.display.LiveView` (a bar and the estimated total latency
against trials and seconds, redrawn after each round), on a terminal a ``tqdm`` bar, elsewhere
(a file, CI) the table every ``TABLE_INTERVAL_S`` seconds; all of them end with the table.
"""

from __future__ import annotations

import sys
import time

from ..display.live import LiveView, in_notebook
from ..measure.data import usable_cost

__all__ = [
    "TABLE_INTERVAL_S",
    "LogEstimatedLatency",
    "NotebookView",
    "PrintTableInfo",
    "ProgressBar",
    "TaskSchedulerCallback",
    "default_callbacks",
    "record_file",
]


class TaskSchedulerCallback:
    """Base class of task scheduler callbacks; every hook does nothing by default.

    Each hook gets the running :class:`~autosched.network.task_scheduler.TaskScheduler` (not
    annotated here: this module is below the scheduler, which imports it).
    """

    def pre_tune(self, task_scheduler, task_id: int) -> None:
        """Called before task ``task_id`` is tuned for one round."""

    def post_tune(self, task_scheduler, task_id: int) -> None:
        """Called after task ``task_id`` was tuned for one round."""

    def finish(self, task_scheduler) -> None:
        """Called once when :meth:`TaskScheduler.tune` returns normally."""


def record_file(options):
    """The path of the first ``RecordToFile`` measure callback of ``options``, or None."""
    from ..measure.records import RecordToFile

    for cb in options.measure_callbacks:
        if isinstance(cb, RecordToFile):
            return cb.path
    return None


def default_callbacks(options) -> list:
    """The task scheduler's callbacks when it is given none: :class:`PrintTableInfo`, and
    :class:`LogEstimatedLatency` writing ``total_latency.tsv`` next to the log of the first
    ``RecordToFile`` measure callback of ``options`` when there is one."""
    callbacks: list = [PrintTableInfo()]
    log = record_file(options)
    if log is not None:
        callbacks.append(LogEstimatedLatency(log.parent / "total_latency.tsv"))
    return callbacks


def _print_title(title: str) -> None:
    print("-" * 70)
    print("-" * 30 + f"  [ {title} ]")
    print("-" * 70)


# Without a terminal or notebook (a log file, CI), the table is printed at most this often.
TABLE_INTERVAL_S = 30.0


def _live_output(stream) -> bool:
    """Whether ``stream`` shows a live bar: a terminal, or a running Jupyter kernel's output
    (not merely ``ipykernel`` imported, as a test runner or a library may do)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) or in_notebook()


class PrintTableInfo(TaskSchedulerCallback):
    """Show tuning progress (when ``verbose >= 1``) in TVM's table format::

        |  ID  | Latency (ms) | Speed (GFLOPS) | Trials |
        -------------------------------------------------
        |    0 |        0.005 |           0.88 |     64 |
        -------------------------------------------------
        Estimated total latency: 1.587 ms  Trials: 4992  Used time : 13296 s  Next ID: 3

    (the final line ends with ``Trials/min: R  Done``: the trials this run measured per
    minute of its wall time). In a notebook the live view (:class:`NotebookView`: a bar and
    the estimated total latency against trials and seconds, redrawn after each round), on a
    terminal a ``tqdm`` bar
    (trials, elapsed time, estimated latency) runs during tuning, and the table is printed
    once at the end. Otherwise (output to
    a file or a pipe) the table is printed before a round only once every task has had its
    first round (that table is always printed) and then at most once every
    ``TABLE_INTERVAL_S`` seconds, and a final table ends with a ``Done`` line.

    ``Trials`` per task counts its measured candidates (records restored from a log
    included); the total latency is the objective and is ``-`` until every task has a valid
    result.

    Parameters
    ----------
    live : bool, optional
        Force the live bar (True) or the periodic table (False); default: a bar when standard
        output is a terminal or a notebook.
    final_line : bool
        End with one line naming the log (of a ``RecordToFile`` measure callback) and how to
        use it (``ApplyHistoryBest``). The command line prints its own instead.
    clock : callable
        Seconds, for the interval (``time.monotonic``; tests pass a fake clock).
    """

    def __init__(self, live: bool | None = None, final_line: bool = True, clock=time.monotonic):
        self.live = live
        self.final_line = final_line
        self.clock = clock
        self._bar: ProgressBar | NotebookView | None = None
        self._last_print: float | None = None
        self._first_pass_printed = False

    def _use_bar(self) -> bool:
        return _live_output(sys.stdout) if self.live is None else self.live

    def pre_tune(self, task_scheduler, task_id: int) -> None:
        if task_scheduler.tune_option.verbose < 1:
            return
        if self._use_bar():
            if self._bar is None:
                limit = task_scheduler.tune_option.trial_limit
                self._bar = NotebookView(limit) if in_notebook() else ProgressBar(limit)
            return
        if self._due(task_scheduler):
            self._table(task_scheduler)
            print(f"{self._summary(task_scheduler)}  Next ID: {task_id}", flush=True)

    def post_tune(self, task_scheduler, task_id: int) -> None:
        if self._bar is not None:
            self._bar.post_tune(task_scheduler, task_id)

    def _due(self, ts) -> bool:
        """Print now? After the first pass over all tasks, then every TABLE_INTERVAL_S."""
        now = self.clock()
        if self._last_print is None:
            self._last_print = now  # tuning starts: the interval counts from here
        if not self._first_pass_printed and all(ts.task_cts):
            self._first_pass_printed = True
        elif now - self._last_print < TABLE_INTERVAL_S:
            return False
        self._last_print = now
        return True

    def finish(self, task_scheduler) -> None:
        if task_scheduler.tune_option.verbose < 1:
            return
        if self._bar is not None:
            self._bar.finish(task_scheduler)
            self._bar = None
        self._table(task_scheduler)
        elapsed = time.time() - task_scheduler.tic
        rate = f"{60.0 * task_scheduler.ct / elapsed:.1f}" if elapsed > 0 else "-"
        print(f"{self._summary(task_scheduler)}  Trials/min: {rate}  Done", flush=True)
        log = record_file(task_scheduler.tune_option)
        if self.final_line and log is not None:
            print(
                f"Records: {log}. Next: with autosched.ApplyHistoryBest({str(log)!r}): "
                "lib = autosched.build(mod, target, params=params)",
                flush=True,
            )

    @staticmethod
    def _table(ts) -> None:
        _print_title("Task Scheduler")
        print("|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |")
        print("-" * 49)
        for i in range(len(ts.tasks)):
            cost = float(ts.best_costs[i])
            valid = usable_cost(cost)  # else no valid result yet
            latency = f"{1e3 * cost:.3f}" if valid else "-"
            if valid and i in getattr(ts, "retimed", ()):
                latency += "*"
            flop = ts.flop_cts[i]
            speed = f"{flop / cost / 1e9:.2f}" if valid and flop > 0 else "-"
            print(f"| {i:4d} | {latency:>12s} | {speed:>14s} | {ts.task_trials[i]:6d} |")
        print("-" * 49)
        if getattr(ts, "retimed", None):
            print("* re-timed: the mean over every measurement of the best candidates")

    @staticmethod
    def _summary(ts) -> str:
        total = ts.estimated_latency_ms()
        total_str = "-" if total is None else f"{total:.3f}"
        return (
            f"Estimated total latency: {total_str} ms  Trials: {ts.total_trials}  "
            f"Used time : {time.time() - ts.tic:.0f} s"
        )


class LogEstimatedLatency(TaskSchedulerCallback):
    """Append ``ElapsedTime(s)\\tS\\tEstimatedLatency(ms)\\tX\\tTrials\\tN`` after each round.

    Parameters
    ----------
    log_file : str or Path
        The TSV file; appended to (a resumed run continues it), flushed every row. ``X`` is
        ``N/A`` until every task has a valid result; ``N`` is the total number of trials of
        the tasks (records restored from a log included).
    """

    def __init__(self, log_file):
        self.log_file = log_file

    def post_tune(self, task_scheduler, task_id: int) -> None:
        total = task_scheduler.estimated_latency_ms()
        total_str = "N/A" if total is None else f"{total:.3f}"
        with open(self.log_file, "a", encoding="utf-8") as f:
            f.write(
                f"ElapsedTime(s)\t{time.time() - task_scheduler.tic:.0f}\t"
                f"EstimatedLatency(ms)\t{total_str}\tTrials\t{task_scheduler.total_trials}\n"
            )
            f.flush()


class ProgressBar(TaskSchedulerCallback):
    """A one-line progress bar after each round: trials done, estimated latency, time left.

    A ``tqdm.auto`` bar (in place on a terminal, a widget in a notebook); plain text lines
    when tqdm cannot be imported.
    """

    def __init__(self, total_trials: int | None, width: int = 30):
        # None: only a time budget; the bar counts trials without a total.
        self.total = None if total_trials is None else max(1, int(total_trials))
        self.width = width
        self._bar = None
        try:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.total, unit="trial", desc="tuning", leave=True)
        except ImportError:
            pass
        self._shown = 0

    def post_tune(self, task_scheduler, task_id: int) -> None:
        done = task_scheduler.ct if self.total is None else min(task_scheduler.ct, self.total)
        latency = task_scheduler.estimated_latency_ms()
        lat = "-" if latency is None else f"{latency:.3f} ms"
        elapsed = time.time() - task_scheduler.tic
        if self._bar is not None:
            self._bar.update(done - self._shown)
            self._bar.set_postfix_str(f"est. latency {lat}")
        elif self.total is None:
            print(f"{done} trials, est. latency {lat}, {elapsed:.0f} s elapsed", flush=True)
        else:
            filled = int(self.width * done / self.total)
            eta = elapsed / done * (self.total - done) if done else float("nan")
            bar = "#" * filled + "." * (self.width - filled)
            print(
                f"[{bar}] {done}/{self.total} trials, est. latency {lat}, "
                f"{elapsed:.0f} s elapsed, ~{eta:.0f} s left",
                flush=True,
            )
        self._shown = done

    def finish(self, task_scheduler) -> None:
        if self._bar is not None:
            self._bar.close()


class NotebookView(TaskSchedulerCallback):
    """The live view of a task scheduler run in a notebook: a progress bar and the estimated
    total latency against trials and seconds (from the first round where every task has a
    valid result), redrawn after each round (:class:`~autosched.display.LiveView`).

    Parameters
    ----------
    total_trials : int or None
        The trial budget of the run (None: a time budget only).
    display : bool
        Show it (False: only collect the points; tests).
    """

    def __init__(self, total_trials: int | None, display: bool = True):
        self.view = LiveView(total_trials, "Task Scheduler", "est. total latency (ms)", display)

    def post_tune(self, task_scheduler, task_id: int) -> None:
        latency = task_scheduler.estimated_latency_ms()
        note = f"task {task_id}, est. latency " + ("-" if latency is None else f"{latency:.3f} ms")
        self.view.update(task_scheduler.ct, time.time() - task_scheduler.tic, latency, note)

    def finish(self, task_scheduler) -> None:
        self.view.close()
