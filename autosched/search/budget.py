"""Automatic round sizes: how many candidates to measure per round and how hard to search for
them, chosen from the budget (tasks, trials, seconds) when the user leaves them unset.

TVM's fixed defaults (64 candidates per round, a population of 2048 evolved for 4 generations)
suit budgets of ~1000 trials per task. With a network and a small budget they spend it badly: on
24 tasks and 400 s a round of 64 costs over a minute (on a 2-core CPU 2048 x 4 states cost tens
of seconds of search alone), so only a few tasks are ever measured and the estimated network
latency stays unknown. The rule here (issue 16, section 3):

* **Rounds**: the first pass over all tasks (one round each) takes at most
  ``FIRST_PASS_SHARE`` (a quarter) of the budget, so every task is measured early, the
  estimated total latency is known after a quarter of the time at most, and the gradient
  scheduler has about three more passes' worth of rounds to give to the tasks that matter::

      per_round = clamp(trials / (4 * n_tasks), 2, 64)                      # a trial budget
      per_round = clamp((seconds / (4 * n_tasks) - round_s) / trial_s, 2, 64)  # a time budget

  (the smaller of the two when both are given). The floor of 2 keeps one searched candidate
  beside the default schedule that the first round of every task measures; a budget below
  ``2 * n_tasks`` trials gets what fits (the task scheduler caps a round at
  ``trials // n_tasks``). The ceiling is TVM's 64.
* **Resumed runs**: a run resumed from a log in which every task has records has no first
  pass, so the rule above, applied to what is left of a longer budget, sizes rounds for a
  pass that never comes; the task scheduler starts it with one candidate per builder
  (``network.scheduler_rounds.resumed_round_size``), as a fresh run has after its first pass.
* **Short budgets**: when even rounds of 2 would not fit the first pass in its quarter
  (:func:`first_pass_is_short`), the task scheduler's first pass measures only the default
  schedules, all tasks in builder-sized batches without search (issue 29).
* **Search effort**: ``STATES_PER_CANDIDATE`` (16) state-generations per measured candidate, as
  an expert's hand-picked 400 s / 24-task setting spends (8 per round, population 128, one
  generation), in one generation until the population reaches 512, then in up to 4. That is
  where the search runs beside the measurement (GPUs, remote devices: its time is hidden).
  Where it takes the cores the candidates are built and timed on (the local CPU, whose
  rounds are sequential), every search second is a second not measuring, and the search
  costs the same per candidate while the candidates get cheaper to measure as tasks are
  tuned: there it spends ``STATES_PER_CANDIDATE_SHARED`` (8). On a 2-core CPU, resnet-18 with
  300 s then measured 1035 trials instead of 804 with 17% of the time outside building and
  running instead of 29% (issue 29's target: at most 25%), and the tuned network was no
  slower (benchmarks/RESULTS.md, session 13).
* **Costs**: ``trial_s`` (build + run of one candidate) and ``round_s`` (search + training of
  one round) start from per-target priors and are rescaled from the observed time of the first
  pass (:func:`observed_cost`), when a time budget makes them matter.

Everything is a pure function of its inputs, so the choice is deterministic and testable.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CPU_COST",
    "FIRST_PASS_SHARE",
    "GPU_COST",
    "RoundCost",
    "STATES_PER_CANDIDATE",
    "STATES_PER_CANDIDATE_SHARED",
    "first_pass_is_short",
    "measures_per_round",
    "observed_cost",
    "search_effort",
]

# TVM's per-round count: the ceiling of the automatic choice.
TVM_MEASURES_PER_ROUND = 64
# The first round of a task measures its default schedule; one more slot is the least that
# searches at all.
MIN_MEASURES_PER_ROUND = 2
# The first pass over all tasks should take at most this share of the budget.
FIRST_PASS_SHARE = 0.25
# Evolution work (population x generations) per measured candidate when the user sets neither:
# where the search runs beside the measurement, and where it shares the cores with it.
STATES_PER_CANDIDATE = 16
STATES_PER_CANDIDATE_SHARED = 8
MIN_POPULATION = 64  # above SearchParams.sample_init_min_population (50)
MAX_POPULATION = 2048  # TVM's population
MAX_GENERATIONS = 4  # TVM's generations
STATES_PER_GENERATION_STEP = 512  # one more generation per this many states of work


@dataclass(frozen=True)
class RoundCost:
    """Wall seconds of one search round: ``round_s + measured * trial_s``.

    Parameters
    ----------
    trial_s : float
        Build and run of one measured candidate.
    round_s : float
        The rest of a round: sampling, evolution, prediction, training the cost model.
    """

    trial_s: float
    round_s: float

    def seconds(self, measured: int) -> float:
        """Predicted seconds of a round measuring ``measured`` candidates."""
        return self.round_s + measured * self.trial_s


# Priors, before anything was measured. CPU: resnet-18 tasks on a loaded 2-core machine took
# ~2.5 s per round of 2 (the README main job). GPU: nvcc takes seconds per kernel but builds run
# in parallel on the host's cores, and each candidate runs ~0.1-0.2 s. The first pass corrects
# both (observed_cost).
CPU_COST = RoundCost(trial_s=0.75, round_s=1.0)
GPU_COST = RoundCost(trial_s=0.4, round_s=1.0)


def _clamp(value: float, low: int, high: int) -> int:
    return int(max(low, min(high, value)))


def measures_per_round(
    n_tasks: int,
    trials: int | None = None,
    seconds: float | None = None,
    cost: RoundCost = CPU_COST,
) -> int:
    """Candidates per round such that the first pass over ``n_tasks`` tasks takes at most
    ``FIRST_PASS_SHARE`` of the budget (module docstring).

    Parameters
    ----------
    n_tasks : int
        Tasks tuned together (1 for a single task).
    trials : int, optional
        The trial budget; None or 0: no limit on trials.
    seconds : float, optional
        The time budget; None: no limit on time.
    cost : RoundCost
        What a round costs (a prior, or :func:`observed_cost`).

    Returns
    -------
    int
        Between ``MIN_MEASURES_PER_ROUND`` and ``TVM_MEASURES_PER_ROUND``; TVM's 64 without any
        budget.
    """
    n = max(1, int(n_tasks))
    choice = float(TVM_MEASURES_PER_ROUND)
    if trials:
        choice = min(choice, trials * FIRST_PASS_SHARE / n)
    if seconds is not None:
        per_task_round_s = seconds * FIRST_PASS_SHARE / n
        choice = min(choice, (per_task_round_s - cost.round_s) / max(cost.trial_s, 1e-9))
    return _clamp(choice, MIN_MEASURES_PER_ROUND, TVM_MEASURES_PER_ROUND)


def first_pass_is_short(n_tasks: int, seconds: float | None, cost: RoundCost = CPU_COST) -> bool:
    """Whether even the smallest searched first pass (rounds of ``MIN_MEASURES_PER_ROUND``)
    would take more than ``FIRST_PASS_SHARE`` of a ``seconds`` budget. The task scheduler
    then makes the first pass measure only each task's default schedule, all tasks in one
    batch (no search, every builder busy), so that every task is measured early (issue 29:
    with 120 s, googlenet's 61 tasks were not all measured)."""
    if seconds is None:
        return False
    return max(1, int(n_tasks)) * cost.seconds(MIN_MEASURES_PER_ROUND) > FIRST_PASS_SHARE * seconds


def search_effort(num_measure: int, shares_cores: bool = False) -> tuple[int, int]:
    """``(population, generations)`` of the evolution for a round measuring ``num_measure``
    candidates: ``STATES_PER_CANDIDATE`` state-generations per candidate, or
    ``STATES_PER_CANDIDATE_SHARED`` when the search ``shares_cores`` with the measurement
    (module docstring).

    For example 2 -> (64, 1), 8 -> (128, 1), 32 -> (512, 1), 64 -> (512, 2); sharing the
    cores, 8 -> (64, 1), 32 -> (256, 1), 64 -> (512, 1).
    """
    per_candidate = STATES_PER_CANDIDATE_SHARED if shares_cores else STATES_PER_CANDIDATE
    work = per_candidate * max(1, int(num_measure))
    generations = _clamp(work // STATES_PER_GENERATION_STEP, 1, MAX_GENERATIONS)
    population = _clamp(work // generations, MIN_POPULATION, MAX_POPULATION)
    return population, generations


def observed_cost(prior: RoundCost, measured_per_round: float, mean_round_s: float) -> RoundCost:
    """``prior`` rescaled so that a round of ``measured_per_round`` candidates takes the
    observed ``mean_round_s`` (one observation cannot separate the fixed and the per-trial
    part, so their ratio is kept)."""
    predicted = prior.seconds(measured_per_round)
    if not mean_round_s > 0 or not predicted > 0:
        return prior
    scale = mean_round_s / predicted
    return RoundCost(trial_s=prior.trial_s * scale, round_s=prior.round_s * scale)
