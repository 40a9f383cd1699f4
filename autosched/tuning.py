"""``TuningOptions`` and ``auto_schedule``: tune one task, as TVM's ``auto_scheduler`` does."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

from . import suppressed
from .workers import TuningInterrupted, interrupted, stop_on_signals
from .workers.signals import signal_name

_log = logging.getLogger(__name__)

__all__ = ["TuningOptions", "auto_schedule"]


def interruption(exc: BaseException, measurer, resume: str) -> TuningInterrupted:
    """The error to raise when SIGINT / SIGTERM (``exc``) stopped a run measured by
    ``measurer``: what was kept and ``resume``, how to go on (a phrase with ``{log}``)."""
    logs = [str(cb.path) for cb in measurer.callbacks if getattr(cb, "path", None)]
    if logs:
        kept = f"every finished batch is in {', '.join(logs)}"
        how = resume.format(log=repr(logs[0]))
    else:
        kept = "no log was written"
        how = "add measure_callbacks=[RecordToFile(path)] to keep results next time"
    return interrupted(
        f"tuning stopped by {signal_name(exc)} after {measurer.stats.measured} measured "
        f"trials; {kept}; to resume, {how}"
    )


def _callbacks(value) -> tuple:
    """``measure_callbacks`` as a tuple of objects with ``callback(inputs, results)``.

    A str (``measure_callbacks="log.json"``) is iterable character by character and a single
    callback is not a list: both used to be accepted and then record nothing (or fail late).
    """
    example = "e.g. [RecordToFile('log.json')]"
    if value is None:
        return ()
    if (
        isinstance(value, str | bytes)
        or hasattr(value, "callback")
        or not hasattr(value, "__iter__")
    ):
        raise TypeError(
            f"TuningOptions: measure_callbacks must be a list of callbacks, {example}; "
            f"got {type(value).__name__} {value!r}"
        )
    value = tuple(value)
    for k, cb in enumerate(value):
        if not callable(getattr(cb, "callback", None)):
            raise TypeError(
                f"TuningOptions: measure_callbacks[{k}] ({type(cb).__name__} {cb!r}) has no "
                f"callback(inputs, results) method; {example}"
            )
    return value


@dataclass(frozen=True)
class TuningOptions:
    """How long to tune and how to measure.

    Parameters
    ----------
    num_measure_trials : int
        Candidates to measure in total (0: search without measuring and return the state
        the cost model likes best; with ``max_tuning_seconds``, 0 means no trial limit: the
        time budget alone ends tuning).
    early_stopping : int, optional
        Stop after this many trials without improvement.
    num_measures_per_round : int, optional
        Candidates measured per search round (64 in TVM). None (the default): chosen from the
        budget, so that the first pass over all tasks takes at most a quarter of it
        (:func:`autosched.search.budget.measures_per_round`; between 2 and 64).
    verbose : int
        0 silent, 1 a progress line per round, 2 more.
    builder, runner : "local" or LocalBuilder / LocalRunner
    measure_callbacks : list
        Objects whose ``callback(inputs, results)`` runs after each measured batch, e.g.
        ``[RecordToFile("log.json")]``; a str or a single callback is a TypeError.
    max_tuning_seconds : float, optional
        A wall-time budget: no new search round starts after this many seconds (the round in
        flight finishes, so the run overshoots by at most one round). With a log, a long tune
        can run as several budgeted pieces.
    """

    num_measure_trials: int = 0
    early_stopping: int | None = None
    num_measures_per_round: int | None = None
    verbose: int = 1
    builder: object = "local"
    runner: object = "local"
    measure_callbacks: tuple = field(default=())
    max_tuning_seconds: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "measure_callbacks", _callbacks(self.measure_callbacks))
        if self.max_tuning_seconds is not None and not self.max_tuning_seconds > 0:
            raise ValueError(f"max_tuning_seconds must be > 0, got {self.max_tuning_seconds}")
        if self.num_measure_trials < 0:
            raise ValueError(f"num_measure_trials must be >= 0, got {self.num_measure_trials}")
        if self.num_measures_per_round is not None and self.num_measures_per_round < 1:
            raise ValueError(
                f"num_measures_per_round must be >= 1, got {self.num_measures_per_round}"
            )

    @property
    def trial_limit(self) -> int | None:
        """The number of trials to stop at, or None when only ``max_tuning_seconds`` limits."""
        if self.num_measure_trials == 0 and self.max_tuning_seconds is not None:
            return None
        return self.num_measure_trials

    def make_measurer(self):
        """The ProgramMeasurer these options describe."""
        from .measure.local import LocalBuilder, LocalRunner, ProgramMeasurer

        builder = LocalBuilder() if self.builder == "local" else self.builder
        runner = LocalRunner() if self.runner == "local" else self.runner
        return ProgramMeasurer(builder, runner, self.measure_callbacks)


def _runs_here(runner) -> bool:
    """Whether ``runner`` measures on this machine (our LocalRunner, as LocalRPCMeasureContext
    uses); a custom runner may measure elsewhere, so it is trusted to find its devices."""
    from .measure.local import LocalRunner

    return runner == "local" or isinstance(runner, LocalRunner)


def require_measuring_devices(tasks, options: TuningOptions) -> None:
    """Fail at once, with the reason, when a local runner would measure a GPU task on a
    machine without that device (instead of every trial failing one by one).

    Raises
    ------
    RuntimeError
        Naming the target and why its device 0 is unusable (no driver, no device, no pycuda /
        pyopencl).
    """
    if options.num_measure_trials == 0 or not _runs_here(options.runner):
        return
    from codegen.target import Target

    targets = [Target(t.target) for t in tasks]
    for kind in sorted({t.kind for t in targets if t.is_gpu}):
        reason = missing_device_reason(kind)
        if reason is not None:
            raise RuntimeError(
                f"cannot tune for target {kind!r}: no usable {kind} device 0 on this machine "
                f"({reason}); tune on a machine with one, or pass a runner that measures "
                "elsewhere"
            )


def missing_device_reason(kind: str) -> str | None:
    """None when device 0 of the GPU ``kind`` ("cuda" / "opencl") works here, else the first
    line of why not (no driver, no device, no pycuda / pyopencl)."""
    from runtime.device import device_kind, query_properties

    device_kind(kind)  # an unknown kind is an error (naming the known ones), not a missing device
    try:
        query_properties(kind, 0)
    except Exception as err:  # noqa: BLE001 - no driver / device / Python package
        return (str(err).strip().splitlines() or [type(err).__name__])[0]
    return None


def auto_schedule(task, search_policy=None, tuning_options: TuningOptions | None = None):
    """Tune ``task``; return the best state found (or the best predicted one for 0 trials).

    The default policy is a :class:`SketchPolicy` with the LightGBM cost model.
    """
    from .search.policy import SketchPolicy

    options = tuning_options or TuningOptions()
    if search_policy is None:
        from .cost_model.model import LGBModel

        search_policy = SketchPolicy(task, LGBModel(), verbose=options.verbose)
    policy_task = getattr(search_policy, "task", task)
    if policy_task is not task and (
        policy_task.compute_dag.workload_key != task.compute_dag.workload_key
        or str(policy_task.target) != str(task.target)
    ):
        # It would search and measure the policy's task, reporting it as this one.
        raise ValueError(
            f"{task!r}.tune: the search policy was made for another task ({policy_task!r}); "
            "make it with SketchPolicy(task, ...) of this task"
        )
    require_measuring_devices([task], options)
    trials = options.trial_limit
    if trials == 0:
        best, _ = search_policy.search_one_round(1)
        return best[0] if best else None
    per_round = options.num_measures_per_round
    if per_round is None:
        from codegen.target import Target

        from .search.budget import CPU_COST, GPU_COST, measures_per_round

        cost = GPU_COST if Target(str(task.target)).is_gpu else CPU_COST
        per_round = measures_per_round(1, trials, options.max_tuning_seconds, cost)
    measurer = options.make_measurer()
    if hasattr(search_policy, "ledger"):
        from .measure.timing import TimeLedger

        search_policy.ledger = TimeLedger()  # this tune's time, for the breakdown at the end
    live = _notebook_view(task, trials) if options.verbose >= 1 else None
    if live is not None:
        measurer.callbacks = (*measurer.callbacks, live)
    t0 = time.perf_counter()
    errors_before = suppressed.counts()
    try:
        with stop_on_signals():  # SIGTERM unwinds like Ctrl-C, through the cleanup below
            state = search_policy.search(
                trials,
                options.early_stopping,
                per_round,
                measurer,
                max_seconds=options.max_tuning_seconds,
            )
    except BaseException as exc:
        measurer.close(clean=False)  # the log keeps every finished batch, without an end mark
        if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, TuningInterrupted):
            resume = (
                "run the same tune with search_policy=SketchPolicy(task, LGBModel(), "
                "init_search_callbacks=[PreloadMeasuredStates({log})])"
            )
            raise interruption(exc, measurer, resume) from None
        raise
    measurer.close()  # (closes the live view too)
    if options.verbose:
        split = search_policy.time_split
        print(
            f"[{task.desc}] tuning done: {search_policy.num_trials} trials in "
            f"{time.perf_counter() - t0:.1f} s ({split.line()})",
            flush=True,
        )
    ledger = getattr(search_policy, "ledger", None)
    if ledger is not None:
        line = ledger.line(trials=search_policy.num_trials)
        if options.verbose:
            print(line, flush=True)
        else:
            _log.info(line)
    errors = suppressed.summary(errors_before)  # None when nothing was suppressed
    if errors:
        if options.verbose:
            print(errors, flush=True)
        else:
            _log.info(errors)
    return state


class TaskLiveView:
    """A measure callback drawing one task's tuning in a notebook: the trials measured and
    the best GFLOP/s so far against trials and seconds (:class:`~autosched.display.LiveView`).

    Parameters
    ----------
    task : SearchTask
    total_trials : int or None
    display : bool
        Show it (False: only collect the points; tests).
    """

    def __init__(self, task, total_trials, display: bool = True):
        from .display.live import LiveView

        self.flops = task.compute_dag.flop_count()
        self.view = LiveView(total_trials, f"Tuning {task.desc}", "best GFLOP/s", display)
        self.trials = 0
        self.best_cost = math.inf
        self.start = time.perf_counter()

    def callback(self, inputs, results) -> None:
        """After each measured batch (the ``ProgramMeasurer`` callback protocol)."""
        from .measure.data import MeasureErrorNo

        self.trials += len(results)
        for res in results:
            if res.error_no == MeasureErrorNo.NO_ERROR:
                self.best_cost = min(self.best_cost, res.mean_cost)
        best = None
        if math.isfinite(self.best_cost) and self.flops > 0:
            best = self.flops / self.best_cost / 1e9
        note = "" if best is None else f"best {best:.2f} GFLOP/s"
        self.view.update(self.trials, time.perf_counter() - self.start, best, note)

    def close(self) -> None:
        self.view.close()


def _notebook_view(task, total_trials) -> TaskLiveView | None:
    """The live view of ``task.tune`` when running in a notebook kernel, else None."""
    from .display.live import in_notebook

    return TaskLiveView(task, total_trials) if in_notebook() else None
