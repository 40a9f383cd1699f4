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

import logging
import time
from collections.abc import Callable, Sequence

import numpy as np

from ..measure.data import MAX_COST, MeasureErrorNo, usable_cost
from ..measure.timing import TimeLedger
from ..search.budget import first_pass_is_short, measures_per_round
from ..suppressed import counts as suppressed_counts
from ..suppressed import summary as suppressed_summary
from ..tuning import interruption, require_measuring_devices
from ..workers import TuningInterrupted, stop_on_signals
from .progress import (
    LogEstimatedLatency,
    PrintTableInfo,
    ProgressBar,
    TaskSchedulerCallback,
    default_callbacks,
    record_file,
)
from .scheduler_first_pass import FIRST_PASS_ROUND, seed_pass  # noqa: F401 - re-exported
from .scheduler_models import (
    _default_schedule_seed,  # noqa: F401 - re-exported (tests)
    make_policies,
)
from .scheduler_resume import open_feature_store, restore_status
from .scheduler_retime import keep_top, retime_best
from .scheduler_rounds import (
    adapt_round_size,
    cost_prior,
    overlapped_round,
    plan_line,
    release_prepared,
    resumed_round_size,
    warm_up_round_size,
)
from .task_choice import (
    adjust_similarity_group,
    choose_task,
    derive_similarity_tag,
    gradients,
    guess_task,
    objective,
    similarity_groups,
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
# A task is re-timed (retime_top) once this tune measured this many times retime_top candidates.
RETIME_MIN_FACTOR = 4


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
        self.task_weights, self.objective_func = objective(
            task_weights, objective_func, len(self.tasks)
        )
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
        self.task_tags: list[str | None]
        self.tag_to_group_id: dict[str, int]
        self.group_task_ids: list[list[int]]
        self.flop_cts: list[float]
        self.task_tags, self.tag_to_group_id, self.group_task_ids, self.flop_cts = (
            similarity_groups(self.tasks)
        )

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
        self._round_cost = cost_prior(self.tasks)
        full_round = options.num_measures_per_round
        if full_round is None:  # automatic: the first pass takes at most 1/4 of the budget
            full_round = measures_per_round(n, trials, options.max_tuning_seconds, self._round_cost)
        if self.callbacks is None:
            self.callbacks = default_callbacks(options)
        require_measuring_devices(self.tasks, options)
        resumed = None
        if self.load_log_file:
            # Resumed rounds are estimated with the configured round size (the previous run's,
            # most likely); only tasks without records still need a warm-up round, so the
            # budget is checked against those alone.
            self.num_measures_per_round = full_round
            resumed = self._restore_status(self.load_log_file)
        untuned = sum(1 for c in self.task_cts if not c) if resumed is not None else n
        per_round = warm_up_round_size(full_round, trials, untuned)
        # Made before the round size: a resumed run sizes its rounds from the builders.
        self.measurer = options.make_measurer()
        why = None
        if resumed is not None and not untuned and options.num_measures_per_round is None:
            per_round, why = resumed_round_size(per_round, n, trials, self.measurer)
        self.num_measures_per_round = per_round
        from ..measure.overlap import overlap_mode, search_shares_cores

        self.overlap = overlap_mode([task.target for task in self.tasks], options.runner)
        shares_cores = search_shares_cores(self.overlap)
        plan = plan_line(
            options, n, per_round, trials, search_policy, search_policy_params,
            shares_cores=shares_cores, why=why,
        )  # fmt: skip
        self._say(plan)
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
            if hasattr(policy, "search_shares_cores"):
                policy.search_shares_cores = shares_cores
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
                    release_prepared(self)
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
            seeded = seed_pass(self, more_trials)
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
            adjust_similarity_group(
                idx, self.task_tags, self.tag_to_group_id, self.group_task_ids, self.flop_cts,
                self.best_costs, self.task_cts, self.beta,
            )  # fmt: skip
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

    def _tune_task(self, idx: int, guess_next: Callable | None = None) -> None:
        """One search round of task ``idx`` and the bookkeeping after it.

        With overlap on (:attr:`overlap`), the round is measured in a background thread while
        this thread searches the round of ``guess_next(idx)``, the task most likely chosen
        next (``None``: no guess); if the scheduler then picks another task or round size,
        that search is given back (:func:`~.scheduler_rounds.take_prepared`)."""
        for cb in self.callbacks:
            cb.pre_tune(self, idx)
        num = self._round_size()
        policy = self.search_policies[idx]
        retries = getattr(getattr(policy, "params", None), "retry_search_one_round_on_empty", 0)
        if self.overlap == "off" or not hasattr(policy, "prepare_round"):
            release_prepared(self)
            for _ in range(1 + max(0, retries)):
                inputs, results = policy.continue_search_one_round(num, self.measurer)
                if inputs:
                    break
            self._account(idx, inputs, results)
            return
        # Measured in the background while the round of the guessed next task is searched.
        now = lambda: time.perf_counter()  # noqa: E731 - looked up here: tests patch ``time``
        inputs, results = overlapped_round(self, idx, policy, num, retries, guess_next, now)
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

    def _guess_next(self, idx: int) -> int | None:
        """The task :meth:`_choose_task` most likely picks after this round of ``idx``,
        assuming the round does not improve it (None on a tie: the choice is random). Pure:
        no state changes (the round-robin index and the tie-breaking generator included)."""
        return guess_task(
            idx, self.strategy, self._rr_idx, len(self.tasks), self.dead_tasks, self.task_cts,
            self.task_costs_history, self.best_costs, self._gradients,
        )  # fmt: skip

    def _account(self, idx: int, inputs, results) -> None:
        """The bookkeeping after a round of task ``idx`` (``post_tune`` callbacks included)."""
        improved = False
        for inp, res in zip(inputs, results):
            if res.error_no != MeasureErrorNo.NO_ERROR:
                continue
            if self.retime_top and getattr(inp, "state", None) is not None:
                self._measured_now[idx] += 1  # candidates for the re-timing at the end
                keep_top(self._top[idx], inp, res, self.retime_top)
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

    def _retime_best(self) -> None:
        """Measure each task's best candidates of this tune once more and give each the mean
        over all its measurements (``steady_costs`` of the pooled costs); ``best_costs`` then
        holds the best of those. Runs once, at the end, so it costs ``retime_top`` trials per
        task tuned (ApplyHistoryBest pools a candidate's records the same way)."""
        retime_best(self, RETIME_MIN_FACTOR * self.retime_top, lambda: time.time())

    def _adapt_round_size(self, mean_round_s: float, measured: int) -> None:
        """After the warm-up pass: with an automatic round size and a time budget, choose the
        round size again from what a warm-up round really cost (the priors are guesses; a
        loaded machine or slow builds can be several times off)."""
        adapt_round_size(self, mean_round_s, measured)

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
        larger expected decrease), ansor-notes 8.3 (:func:`~.task_choice.gradients`)."""
        return gradients(
            self._compute_score, self.best_costs, self.task_cts, self.task_costs_history,
            self.dead_tasks, alpha=self.alpha, beta=self.beta, window=self.backward_window_size,
            task_tags=self.task_tags, tag_to_group_id=self.tag_to_group_id,
            group_task_ids=self.group_task_ids, flop_cts=self.flop_cts,
        )  # fmt: skip

    def _choose_task(self) -> int:
        """The next task to tune (never a dead one while a live one exists)."""
        idx, self._rr_idx = choose_task(
            self.strategy, self._rr_idx, len(self.tasks), self.dead_tasks, self._gradients,
            self.rng,
        )  # fmt: skip
        return idx

    # ------------------------------------------------------------------ policies and resume

    def _make_policies(self, search_policy, params, adaptive_training, resumed) -> list:
        """One policy per task, ``resumed`` records preloaded (:func:`make_policies`)."""
        records = resumed or {}
        return make_policies(
            self.tasks, search_policy, params, adaptive_training, records,
            round_size=self.num_measures_per_round, verbose=self.tune_option.verbose,
            feature_store=lambda: open_feature_store(
                self.tasks, record_file(self.tune_option), self.load_log_file, records,
                self._log_records,
            ),
            load_model_file=self.load_model_file,
        )  # fmt: skip

    def _restore_status(self, log_file) -> dict[int, tuple[list, list]]:
        """Counts, best costs and histories from ``log_file``; returns the replayed records
        per task index (``{i: (inputs, results)}``)."""
        return restore_status(self, log_file)

    # ------------------------------------------------------------------ helpers

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
