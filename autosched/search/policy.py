"""``SketchPolicy``: sketches -> random annotation -> evolution under the cost model -> measure.

One search round (ansor-notes 5.2): sample the initial population from the sketches, add the
best measured states, evolve, pick ``num_measure`` states eps-greedily, measure them, retrain
the model on everything measured so far. ``search`` repeats rounds until the trial budget is
spent; the task scheduler calls ``continue_search_one_round`` instead.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..measure.data import MAX_COST, MeasureErrorNo, MeasureInput
from ..measure.timing import TimeLedger, phase
from ..suppressed import suppressed
from .budget import TVM_MEASURES_PER_ROUND
from .evolution import evolutionary_search, pick_states_eps_greedy, state_key

__all__ = [
    "PreloadCustomSketchRule",
    "PreloadMeasuredStates",
    "PreparedRound",
    "SketchPolicy",
    "TimeSplit",
]

_log = logging.getLogger(__name__)


@dataclass
class TimeSplit:
    """Wall seconds of a tuning run by activity (user-pains 2: report the split every run); a
    coarse view of the policy's :class:`~autosched.measure.timing.TimeLedger`."""

    search: float = 0.0  # sampling, evolution, feature extraction and prediction
    build: float = 0.0
    run: float = 0.0
    train: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def total(self) -> float:
        return self.search + self.build + self.run + self.train

    @classmethod
    def of(cls, ledger: TimeLedger) -> TimeSplit:
        """The split of a ledger: search = sampling, evolution, features and prediction."""
        sec = ledger.seconds
        return cls(
            search=sec["sample"] + sec["evolve"] + sec["features"] + sec["predict"],
            build=sec["lower"] + sec["codegen"] + sec["compile"] + sec["wait"],
            run=sec["run"],
            train=sec["train"],
        )

    def line(self) -> str:
        return (f"search {self.search:.1f} s, build {self.build:.1f} s, run {self.run:.1f} s, "
                f"train {self.train:.1f} s")  # fmt: skip


@dataclass
class PreparedRound:
    """A round's candidates, searched and picked but not measured yet
    (:meth:`SketchPolicy.prepare_round`).

    Attributes
    ----------
    policy : SketchPolicy
    inputs : list of MeasureInput
        The candidates, the policy's pending seeds first.
    seeds : int
        How many of ``inputs`` are seeds (given back by ``release_round``).
    num : int
        The round size asked for.
    """

    policy: SketchPolicy
    inputs: list
    seeds: int
    num: int


class SketchPolicy:
    """The Ansor search policy for one task.

    Parameters
    ----------
    task : SearchTask
    program_cost_model : CostModel, optional
        Defaults to a :class:`~autosched.cost_model.model.RandomModel`.
    params : SearchParams, optional
        Search knobs (population, generations, mutation probability, eps-greedy...).
    seed : int, optional
        Seeds every random choice of this policy (sampling, mutation, eps-greedy).
    verbose : int
        0 silent, 1 a line per round, 2 also sampling / evolution details.
    init_search_callbacks : list, optional
        Objects with ``enter(policy)``, e.g. :class:`PreloadMeasuredStates`.

    Attributes
    ----------
    ledger : TimeLedger
        Where this policy's rounds spend their time (:mod:`autosched.measure.timing`); the
        task scheduler gives all its policies one shared ledger. ``time_split`` is its coarse
        view (search / build / run / train).
    search_shares_cores : bool
        Whether the search takes the cores its candidates are measured on (rounds not
        overlapped: the local CPU), so that an automatic search effort spends less per
        candidate (:func:`~autosched.search.budget.search_effort`). Set from the measurer
        when tuning starts; until then, True for a CPU target.
    """

    def __init__(
        self,
        task,
        program_cost_model=None,
        params=None,
        seed: int | None = None,
        verbose: int = 1,
        init_search_callbacks=None,
    ):
        from ..cost_model.model import RandomModel
        from .params import SearchParams

        self.task = task
        self.model = program_cost_model if program_cost_model is not None else RandomModel(seed)
        self.params = params if params is not None else SearchParams()
        self.rng = np.random.default_rng(seed)
        self.verbose = verbose
        self.sketch_rules = None  # None: the default rules for the target
        self.measured_keys: set = set()
        self.measured: list[tuple[float, object]] = []  # (throughput, state), errors excluded
        self.best_cost = MAX_COST
        self.best_state = None
        self.num_trials = 0
        self.ledger = TimeLedger()
        self._sketches = None
        self._ahead: PreparedRound | None = None  # the next round, searched while measuring
        self.pending_seeds: list = []  # states to measure before searched ones (SeedStates)
        self.search_shares_cores = not task.target.is_gpu
        for callback in init_search_callbacks or ():
            callback.enter(self)

    @property
    def time_split(self) -> TimeSplit:
        """Seconds by activity so far (of every policy sharing the ledger)."""
        return TimeSplit.of(self.ledger)

    # ------------------------------------------------------------------ sketches and samples

    @property
    def sketches(self) -> list:
        """The task's sketches (generated once)."""
        if self._sketches is None:
            from .sketch import generate_sketches

            self._sketches = generate_sketches(self.task, self.sketch_rules, self.params)
            if not self._sketches:
                raise RuntimeError(
                    f"no sketch could be generated for task {self.task.desc!r}; "
                    "check the DAG (print(task.compute_dag))"
                )
        return self._sketches

    def sample_initial_population(self, params=None) -> list:
        """Random concrete states from the sketches (at least ``sample_init_min_population``)."""
        from .annotate import sample_init_population
        from .sample_pool import sample_gpu_states

        p = (self.params if params is None else params).for_round(TVM_MEASURES_PER_ROUND)
        out: dict = {}
        target, fruitless = p.evolutionary_search_population, 0
        # GPU samples (annotated, lowered and verified: the costly kind) are drawn in seeded
        # chunks over the worker processes; CPU samples in this process.
        sample = sample_gpu_states if self.task.target.is_gpu else sample_init_population
        with phase("sample"):
            while len(out) < max(1, p.sample_init_min_population) and fruitless < 5:
                before = len(out)
                for state in sample(self.task, self.sketches, target, self.rng, p):
                    out.setdefault(state_key(state), state)
                fruitless = fruitless + 1 if len(out) == before else 0
        return list(out.values())

    def _mutate(self, task, state, rng):
        from .mutation import mutate

        return mutate(task, state, rng, self.params)

    def _mutate_gpu_many(self, task, states, seeds):
        """One generation's GPU mutations over the worker processes (each is verified against
        the device limits, the costly part; a CPU task's mutations are cheap and stay here)."""
        from .mutation_pool import mutate_gpu_states

        return mutate_gpu_states(task, states, seeds, self.params)

    # ------------------------------------------------------------------ one round

    def search_one_round(
        self, num_measure: int, population: int | None = None
    ) -> tuple[list, list]:
        """Evolve a population; return (best predicted states, random states) not yet measured.

        ``population`` overrides ``params.evolutionary_search_population`` for this round;
        population and generations left None in the params are chosen for ``num_measure``
        (:meth:`SearchParams.for_round`).
        """
        p = self.params.for_round(num_measure, self.search_shares_cores)
        if population is not None:
            p = replace(p, evolutionary_search_population=int(population))
        if getattr(self.model, "warming_up", False):
            # Random scores: evolving under them is wasted work (about 1 ms per mutation), so
            # measure fresh random samples, as many as the round needs (TVM evolves anyway).
            # Random scores: any state is as good a pick as another, so sample only what the
            # round can use (2 x num_measure picks, as many random fallbacks), not the
            # evolution's population (50 states for a round of 2: issue 29, the tuning
            # process's share; a network tune spends its first ~100 trials here).
            small = 4 * num_measure
            init = self.sample_initial_population(
                replace(p, evolutionary_search_population=small, sample_init_min_population=small)
            )
            order = self.rng.permutation(len(init))
            picks = [init[i] for i in order if state_key(init[i]) not in self.measured_keys]
            return picks[: 2 * num_measure], picks[2 * num_measure :]
        init = self.sample_initial_population(p)
        n_seed = min(len(self.measured), int(p.sample_init_use_measured_ratio * len(init)))
        seeds = [s for _, s in sorted(self.measured, key=lambda x: -x[0])[:n_seed]]
        num_random = 3 * int(p.eps_greedy * num_measure)
        random_states = [init[i] for i in self.rng.integers(0, len(init), size=num_random)]
        from ..cost_model.model import RandomModel

        num_iters = p.evolutionary_search_num_iters
        if isinstance(self.model, RandomModel):
            num_iters = min(num_iters, 2)
        with phase("evolve"):
            best = evolutionary_search(
                self.task, init + seeds, self.model, self._mutate, self.rng,
                out_size=2 * num_measure, num_iters=num_iters,
                population_size=p.evolutionary_search_population,
                mutation_prob=p.evolutionary_search_mutation_prob, exclude=self.measured_keys,
                mutate_many=self._mutate_gpu_many if self.task.target.is_gpu else None,
            )  # fmt: skip
        return best, random_states

    def continue_search_one_round(
        self, num_measure: int, measurer, population: int | None = None
    ) -> tuple[list, list]:
        """One round: search, pick, measure, retrain. Returns (inputs, results) measured.

        The round's time goes to :attr:`ledger` (one row of ``ledger.rounds``)."""
        with self.ledger.active():
            inputs, results = self._one_round(num_measure, measurer, population)
        self.ledger.end_round(len(inputs), getattr(self.task, "desc", None))
        return inputs, results

    def _one_round(self, num_measure: int, measurer, population) -> tuple[list, list]:
        prepared = self.prepare_round(num_measure, population)
        if not prepared.inputs:
            return [], []
        results = measurer.measure(prepared.inputs)  # charges the ledger: build, run, records
        self.finish_round(prepared.inputs, results)
        return prepared.inputs, results

    def prepare_round(
        self, num_measure: int, population: int | None = None, in_flight=()
    ) -> PreparedRound:
        """Search and pick a round's candidates (pending seeds first) without measuring them.

        Parameters
        ----------
        num_measure : int
        population : int, optional
            See :meth:`search_one_round`.
        in_flight : sequence of MeasureInput
            Candidates being measured while this round is searched (the task scheduler
            overlaps the next round's search with this round's measurement): never picked
            again (picking already marks a candidate measured; this makes sure). The cost
            model and the measured states (population seeds) are then one round stale, which
            only makes the search a little less informed (TVM's model is as stale between
            its retrainings).

        Returns
        -------
        PreparedRound
            Measure its ``inputs`` then call :meth:`finish_round`, or give it back with
            :meth:`release_round`.
        """
        extra = {state_key(inp.state) for inp in in_flight} - self.measured_keys
        self.measured_keys |= extra
        try:
            best, random_states = self.search_one_round(num_measure, population)
            seeds = self.take_seeds(num_measure)
            picked = pick_states_eps_greedy(
                best, random_states, num_measure - len(seeds), self.params.eps_greedy,
                self.measured_keys,
            )  # fmt: skip
        finally:
            self.measured_keys -= extra
        inputs = seeds + [MeasureInput(self.task, s) for s in picked]
        return PreparedRound(self, inputs, len(seeds), int(num_measure))

    def finish_round(self, inputs, results) -> None:
        """After a prepared round was measured: learn from it (:meth:`learn`)."""
        self.learn(inputs, results)

    def release_round(self, prepared: PreparedRound) -> None:
        """Give back a prepared round that will not be measured (a speculative search for a
        task the scheduler did not pick): its seeds are pending again and its picks may be
        picked again (picking marks them measured)."""
        for inp in prepared.inputs:
            self.measured_keys.discard(state_key(inp.state))
        self.pending_seeds[:0] = [inp.state for inp in prepared.inputs[: prepared.seeds]]

    def take_seeds(self, limit: int) -> list:
        """Up to ``limit`` pending seed states (:class:`SeedStates`) not measured yet, as
        MeasureInputs; they count as measured from now on (the caller measures them)."""
        seeds = []
        while self.pending_seeds and len(seeds) < limit:
            state = self.pending_seeds.pop(0)
            if state_key(state) not in self.measured_keys:
                self.measured_keys.add(state_key(state))
                seeds.append(MeasureInput(self.task, state))
        return seeds

    def learn(self, inputs, results, train: bool = True) -> None:
        """Add measured candidates to the measured set and (``train``) the cost model."""
        self.record_results(inputs, results)
        if train:
            with phase("train"):  # (its feature extraction is charged to "features")
                self.model.update(inputs, results)

    def record_results(self, inputs, results) -> None:
        """Add measured (or preloaded) results to the measured set and the best state."""
        for inp, res in zip(inputs, results, strict=True):
            self.measured_keys.add(state_key(inp.state))
            self.num_trials += 1
            if res.error_no != MeasureErrorNo.NO_ERROR:
                continue
            cost = res.mean_cost
            if not (np.isfinite(cost) and cost > 0):
                # Not a time (a record file or a server says 0, negative or NaN): no
                # throughput, and never the best state.
                _log.warning("search: skipping an error-free result with cost %r", cost)
                continue
            self.measured.append((1.0 / cost, inp.state))
            if cost < self.best_cost:
                self.best_cost, self.best_state = cost, inp.state

    # ------------------------------------------------------------------ whole search

    def search(
        self,
        n_trials: int | None,
        early_stopping: int | None,
        num_measures_per_round: int,
        measurer,
        max_seconds: float | None = None,
    ):
        """Rounds until ``n_trials`` are measured (or, with ``max_seconds``, until a round
        would start after that many seconds; ``n_trials`` None: only then); returns the best
        measured state (or None).

        With a :class:`~autosched.measure.local.ProgramMeasurer`, each round after the first
        is searched while the round before it is measured (:mod:`autosched.measure.overlap`;
        on the local CPU only while it is built): the same records and trial counts, the
        model and the measured states one round stale for that search."""
        start = time.perf_counter()
        from ..measure.overlap import search_shares_cores

        mode = self._overlap_mode(measurer)
        self.search_shares_cores = search_shares_cores(mode)
        try:
            return self._search_rounds(
                start, n_trials, early_stopping, num_measures_per_round, measurer, max_seconds,
                mode,
            )  # fmt: skip
        finally:
            ahead, self._ahead = self._ahead, None
            if ahead is not None:
                self.release_round(ahead)

    def _search_rounds(self, start, n_trials, early_stopping, num_measures_per_round, measurer,
                       max_seconds, mode):  # fmt: skip
        flop = self.task.compute_dag.flop_count()
        trials, best_at, empty_rounds, round_no = 0, 0, 0, 0
        limit = float("inf") if n_trials is None else n_trials
        budget = "" if n_trials is None else f"/{n_trials}"
        while trials < limit:
            if max_seconds is not None and time.perf_counter() - start >= max_seconds:
                self._say(1, f"time budget of {max_seconds:g} s spent; stopping")
                break
            round_no += 1
            num = int(min(num_measures_per_round, limit - trials))
            best_before = self.best_cost
            population = self._round_population(num, num_measures_per_round)
            if mode == "off":
                inputs, results = self.continue_search_one_round(num, measurer, population)
            else:
                # The next round is searched while this one is measured, unless none follows.
                late = max_seconds is not None and time.perf_counter() - start >= max_seconds
                nxt = 0 if late else int(min(num_measures_per_round, limit - trials - num))
                inputs, results = self._overlapped_round(
                    num, population, measurer, mode, nxt,
                    self._round_population(nxt, num_measures_per_round) if nxt > 0 else None,
                )  # fmt: skip
            if not inputs:
                empty_rounds += 1
                if empty_rounds > self.params.retry_search_one_round_on_empty:
                    self._say(1, "all candidates measured; stopping early")
                    break
                continue
            empty_rounds = 0
            trials += len(inputs)
            if self.best_cost < best_before:
                best_at = trials
            errors = sum(r.error_no != MeasureErrorNo.NO_ERROR for r in results)
            gflops = flop / self.best_cost / 1e9 if self.best_cost < MAX_COST else 0.0
            self._say(
                1,
                f"[{self.task.desc}] round {round_no}: trials {trials}{budget}, "
                f"best {gflops:.2f} GFLOP/s ({self.best_cost * 1e3:.4g} ms), errors {errors}, "
                f"{time.perf_counter() - start:.1f} s ({self.time_split.line()})",
            )
            stalled = early_stopping is not None and trials - best_at > early_stopping >= 0
            if stalled and self.best_state is not None:
                self._say(1, f"no improvement in {early_stopping} trials; stopping early")
                break
        return self.best_state

    def _overlap_mode(self, measurer) -> str:
        """How far :meth:`search` overlaps a round's search with the previous round's
        measurement (:func:`autosched.measure.overlap.overlap_mode`); "off" for a measurer
        other than :class:`~autosched.measure.local.ProgramMeasurer`."""
        from ..measure.local import ProgramMeasurer
        from ..measure.overlap import overlap_mode

        if not isinstance(measurer, ProgramMeasurer):
            return "off"
        return overlap_mode([self.task.target], measurer.runner)

    def _overlapped_round(
        self, num: int, population, measurer, mode: str, next_num: int, next_population
    ) -> tuple[list, list]:
        """One round measured in the background while the next (``next_num`` candidates,
        0: none) is searched from the model as it is (one round stale); that search is
        :attr:`_ahead`, used by the next call when its size matches."""
        from ..measure.overlap import InFlight

        with self.ledger.active():
            prepared, self._ahead = self._ahead, None
            if prepared is not None and prepared.num != num:
                self.release_round(prepared)
                prepared = None
            if prepared is None:
                prepared = self.prepare_round(num, population)
            inputs, results = prepared.inputs, []
            if inputs:
                flight = InFlight(measurer, inputs, mode)
                try:
                    if next_num > 0:
                        self._ahead = self.prepare_round(
                            next_num, next_population, in_flight=inputs
                        )
                    results = flight.result(self.ledger)
                except BaseException:
                    flight.cancel()  # a no-op once it has ended
                    raise
                self.finish_round(inputs, results)
        self.ledger.end_round(len(inputs), getattr(self.task, "desc", None))
        return inputs, results

    def _round_population(self, num: int, per_round: int) -> int | None:
        """The population of a short round (see ``SearchParams.scale_population_to_batch``)."""
        p = self.params
        if p.evolutionary_search_population is None:
            return None  # automatic: already chosen for the round's size
        if not p.scale_population_to_batch or num >= per_round:
            return None
        scaled = -(-p.evolutionary_search_population * num // per_round)  # ceil
        return max(scaled, p.sample_init_min_population)

    def _say(self, level: int, msg: str) -> None:
        # verbose prints the seed's progress lines; below that level the same line goes to
        # the "autosched" logger at DEBUG, so a quiet run can still be diagnosed.
        if self.verbose >= level:
            print(msg, flush=True)
        else:
            _log.debug(msg)


class PreloadMeasuredStates:
    """An init-search callback that resumes from a log (TVM's ``PreloadMeasuredStates``).

    Every record of the policy's task in ``filename`` joins the measured set (it is never
    measured again); error-free ones also seed later populations with their throughput.
    """

    def __init__(self, filename):
        self.filename = filename

    def enter(self, policy: SketchPolicy) -> None:
        from pathlib import Path

        from ..measure.records import load_records

        if not Path(self.filename).exists():
            return
        task = policy.task
        inputs, results, skipped = [], [], 0
        for inp, res in load_records(self.filename, {task.workload_key: task.compute_dag}):
            if inp.task.workload_key != task.workload_key or str(inp.task.target) != str(
                task.target
            ):
                continue
            try:
                state = inp.state.to_state(task.compute_dag)
            except Exception as exc:  # noqa: BLE001 - a record from an older step format: skip it
                if not isinstance(exc, ValueError):  # ScheduleError: stale; else a bug
                    suppressed("records")
                skipped += 1
                continue
            inputs.append(MeasureInput(task, state))
            results.append(res)
        policy.record_results(inputs, results)
        policy.num_trials -= len(inputs)  # preloaded records are not trials of this run
        policy._say(
            1,
            f"[{task.desc}] resumed {len(inputs)} measured states from {self.filename}"
            + (f" ({skipped} records could not be replayed)" if skipped else ""),
        )


class SeedStates:
    """An init-search callback: measure ``states`` first (those not measured yet), before any
    searched state. The task scheduler seeds every task with its default schedule this way, so
    that a tuned network is never slower than the untuned one because of too few trials, and
    the first round of every task gives it a latency (the estimated total is known after the
    first pass)."""

    def __init__(self, states):
        self.states = list(states)

    def enter(self, policy: SketchPolicy) -> None:
        policy.pending_seeds.extend(self.states)


class PreloadCustomSketchRule:
    """An init-search callback that puts a custom sketch rule before the default ones.

    Parameters
    ----------
    meet_condition_func : callable
        ``(ctx, state, stage_id) -> SKIP | APPLY | APPLY_AND_SKIP_REST``.
    apply_func : callable
        ``(ctx, state, stage_id) -> [(new_state, next_stage_id), ...]``.
    rule_name : str
    """

    def __init__(self, meet_condition_func, apply_func, rule_name: str = "CustomSketchRule"):
        from .sketch_rules import CustomSketchRule

        self.rule = CustomSketchRule(meet_condition_func, apply_func, rule_name)

    def enter(self, policy: SketchPolicy) -> None:
        from .sketch import default_rules

        rules = policy.sketch_rules or default_rules(policy.task.target)
        policy.sketch_rules = [self.rule, *rules]
        policy._sketches = None
