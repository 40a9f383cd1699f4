"""``TaskScheduler``: share one trial budget among weighted tasks (Ansor's task scheduler).

Tuning a network means tuning many tasks (subgraphs), each used ``w_i`` times. The scheduler
minimises an objective of the tasks' best latencies, by default ``sum(w_i * latency_i)``, by
giving each search round (``num_measures_per_round`` trials) to the task whose tuning is expected
to lower the objective most (ansor-notes section 8):

1. optionally restore the state of a previous run from its log (``load_log_file``);
2. warm up: one round for every task not restored from the log;
3. until the budget is spent or every task is dead: pick a task (``"gradient"`` or
   ``"round-robin"``), run one round of its :class:`~autosched.search.policy.SketchPolicy`
   (``continue_search_one_round``), update its best latency; stop early when the objective has
   not improved for ``early_stopping`` trials.

All policies share one cost model and one :class:`~autosched.measure.local.ProgramMeasurer`, so a
``RecordToFile`` callback writes every task's records to one log, batch by batch (a killed run
loses at most the batch in flight and resumes with ``load_log_file``). On GPUs and RPC runners
each round is measured in a background thread while the next round is searched for the task
most likely chosen next (:mod:`autosched.measure.overlap`, ``TaskScheduler._tune_task``).

Example
-------
>>> tasks = [ansor.SearchTask(ansor.ComputeDAG(t)) for t in (wl1, wl2)]
>>> tuner = ansor.TaskScheduler(tasks, task_weights=[2, 1], load_log_file="log.json")
>>> tuner.tune(ansor.TuningOptions(num_measure_trials=2000,
...                                measure_callbacks=[ansor.RecordToFile("log.json")]))
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Sequence

import numpy as np

from codegen.target import Target

from ..cost_model.model import LGBModel, RandomModel
from ..measure.data import (
    MAX_COST,
    RETIMED,
    MeasureErrorNo,
    MeasureInput,
    steady_costs,
    steps_json_of,
    usable_cost,
)
from ..measure.timing import TimeLedger, phase
from ..search.budget import (
    CPU_COST,
    GPU_COST,
    TVM_MEASURES_PER_ROUND,
    RoundCost,
    first_pass_is_short,
    measures_per_round,
    observed_cost,
)
from ..suppressed import counts as suppressed_counts
from ..suppressed import summary as suppressed_summary
from ..suppressed import suppressed
from ..tuning import interruption, require_measuring_devices
from ..workers import TuningInterrupted, stop_on_signals
from .progress import (
    LogEstimatedLatency,
    PrintTableInfo,
    ProgressBar,
    TaskSchedulerCallback,
    record_file,
)

__all__ = [
    "LogEstimatedLatency",
    "PrintTableInfo",
    "ProgressBar",
    "TaskScheduler",
    "TaskSchedulerCallback",
    "derive_similarity_tag",
]

_log = logging.getLogger(__name__)
# The ledger's task name of a batch of the short-budget first pass (``_seed_pass``).
FIRST_PASS_ROUND = "first pass (default schedules)"
# A task is re-timed (retime_top) once this tune measured this many times retime_top candidates.
RETIME_MIN_FACTOR = 4


def derive_similarity_tag(dag, log_base: float = 1.618) -> str:
    """The similarity tag of a DAG: tasks with equal non-empty tags form a similarity group.

    The tag concatenates the ``auto_scheduler_task_scheduler_tag`` attributes of the DAG's ops
    and ``int(log_{log_base}(flop_count + 1))``. No built-in workload sets the attribute, so the
    similarity term of the gradient is dormant unless the user tags ops (as in TVM).

    Parameters
    ----------
    dag : ComputeDAG
    log_base : float
        Base of the logarithm that buckets FLOP counts.

    Returns
    -------
    str
        The tag, or ``""`` (no group) when no op is tagged.
    """
    tag = ""
    for op in dag.ops:
        attr = (getattr(op, "attrs", None) or {}).get("auto_scheduler_task_scheduler_tag")
        if attr:
            tag += f"{attr}_"
    if tag:
        tag += str(int(math.log(max(dag.flop_count(), 0) + 1, log_base)))
    return tag


class _AdaptiveLGBModel(LGBModel):
    """``LGBModel`` that skips retraining until its data grew by 20% since the last fit
    (TVM's ``adaptive_training``)."""

    last_train_size = 0

    def train(self) -> None:
        n = len(self.features)
        if self.last_train_size and n - self.last_train_size < self.last_train_size / 5:
            return
        super().train()
        self.last_train_size = n


def _make_cost_model(kind: str, num_warmup_sample: int, adaptive_training: bool):
    if kind == "random":
        return RandomModel()
    if kind in ("xgb", "lgb"):
        cls = _AdaptiveLGBModel if adaptive_training else LGBModel
        return cls(num_warmup_sample=num_warmup_sample)
    raise ValueError(
        f"unknown cost model {kind!r} in search_policy; use 'default', 'sketch.xgb' "
        "(= 'sketch.lgb') or 'sketch.random'"
    )


def _default_schedule_seed(task):
    """The default (untuned) schedule of ``task``, or None when it cannot be made. Measured
    first: the best record is then never worse than what an untuned build runs, and after the
    first pass over the tasks each of them has a latency, so the estimated total is known (a
    CPU default is rarely competitive, but a searched candidate of a first round often fails
    or is slower still)."""
    from .default_schedules import default_schedule

    if not task.target.is_gpu:
        try:
            return default_schedule(task.compute_dag, task.target)
        except ValueError:  # no seed is fine; the search goes on without it
            _log.debug(
                "no default schedule to seed %s", task.desc or task.workload_key, exc_info=True
            )
            return None
        except Exception:  # noqa: BLE001 - a bug: no seed either, but counted (strict: raised)
            suppressed("seed schedules")
            return None
    from ..search.annotate_gpu import gpu_state_errors
    from .default_schedules import default_gpu_state

    def check(state):
        errors = gpu_state_errors(task, state)
        if errors:
            raise ValueError("; ".join(errors))

    hw = task.hardware_params
    try:
        return default_gpu_state(
            task.compute_dag,
            hw.gpu_value("max_threads_per_block"),
            hw.gpu_value("warp_size"),
            check,
            task=task,
        )
    except ValueError:  # no seed is fine (a full reduction to a scalar has no default)
        _log.debug("no default schedule to seed %s", task.desc or task.workload_key, exc_info=True)
        return None
    except Exception:  # noqa: BLE001 - a bug: no seed either, but counted (strict: raised)
        suppressed("seed schedules")
        return None


class _PreloadRecords:
    """Init-search callback: add already-replayed records to a policy's measured set (what
    :class:`~autosched.search.policy.PreloadMeasuredStates` does, without re-reading the log)."""

    def __init__(self, inputs, results):
        self.inputs, self.results = inputs, results

    def enter(self, policy) -> None:
        from ..search.evolution import state_key

        keep = [
            k
            for k, inp in enumerate(self.inputs)
            if state_key(inp.state) not in policy.measured_keys
        ]
        inputs = [self.inputs[k] for k in keep]
        policy.record_results(inputs, [self.results[k] for k in keep])
        policy.num_trials -= len(inputs)  # resumed records are not trials of this run


class TaskScheduler:
    """Allocate measurement trials among tasks tuned together (round-robin or gradient).

    Parameters
    ----------
    tasks : list of SearchTask
        The tasks to tune.
    task_weights : list of float, optional
        How often each task runs in the network. The default objective is
        ``sum(w_i * latency_i)`` (plain ``sum(latency_i)`` without weights).
    objective_func : callable, optional
        ``f(best_costs) -> float`` to minimise instead of the weighted sum; it receives the
        best latency (seconds, ``1e10`` when none is valid yet) of every task.
    strategy : {"gradient", "round-robin"}
        How the next task is chosen after the warm-up round.
    load_model_file : str, optional
        A cost model saved with ``LGBModel.save``; loaded instead of training on the log.
        Loading runs no code from the file (LightGBM text and plain arrays); a model saved
        in the old pickle format is refused with a ``ValueError``: retrain and save it again.
    load_log_file : str, optional
        A log of a previous run (``RecordToFile``). Its records of these tasks (same workload
        key and target) restore trial counts, best latencies and histories, are preloaded into
        the policies (never measured again) and train the cost model; tasks found in it skip the
        warm-up round. A missing file is treated as empty.
    alpha, beta : float
        Gradient strategy: weight of the backward (observed) gradient against the forward
        (optimistic) estimate, and the factor on the similarity-group speed bound.
    gamma : float
        Accepted for TVM compatibility; unused (as in TVM).
    backward_window_size : int
        Rounds over which the backward gradient is measured.
    callbacks : list of TaskSchedulerCallback, optional
        Called before / after each round. Default: :class:`PrintTableInfo`, and
        :class:`LogEstimatedLatency` writing ``total_latency.tsv`` next to the log of the first
        ``RecordToFile`` measure callback when there is one.
    retime_top : int
        At the end of :meth:`tune`, the best ``retime_top`` candidates of each task measured by
        this call are measured once more (the records go to the log like any other) and each
        candidate's cost becomes the mean over all its measurements: a best picked from many
        noisy measurements is otherwise the luckiest one. Only tasks with at least
        ``RETIME_MIN_FACTOR * retime_top`` candidates measured by this call are re-timed, so it
        adds at most 1 / RETIME_MIN_FACTOR to their measurements. 0 turns it off.

    Attributes
    ----------
    best_costs : numpy.ndarray
        Best mean latency (seconds) found per task; ``1e10`` while there is no valid result.
    task_cts : list of int
        Rounds done per task (restored ones: ``round(records / num_measures_per_round)``).
    task_trials : list of int
        Candidates measured per task, records restored from ``load_log_file`` included.
    task_costs_history : list of list of float
        ``best_costs[i]`` after each round of task ``i``.
    task_best_cts : list of int
        The round count of task ``i`` when its best cost last improved.
    dead_tasks : set of int
        Tasks no longer tuned (search space exhausted or per-task early stopping).
    ct : int
        Trials measured by this :meth:`tune` call.
    num_measures_per_round : int
        Trials per round, fixed by :meth:`tune`.
    retimed : set of int
        Tasks whose ``best_costs`` come from the re-timing at the end of :meth:`tune`.
    ledger : TimeLedger
        Where the last :meth:`tune` spent its time, per round and in total
        (:mod:`autosched.measure.timing`), shared by its policies; :meth:`tune` ends by
        printing its one-line breakdown (``verbose >= 1``; else logged at INFO).
    overlap : {"off", "build", "full"}
        How far the last :meth:`tune` searched each next round while the round before it was
        measured (:func:`autosched.measure.overlap.overlap_mode`: ``full`` on GPUs and RPC
        runners, ``off`` on the local CPU unless ``AUTOSCHED_OVERLAP`` says otherwise).
    speculation : dict
        ``{"hits": n, "misses": m}``: rounds searched ahead for the task then chosen, and
        those given back because the gradient chose another task (or round size).
    overlap_events : list of tuple
        ``("search", task, t)`` when a round was searched ahead and ``("measured", task, t)``
        when a round's measurement ended (``time.perf_counter()``), in order.
    resume_hint : str
        How to go on after SIGINT / SIGTERM stopped :meth:`tune` (its message ends "to
        resume, <resume_hint>"; ``{log}`` is the log). The command line names its own command.
    """

    resume_hint = "run the same tuning with TaskScheduler(..., load_log_file={log})"

    def __init__(
        self,
        tasks: Sequence,
        task_weights: Sequence[float] | None = None,
        objective_func: Callable | None = None,
        strategy: str = "gradient",
        load_model_file: str | None = None,
        load_log_file: str | None = None,
        alpha: float = 0.2,
        beta: float = 2,
        gamma: float = 0.5,
        backward_window_size: int = 3,
        callbacks: Sequence | None = None,
        retime_top: int = 3,
    ):
        if isinstance(retime_top, bool) or not isinstance(retime_top, int) or retime_top < 0:
            raise ValueError(f"TaskScheduler retime_top must be an int >= 0, got {retime_top!r}")
        self.retime_top = retime_top
        self.tasks = list(tasks)
        if not self.tasks:
            raise ValueError("TaskScheduler needs at least one task")
        if strategy not in ("gradient", "round-robin"):
            raise ValueError(f"strategy must be 'gradient' or 'round-robin', got {strategy!r}")
        if task_weights is not None:
            task_weights = [float(w) for w in task_weights]
            if len(task_weights) != len(self.tasks):
                raise ValueError(
                    f"{len(task_weights)} task weights for {len(self.tasks)} tasks; give one each"
                )
        self.task_weights = task_weights
        if objective_func is not None:
            self.objective_func = objective_func
        elif task_weights is not None:
            self.objective_func = lambda costs: sum(c * w for c, w in zip(costs, task_weights))
        else:
            self.objective_func = sum
        self.strategy = strategy
        self.load_model_file = load_model_file
        self.load_log_file = load_log_file
        self._log_records = 0  # records read from load_log_file
        self.alpha = alpha
        self.beta = beta
        self.gamma = gamma
        self.backward_window_size = backward_window_size
        self.callbacks = None if callbacks is None else list(callbacks)
        self.rng = np.random.default_rng()  # ties between equal gradients

        n = len(self.tasks)
        self.task_cts = [0] * n
        self.task_best_cts = [0] * n
        self.task_trials = [0] * n
        self.task_costs_history: list[list[float]] = [[] for _ in range(n)]
        self.best_costs = np.full(n, MAX_COST)
        self.cur_score = self._compute_score(self.best_costs)
        self.dead_tasks: set[int] = set()
        self.retimed: set[int] = set()
        self.ledger = TimeLedger()
        # Per task, this tune's best candidates: steps text -> (mean cost, input, costs).
        self._top: list[dict] = [{} for _ in range(n)]
        self._measured_now = [0] * n  # error-free candidates measured by this tune, per task
        self._best_at_start = self.best_costs.copy()

        self.overlap = "off"
        self.speculation = {"hits": 0, "misses": 0}
        self.overlap_events: list[tuple[str, int, float]] = []
        self._prepared = None  # the round searched ahead (a PreparedRound)
        self.tune_option = self.measurer = self.search_policies = None
        self.num_measures_per_round: int | None = None
        self.per_task_early_stopping: int | None = None
        self.ct = self.best_ct = 0
        self.best_score = self.cur_score
        self.tic = time.time()
        self._rr_idx = -1

        # Similarity groups (dormant unless ops carry auto_scheduler_task_scheduler_tag).
        self.task_tags: list[str | None] = []
        self.tag_to_group_id: dict[str, int] = {}
        self.group_task_ids: list[list[int]] = []
        self.flop_cts: list[float] = []
        for i, task in enumerate(self.tasks):
            tag = derive_similarity_tag(task.compute_dag)
            self.task_tags.append(tag)
            self.flop_cts.append(float(task.compute_dag.flop_count()))
            if tag:
                gid = self.tag_to_group_id.setdefault(tag, len(self.group_task_ids))
                if gid == len(self.group_task_ids):
                    self.group_task_ids.append([])
                self.group_task_ids[gid].append(i)

    # ------------------------------------------------------------------ tuning

    def tune(
        self,
        tuning_options,
        search_policy="default",
        search_policy_params=None,
        adaptive_training: bool = False,
        per_task_early_stopping: int | None = None,
    ) -> None:
        """Tune all tasks together until ``tuning_options.num_measure_trials`` are measured.

        Parameters
        ----------
        tuning_options : TuningOptions
            Trials of this call (records restored from ``load_log_file`` do not count), trials
            per round, global ``early_stopping`` (trials without improvement of the objective,
            once every task has a valid result), verbosity, builder, runner and measure
            callbacks (e.g. ``RecordToFile``).
        search_policy : str or list of SketchPolicy
            ``"default"`` / ``"sketch.xgb"`` (``"sketch.lgb"``): one SketchPolicy per task
            sharing one :class:`~autosched.cost_model.model.LGBModel`; ``"sketch.random"``: sharing
            one RandomModel; or one ready policy per task (resumed records are still preloaded
            into them, skipping states they already know).
        search_policy_params : SearchParams or dict, optional
            Parameters of the policies made from a string.
        adaptive_training : bool
            Retrain the LightGBM model only once the data grew by 20% since the last training.
        per_task_early_stopping : int, optional
            A task whose best latency has not improved for more than this many trials is dead.

        Raises
        ------
        ValueError
            If ``num_measure_trials`` is smaller than the number of tasks (every task needs a
            round of at least one trial), or for an unknown policy name.
        """
        options = tuning_options
        n = len(self.tasks)
        self.tune_option = options
        self.ledger = TimeLedger()
        errors_before = suppressed_counts()
        self.per_task_early_stopping = per_task_early_stopping
        trials = self._trial_limit = options.trial_limit
        self._round_cost = self._cost_prior()
        full_round = options.num_measures_per_round
        if full_round is None:  # automatic: the first pass takes at most 1/4 of the budget
            full_round = measures_per_round(n, trials, options.max_tuning_seconds, self._round_cost)
        if self.callbacks is None:
            self.callbacks = self._default_callbacks(options)
        require_measuring_devices(self.tasks, options)
        resumed = None
        if self.load_log_file:
            # Resumed rounds are estimated with the configured round size (the previous run's,
            # most likely); only tasks without records still need a warm-up round, so the
            # budget is checked against those alone.
            self.num_measures_per_round = full_round
            resumed = self._restore_status(self.load_log_file)
        untuned = sum(1 for c in self.task_cts if not c) if resumed is not None else n
        per_round = full_round if trials is None else min(full_round, trials // max(untuned, 1))
        if per_round <= 0:
            raise ValueError(
                f"num_measure_trials={trials} is too small for {untuned} tasks without records: "
                f"every task needs at least one round; use num_measure_trials >= {untuned} "
                f"(better >= {untuned * full_round}, one full round of {full_round} per task)"
            )
        self.num_measures_per_round = per_round
        self._say(self._plan_line(search_policy, search_policy_params))
        early_stopping = options.early_stopping
        if early_stopping is None or early_stopping < 0:
            early_stopping = None

        with self.ledger.active():  # a resume's training on the log is part of the run
            self.search_policies = self._make_policies(
                search_policy, search_policy_params, adaptive_training, resumed
            )
        for policy in self.search_policies:
            if hasattr(policy, "ledger"):
                policy.ledger = self.ledger  # one ledger for the whole run
        self.measurer = options.make_measurer()
        from ..measure.overlap import overlap_mode

        self.overlap = overlap_mode([task.target for task in self.tasks], self.measurer.runner)
        self.speculation = {"hits": 0, "misses": 0}
        self.overlap_events = []
        self._prepared = None
        self._best_at_start = self.best_costs.copy()  # restored from the log
        self.ct = 0
        self.tic = time.time()
        self._rr_idx = -1
        budget = options.max_tuning_seconds
        out_of_time = False

        def more_trials() -> bool:
            nonlocal out_of_time
            if trials is not None and self.ct >= trials:
                return False
            out_of_time = budget is not None and time.time() - self.tic >= budget
            return not out_of_time

        try:
            with stop_on_signals(), self.ledger.active():  # SIGTERM unwinds like Ctrl-C
                try:
                    self._tune_rounds(n, more_trials, early_stopping)
                finally:
                    self._release_prepared()
        except BaseException as exc:
            self.measurer.close(clean=False)  # the log keeps every finished batch
            if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, TuningInterrupted):
                raise interruption(exc, self.measurer, self.resume_hint) from None
            raise
        if out_of_time:
            self._say(f"Time budget of {budget:g} s spent after {self.ct} trials; stopping.")
        try:
            with stop_on_signals(), self.ledger.active():
                self._retime_best()
        except BaseException:
            self.measurer.close(clean=False)
            raise
        self.measurer.close()
        line = self.ledger.line(trials=self.ct)
        errors = suppressed_summary(errors_before)  # None when nothing was suppressed
        for text in (line, errors) if errors else (line,):
            if options.verbose >= 1:
                print(text, flush=True)
            else:
                _log.info(text)
        for cb in self.callbacks:
            cb.finish(self)

    def _tune_rounds(self, n: int, more_trials, early_stopping) -> None:
        """The warm-up round of every task, then gradient-chosen rounds until done."""
        start, warm_up_rounds = time.time(), 0
        budget = self.tune_option.max_tuning_seconds
        seeded = 0
        if first_pass_is_short(sum(not c for c in self.task_cts), budget, self._round_cost):
            seeded = self._seed_pass(more_trials)
        seed_s = time.time() - start
        warm = [i for i in range(n) if not self.task_cts[i]]
        for k, i in enumerate(warm):  # warm-up: one round for every task without history
            if more_trials():
                # The next warm-up task is known; after the last one, the gradient's guess.
                guess = (lambda _i, w=warm[k + 1]: w) if k + 1 < len(warm) else self._guess_next
                self._tune_task(i, guess)
                warm_up_rounds += 1
        if warm_up_rounds:
            rounds_s = time.time() - start - seed_s
            self._adapt_round_size(rounds_s / warm_up_rounds, self.num_measures_per_round)
        elif seeded:
            self._adapt_round_size(seed_s / seeded, 1)
        self.best_ct, self.best_score = self.ct, self.cur_score
        while more_trials() and len(self.dead_tasks) < n:
            idx = self._choose_task()
            self._tune_task(idx, self._guess_next)
            self._adjust_similarity_group(idx)
            if self.cur_score < self.best_score:
                self.best_score, self.best_ct = self.cur_score, self.ct
            elif (
                early_stopping is not None
                and self.ct - self.best_ct >= early_stopping
                and all(usable_cost(c) for c in self.best_costs)
            ):
                self._say(
                    f"Stop early since no performance improvement in the last "
                    f"{early_stopping} measurement trials."
                )
                break

    def _seed_pass(self, more_trials) -> int:
        """The first pass of a short budget (``budget.first_pass_is_short``): measure the
        default schedule of every task without records, in batches that keep every builder
        busy, without any search; each counts as the task's first round. Tasks without a
        default schedule get a searched warm-up round after it. Returns the tasks seeded."""
        todo = [
            i
            for i, policy in enumerate(self.search_policies)
            if not self.task_cts[i]
            and hasattr(policy, "take_seeds")
            and getattr(policy, "pending_seeds", None)
        ]
        if self._trial_limit is not None:
            todo = todo[: max(0, self._trial_limit - self.ct)]
        if not todo:
            return 0
        self._say(
            f"First pass: the default schedules of {len(todo)} tasks, measured together "
            "(a short budget: no search until every task has a latency)"
        )
        chunk = 2 * max(1, getattr(self.measurer.builder, "n_parallel", 1))
        done = 0
        for lo in range(0, len(todo), chunk):
            if not more_trials():
                break
            # Taken batch by batch: a seed not measured (the budget ended) stays pending.
            part = [(i, inp) for i in todo[lo : lo + chunk]
                    for inp in self.search_policies[i].take_seeds(1)]  # fmt: skip
            if not part:
                continue
            for i, _ in part:
                for cb in self.callbacks:
                    cb.pre_tune(self, i)
            results = self.measurer.measure([inp for _, inp in part])
            models: dict[int, tuple] = {}  # train each cost model once per batch
            for (i, inp), res in zip(part, results, strict=True):
                policy = self.search_policies[i]
                policy.learn([inp], [res], train=False)
                entry = models.setdefault(id(policy.model), (policy.model, [], []))
                entry[1].append(inp)
                entry[2].append(res)
            for model, inputs, res_list in models.values():
                with phase("train"):
                    model.update(inputs, res_list)
            for (i, inp), res in zip(part, results, strict=True):
                self._account(i, [inp], [res])
            self.ledger.end_round(len(part), FIRST_PASS_ROUND)  # one row per batch
            done += len(part)
        return done

    def _tune_task(self, idx: int, guess_next: Callable | None = None) -> None:
        """One search round of task ``idx`` and the bookkeeping after it.

        With overlap on (:attr:`overlap`), the round is measured in a background thread while
        this thread searches the round of ``guess_next(idx)``, the task most likely chosen
        next (``None``: no guess); if the scheduler then picks another task or round size,
        that search is given back (:meth:`_take_prepared`)."""
        for cb in self.callbacks:
            cb.pre_tune(self, idx)
        num = self._round_size()
        policy = self.search_policies[idx]
        retries = getattr(getattr(policy, "params", None), "retry_search_one_round_on_empty", 0)
        if self.overlap == "off" or not hasattr(policy, "prepare_round"):
            self._release_prepared()
            for _ in range(1 + max(0, retries)):
                inputs, results = policy.continue_search_one_round(num, self.measurer)
                if inputs:
                    break
            self._account(idx, inputs, results)
            return
        from ..measure.overlap import InFlight

        prepared = self._take_prepared(policy, num)
        for _ in range(1 + max(0, retries)):
            if prepared is None:
                prepared = policy.prepare_round(num)
            if prepared.inputs:
                break
            prepared = None
        inputs = prepared.inputs if prepared is not None else []
        results: list = []
        if inputs:
            flight = InFlight(self.measurer, inputs, self.overlap)
            try:
                guess = guess_next(idx) if guess_next is not None else None
                nxt = self._round_size(len(inputs))
                if guess is not None and nxt > 0 and not self._budget_spent():
                    ahead = self.search_policies[guess]
                    if hasattr(ahead, "prepare_round"):
                        self.overlap_events.append(("search", guess, time.perf_counter()))
                        self._prepared = ahead.prepare_round(nxt, in_flight=inputs)
                results = flight.result(self.ledger)
            except BaseException:
                flight.cancel()  # a no-op once it has ended
                raise
            self.overlap_events.append(("measured", idx, flight.finished_at))
            policy.finish_round(inputs, results)
        self.ledger.end_round(len(inputs), getattr(self.tasks[idx], "desc", None))
        self._account(idx, inputs, results)

    def _budget_spent(self) -> bool:
        """Whether the time budget is spent (no round starts after this one)."""
        budget = self.tune_option.max_tuning_seconds
        return budget is not None and time.time() - self.tic >= budget

    def _round_size(self, in_flight: int = 0) -> int:
        """Candidates of the next round, ``in_flight`` of this tune's trials still measured."""
        num = self.num_measures_per_round
        if self._trial_limit is not None:
            num = min(num, self._trial_limit - self.ct - in_flight)
        return num

    def _take_prepared(self, policy, num: int):
        """The round searched ahead, if it is ``policy``'s with ``num`` candidates; any
        other is given back (its seeds pending again) and counted as a miss."""
        prepared, self._prepared = self._prepared, None
        if prepared is None:
            return None
        if prepared.policy is policy and prepared.num == num:
            self.speculation["hits"] += 1
            return prepared
        self.speculation["misses"] += 1
        prepared.policy.release_round(prepared)
        return None

    def _release_prepared(self) -> None:
        """Give back the round searched ahead, if any (the tune ends or goes sequential)."""
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            prepared.policy.release_round(prepared)

    def _guess_next(self, idx: int) -> int | None:
        """The task :meth:`_choose_task` most likely picks after this round of ``idx``,
        assuming the round does not improve it (None on a tie: the choice is random). Pure:
        no state changes (the round-robin index and the tie-breaking generator included)."""
        n = len(self.tasks)
        if self.strategy == "round-robin":
            j = self._rr_idx
            for _ in range(n):
                j = (j + 1) % n
                if j not in self.dead_tasks:
                    return j
            return None
        history = self.task_costs_history[idx]
        self.task_cts[idx] += 1  # the round as accounted without improvement
        history.append(float(self.best_costs[idx]))
        try:
            grads = self._gradients()
        finally:
            self.task_cts[idx] -= 1
            history.pop()
        alive = [i for i in range(n) if i not in self.dead_tasks] or list(range(n))
        values = [grads[i] for i in alive]
        if max(values) == min(values):
            return None
        return int(alive[int(np.argmin(values))])

    def _account(self, idx: int, inputs, results) -> None:
        """The bookkeeping after a round of task ``idx`` (``post_tune`` callbacks included)."""
        improved = False
        for inp, res in zip(inputs, results):
            if res.error_no != MeasureErrorNo.NO_ERROR:
                continue
            self._keep_top(idx, inp, res)
            if res.mean_cost < self.best_costs[idx]:
                self.best_costs[idx] = res.mean_cost
                improved = True
                self.retimed.discard(idx)
        self.task_cts[idx] += 1
        if improved:
            self.task_best_cts[idx] = self.task_cts[idx]
        self.task_trials[idx] += len(inputs)
        self.task_costs_history[idx].append(float(self.best_costs[idx]))
        self.ct += len(inputs)
        self.cur_score = self._compute_score(self.best_costs)
        if not inputs:
            self._say(f"Task {idx} ({self._desc(idx)}): search space exhausted; no more rounds.")
            self.dead_tasks.add(idx)
        elif self._stalled(idx):
            self._say(
                f"Task {idx} ({self._desc(idx)}): no improvement in the last "
                f"{self.per_task_early_stopping} trials; no more rounds."
            )
            self.dead_tasks.add(idx)
        for cb in self.callbacks:
            cb.post_tune(self, idx)

    def _keep_top(self, idx: int, inp, res) -> None:
        """Remember ``inp`` among task ``idx``'s ``retime_top`` best of this tune."""
        if not self.retime_top or getattr(inp, "state", None) is None:
            return
        self._measured_now[idx] += 1
        top = self._top[idx]
        key = json.dumps(steps_json_of(inp.state))
        if key not in top:
            top[key] = (res.mean_cost, inp, tuple(res.costs))
        if len(top) > self.retime_top:
            del top[max(top, key=lambda k: top[k][0])]

    def _retime_best(self) -> None:
        """Measure each task's best candidates of this tune once more and give each the mean
        over all its measurements (``steady_costs`` of the pooled costs); ``best_costs`` then
        holds the best of those. Runs once, at the end, so it costs ``retime_top`` trials per
        task tuned (ApplyHistoryBest pools a candidate's records the same way)."""
        enough = RETIME_MIN_FACTOR * self.retime_top
        tasks = [
            i for i in range(len(self.tasks)) if self._top[i] and self._measured_now[i] >= enough
        ]
        top, self._top = self._top, [{} for _ in self.tasks]
        self._measured_now = [0] * len(self.tasks)
        if not tasks:
            return
        count = sum(len(top[i]) for i in tasks)
        t0 = time.time()
        for idx in tasks:
            entries = list(top[idx].values())
            results = self.measurer.measure([inp for _, inp, _ in entries], note=RETIMED)
            pooled = []
            for (_, _, first), res in zip(entries, results):
                costs = first + (res.costs if res.error_no == MeasureErrorNo.NO_ERROR else ())
                steady = steady_costs(costs)
                pooled.append(sum(steady) / len(steady))
            before = float(self.best_costs[idx])
            # A best restored from the log (an earlier run) that beats them stays the best.
            self.best_costs[idx] = min(min(pooled), float(self._best_at_start[idx]))
            self.retimed.add(idx)
            _log.info(
                "task %d (%s): best re-timed %.4f -> %.4f ms (%d candidates)",
                idx, self._desc(idx), before * 1e3, min(pooled) * 1e3, len(entries),
            )  # fmt: skip
        self.cur_score = self._compute_score(self.best_costs)
        self._say(
            f"Re-timed the best {self.retime_top} candidates of {len(tasks)} tasks ({count} "
            f"measurements, {time.time() - t0:.1f} s); their latencies are the means over all "
            "measurements."
        )

    def _cost_prior(self) -> RoundCost:
        """What a round is expected to cost before any was measured (GPU builds differ)."""
        gpu = any(Target(str(task.target)).is_gpu for task in self.tasks)
        return GPU_COST if gpu else CPU_COST

    def _adapt_round_size(self, mean_round_s: float, measured: int) -> None:
        """After the warm-up pass: with an automatic round size and a time budget, choose the
        round size again from what a warm-up round really cost (the priors are guesses; a
        loaded machine or slow builds can be several times off)."""
        budget = self.tune_option.max_tuning_seconds
        if self.tune_option.num_measures_per_round is not None or budget is None:
            return
        self._round_cost = observed_cost(self._round_cost, measured, mean_round_s)
        new = measures_per_round(len(self.tasks), self._trial_limit, budget, self._round_cost)
        # Never smaller than the builders: a smaller round leaves builders idle while its
        # search costs as much (issue 29: rounds of 2 on a 16-core GPU host).
        builders = int(getattr(getattr(self.measurer, "builder", None), "n_parallel", 1) or 1)
        new = max(new, min(builders, TVM_MEASURES_PER_ROUND))
        if new != self.num_measures_per_round:
            self._say(
                f"Round size: {new} candidates per round from now on (a first-pass round took "
                f"{mean_round_s:.1f} s with {measured})"
            )
            self.num_measures_per_round = new

    def _plan_line(self, search_policy, params) -> str:
        """One line: the round size and search effort of this run, and whether they are
        automatic (so a user knows what to set to change them)."""
        options = self.tune_option
        budget = [f"{options.num_measure_trials} trials"] if self._trial_limit else []
        if options.max_tuning_seconds is not None:
            budget.append(f"{options.max_tuning_seconds:g} s")
        auto = options.num_measures_per_round is None
        line = (
            f"Budget: {' and '.join(budget)} for {len(self.tasks)} tasks: "
            f"{self.num_measures_per_round} candidates per round"
            + (" (automatic, from the budget)" if auto else "")
        )
        if isinstance(search_policy, str):
            from ..search.params import SearchParams

            if isinstance(params, dict):
                params = SearchParams(**params)
            params = params or SearchParams()
            effort = params.for_round(self.num_measures_per_round)
            auto_effort = params.evolutionary_search_population is None
            line += (
                f", population {effort.evolutionary_search_population} x "
                f"{effort.evolutionary_search_num_iters} generations"
                + (" (automatic)" if auto_effort else "")
            )
        return line

    def _stalled(self, idx: int) -> bool:
        if self.per_task_early_stopping is None or self.per_task_early_stopping < 0:
            return False
        no_change = (self.task_cts[idx] - self.task_best_cts[idx]) * self.num_measures_per_round
        return no_change > self.per_task_early_stopping

    # ------------------------------------------------------------------ task choice

    def _compute_score(self, costs) -> float:
        return float(self.objective_func(list(costs)))

    def _gradients(self) -> list[float]:
        """``d objective / d trials`` estimate per task (0 for dead tasks; more negative =
        larger expected decrease), ansor-notes 8.3."""
        grads = []
        delta = 1e-4
        base = self._compute_score(self.best_costs)
        for i in range(len(self.tasks)):
            if i in self.dead_tasks:
                grads.append(0.0)
                continue
            best = float(self.best_costs[i])
            costs = list(self.best_costs)
            costs[i] -= delta
            chain_grad = (base - self._compute_score(costs)) / delta
            t = self.task_cts[i]
            hist = self.task_costs_history[i]
            w = self.backward_window_size
            if t - 1 < len(hist) and t - 1 - w >= 0:
                backward_grad = (hist[t - 1] - hist[t - 1 - w]) / w
            else:
                backward_grad = 0.0
            g_next_1 = best - best / max(t, 1)
            g_next_2 = self.beta * 1e30
            gid = self.tag_to_group_id.get(self.task_tags[i] or "")
            if gid is not None and len(self.group_task_ids[gid]) > 1:
                best_flops = max(
                    self.flop_cts[j] / self.best_costs[j] for j in self.group_task_ids[gid]
                )
                g_next_2 = self.beta * self.flop_cts[i] / best_flops
            forward_grad = min(g_next_1, g_next_2) - best
            grads.append(
                chain_grad * (self.alpha * backward_grad + (1 - self.alpha) * forward_grad)
            )
        return grads

    def _choose_task(self) -> int:
        """The next task to tune (never a dead one while a live one exists)."""
        n = len(self.tasks)
        if self.strategy == "round-robin":
            idx = self._rr_idx
            for _ in range(n):
                idx = (idx + 1) % n
                if idx not in self.dead_tasks:
                    break
            self._rr_idx = idx
            return idx
        grads = self._gradients()
        alive = [i for i in range(n) if i not in self.dead_tasks] or list(range(n))
        values = [grads[i] for i in alive]
        if max(values) == min(values):
            return int(alive[self.rng.integers(len(alive))])
        return int(alive[int(np.argmin(values))])

    def _adjust_similarity_group(self, idx: int) -> None:
        """Drop ``idx`` from its group when it stays much slower than the group's best."""
        gid = self.tag_to_group_id.get(self.task_tags[idx] or "")
        if gid is None or len(self.group_task_ids[gid]) <= 1:
            return
        members = self.group_task_ids[gid]
        best_flops = max(self.flop_cts[j] / self.best_costs[j] for j in members)
        cur_flops = self.flop_cts[idx] / self.best_costs[idx]
        most_other_rounds = max(self.task_cts[j] for j in members if j != idx)
        if cur_flops < best_flops / self.beta and self.task_cts[idx] > 5 + most_other_rounds:
            self.task_tags[idx] = None
            members.remove(idx)

    # ------------------------------------------------------------------ policies and resume

    def _make_policies(self, search_policy, params, adaptive_training, resumed) -> list:
        from ..search.params import SearchParams
        from ..search.policy import SeedStates, SketchPolicy

        verbose = self.tune_option.verbose
        records = resumed or {}
        if not isinstance(search_policy, str):
            policies = list(search_policy)
            if len(policies) != len(self.tasks):
                raise ValueError(f"{len(policies)} search policies for {len(self.tasks)} tasks")
            for i, pol in enumerate(policies):
                if i in records:
                    _PreloadRecords(*records[i]).enter(pol)
            return policies
        name = "sketch.xgb" if search_policy == "default" else search_policy
        kind, _, model_kind = name.partition(".")
        if kind != "sketch" or not model_kind:
            raise ValueError(
                f"unknown search policy {search_policy!r}; use 'default', 'sketch.xgb' "
                "(= 'sketch.lgb'), 'sketch.random' or a list of SketchPolicy"
            )
        model = _make_cost_model(
            model_kind, len(self.tasks) * self.num_measures_per_round, adaptive_training
        )
        if model_kind != "random":
            model.feature_store = self._open_feature_store(records)
            if self.load_model_file and os.path.exists(self.load_model_file):
                model.load(self.load_model_file)
            elif records:
                inputs = [inp for i in sorted(records) for inp in records[i][0]]
                results = [res for i in sorted(records) for res in records[i][1]]
                with phase("train"):  # (its feature extraction is charged to "features")
                    model.update(inputs, results)
        if isinstance(params, dict):
            params = SearchParams(**params)
        policies = []
        for i, task in enumerate(self.tasks):
            callbacks = [_PreloadRecords(*records[i])] if i in records else []
            seed = _default_schedule_seed(task)
            if seed is not None:
                callbacks.append(SeedStates([seed]))
            policies.append(SketchPolicy(task, model, params, verbose=verbose,
                                         init_search_callbacks=callbacks))  # fmt: skip
        return policies

    def _open_feature_store(self, records: dict):
        """The feature rows kept beside the log this tune writes (``<log>.features.npz``),
        or None without a log. Resuming from that same log, the store keeps the rows of its
        records (``records``: the replayed ones per task); otherwise it starts afresh."""
        from ..cost_model.feature_pool import store_keys
        from ..cost_model.feature_store import FeatureStore, store_path

        log = record_file(self.tune_option)
        if log is None:
            return None
        try:
            same = self.load_log_file is not None and os.path.samefile(self.load_log_file, log)
        except OSError:  # either file is missing: nothing to resume from
            same = False
        if not same:
            return FeatureStore.open(store_path(log))
        with phase("features"):
            keep = {
                key
                for i, (inputs, _) in records.items()
                for key in store_keys(self.tasks[i], [inp.state for inp in inputs])
            }
            return FeatureStore.open(store_path(log), keep=keep, limit=self._log_records)

    def _restore_status(self, log_file) -> dict[int, tuple[list, list]]:
        """Counts, best costs and histories from ``log_file``; returns the replayed records
        per task index (``{i: (inputs, results)}``)."""
        from ..measure.records import load_records

        if not os.path.exists(log_file):
            self._say(f"TaskScheduler: {log_file} does not exist yet; starting from scratch.")
            return {}
        index: dict[tuple[str, str], int] = {}
        for i, task in enumerate(self.tasks):
            index.setdefault((task.workload_key, str(task.target)), i)
        dags = {task.workload_key: task.compute_dag for task in self.tasks}
        costs: list[list[float]] = [[] for _ in self.tasks]
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
                state = inp.state.to_state(self.tasks[i].compute_dag)
            except Exception as exc:  # noqa: BLE001 - a record from an older step format
                if not isinstance(exc, ValueError):  # ScheduleError: stale; else a bug
                    suppressed("records")
                skipped += 1
                continue
            ins, outs = replayed.setdefault(i, ([], []))
            ins.append(MeasureInput(self.tasks[i], state))
            outs.append(res)
        per_round = self.num_measures_per_round
        for i, cs in enumerate(costs):
            self.task_trials[i] = len(cs)
            # An estimate, as in TVM: exact only if the previous run used the same round size.
            # (At least one round for a task with records: it needs no warm-up round.)
            rounds = max(1, int(len(cs) / per_round + 0.5)) if cs else 0
            self.task_cts[i] = rounds
            # Best cost after each (estimated) round, and the round that reached the best.
            history = [min(cs[: r * per_round] or [MAX_COST]) for r in range(1, rounds + 1)]
            history[-1:] = [min(cs)] if rounds else []
            self.task_costs_history[i] = history
            self.best_costs[i] = min(cs) if cs else MAX_COST
            self.task_best_cts[i] = next(
                (r + 1 for r, c in enumerate(history) if c == self.best_costs[i] < MAX_COST), 0
            )
            if rounds and self._stalled(i):
                self.dead_tasks.add(i)
        self.cur_score = self._compute_score(self.best_costs)
        self._log_records = total
        used = sum(self.task_trials)
        self._say(
            f"TaskScheduler: loaded {total} records from {log_file} ({used} of these tasks)"
            + (f" ({skipped} could not be replayed)" if skipped else "")
        )
        return replayed

    # ------------------------------------------------------------------ helpers

    def _default_callbacks(self, options) -> list:
        callbacks: list = [PrintTableInfo()]
        log = record_file(options)
        if log is not None:
            callbacks.append(LogEstimatedLatency(log.parent / "total_latency.tsv"))
        return callbacks

    def _desc(self, idx: int) -> str:
        return getattr(self.tasks[idx], "desc", "") or str(idx)

    def _say(self, msg: str) -> None:
        # verbose prints the seed's progress lines; otherwise they go to the logger at DEBUG.
        if self.tune_option is None or self.tune_option.verbose >= 1:
            print(msg, flush=True)
        else:
            _log.debug(msg)

    @property
    def total_trials(self) -> int:
        """Trials of all tasks, records restored from ``load_log_file`` included."""
        return sum(self.task_trials)

    def partial_latency_ms(self) -> tuple[float | None, int]:
        """``(ms, k)``: the weighted sum of the best latencies of the ``k`` tasks that have a
        valid result (the estimate with the others left out; :meth:`estimated_latency_ms` once
        all have one, so a custom objective is used then); ``(None, 0)`` when none has."""
        valid = [i for i, c in enumerate(self.best_costs) if usable_cost(c)]
        if len(valid) == len(self.tasks):
            return self.estimated_latency_ms(), len(valid)
        if not valid:
            return None, 0
        weights = self.task_weights or [1.0] * len(self.tasks)
        return sum(weights[i] * float(self.best_costs[i]) for i in valid) * 1e3, len(valid)

    def estimated_latency_ms(self) -> float | None:
        """The objective in milliseconds, or None while some task has no valid result."""
        if all(usable_cost(c) for c in self.best_costs):
            return self.cur_score * 1e3
        return None
