"""The task scheduler's round sizing and overlap speculation: the cost prior of a round, the
round size chosen again after the warm-up pass, the plan line printed at the start, and the
round searched ahead for the task most likely chosen next (given back on a miss).

:class:`~autosched.network.task_scheduler.TaskScheduler` keeps the state and calls these.
"""

from __future__ import annotations

from collections.abc import Sequence

from codegen.target import Target

from ..search.budget import (
    CPU_COST,
    GPU_COST,
    TVM_MEASURES_PER_ROUND,
    RoundCost,
    measures_per_round,
    observed_cost,
)

__all__ = [
    "adapt_round_size",
    "adapted_round_size",
    "builder_floor",
    "cost_prior",
    "overlapped_round",
    "plan_line",
    "release_prepared",
    "resumed_round_size",
    "take_prepared",
    "warm_up_round_size",
]


def cost_prior(tasks: Sequence) -> RoundCost:
    """What a round is expected to cost before any was measured (GPU builds differ)."""
    gpu = any(Target(str(task.target)).is_gpu for task in tasks)
    return GPU_COST if gpu else CPU_COST


def adapted_round_size(
    n_tasks: int,
    trial_limit: int | None,
    budget: float,
    round_cost: RoundCost,
    measurer,
    mean_round_s: float,
    measured: int,
) -> tuple[RoundCost, int]:
    """``(cost, size)``: the round cost corrected by a warm-up round of ``measured``
    candidates that took ``mean_round_s``, and the round size chosen again from it for the
    time ``budget`` (the priors are guesses; a loaded machine or slow builds can be several
    times off)."""
    round_cost = observed_cost(round_cost, measured, mean_round_s)
    new = measures_per_round(n_tasks, trial_limit, budget, round_cost)
    return round_cost, max(new, builder_floor(measurer))


def builder_floor(measurer) -> int:
    """The smallest automatic round after the first pass: one candidate per builder of
    ``measurer`` (1 when its runner builds them), at most TVM's 64. A smaller round leaves
    builders idle while its search costs as much (issue 29: rounds of 2 on a 16-core GPU
    host)."""
    builders = int(getattr(getattr(measurer, "builder", None), "n_parallel", 1) or 1)
    return min(builders, TVM_MEASURES_PER_ROUND)


def resumed_round_size(
    per_round: int, n_tasks: int, trial_limit: int | None, measurer
) -> tuple[int, str | None]:
    """``(size, why)``: the round size of a resumed run in which every task already has
    records, and why it differs from ``per_round`` (None when it does not).

    The automatic size sizes a first pass over all tasks to fit a quarter of *this run's*
    budget. A run resumed with what is left of a longer budget has no first pass, and that
    small remainder gave rounds of 2 on a 16-core GPU host: half the trials a minute of the
    same tune's earlier runs, most builders idle, a population of 64 (benchmarks/RESULTS.md,
    session 24). Such a run starts where the warm-up of a fresh run would have left it, with
    rounds of :func:`builder_floor` (as :func:`adapted_round_size`), and no larger than
    a trial budget gives each task.
    """
    floor = builder_floor(measurer)
    if trial_limit:
        floor = min(floor, trial_limit // max(1, n_tasks))
    if floor <= per_round:
        return per_round, None
    why = f"automatic: every task has records in the log, one candidate per builder ({floor})"
    return floor, why


def warm_up_round_size(full_round: int, trials: int | None, untuned: int) -> int:
    """The round size of the warm-up: ``full_round``, smaller when ``trials`` (the trial
    budget, None: none) cannot give a full round to each of the ``untuned`` tasks.

    Raises
    ------
    ValueError
        When not even one trial per task fits.
    """
    per_round = full_round if trials is None else min(full_round, trials // max(untuned, 1))
    if per_round <= 0:
        raise ValueError(
            f"num_measure_trials={trials} is too small for {untuned} tasks without records: "
            f"every task needs at least one round; use num_measure_trials >= {untuned} "
            f"(better >= {untuned * full_round}, one full round of {full_round} per task)"
        )
    return per_round


def adapt_round_size(ts, mean_round_s: float, measured: int) -> None:
    """After the warm-up pass of the scheduler ``ts``: with an automatic round size and a
    time budget, set its round size again from what a warm-up round of ``measured``
    candidates really cost (:func:`adapted_round_size`)."""
    budget = ts.tune_option.max_tuning_seconds
    if ts.tune_option.num_measures_per_round is not None or budget is None:
        return
    ts._round_cost, new = adapted_round_size(
        len(ts.tasks), ts._trial_limit, budget, ts._round_cost, ts.measurer, mean_round_s, measured
    )
    if new != ts.num_measures_per_round:
        ts._say(
            f"Round size: {new} candidates per round from now on (a first-pass round took "
            f"{mean_round_s:.1f} s with {measured})"
        )
        ts.num_measures_per_round = new


def plan_line(
    options, n_tasks: int, round_size: int, trial_limit: int | None, search_policy, params,
    shares_cores: bool = False, why: str | None = None,
) -> str:  # fmt: skip
    """One line: the round size and search effort of this run, and whether they are
    automatic (so a user knows what to set to change them); ``shares_cores``: the search
    takes the measurement's cores (:meth:`SearchParams.for_round`); ``why``: the reason for an
    automatic round size other than the budget's."""
    budget = [f"{options.num_measure_trials} trials"] if trial_limit else []
    if options.max_tuning_seconds is not None:
        budget.append(f"{options.max_tuning_seconds:g} s")
    auto = options.num_measures_per_round is None
    line = (
        f"Budget: {' and '.join(budget)} for {n_tasks} tasks: "
        f"{round_size} candidates per round"
        + (f" ({why or 'automatic, from the budget'})" if auto else "")
    )
    if isinstance(search_policy, str):
        from ..search.params import SearchParams

        if isinstance(params, dict):
            params = SearchParams(**params)
        params = params or SearchParams()
        effort = params.for_round(round_size, shares_cores)
        auto_effort = params.evolutionary_search_population is None
        line += (
            f", population {effort.evolutionary_search_population} x "
            f"{effort.evolutionary_search_num_iters} generations"
            + (" (automatic)" if auto_effort else "")
        )
    return line


def take_prepared(prepared, policy, num: int, speculation: dict):
    """``prepared`` (the round searched ahead, or None) if it is ``policy``'s with ``num``
    candidates; any other is given back (its seeds pending again) and counted as a miss in
    ``speculation`` (``{"hits": n, "misses": m}``)."""
    if prepared is None:
        return None
    if prepared.policy is policy and prepared.num == num:
        speculation["hits"] += 1
        return prepared
    speculation["misses"] += 1
    prepared.policy.release_round(prepared)
    return None


def release_prepared(ts) -> None:
    """Give back the round searched ahead by the scheduler ``ts``, if any (the tune ends or
    goes sequential)."""
    prepared, ts._prepared = ts._prepared, None
    if prepared is not None:
        prepared.policy.release_round(prepared)


def overlapped_round(ts, idx: int, policy, num: int, retries: int, guess_next, now):
    """``(inputs, results)`` of a round of ``num`` candidates of task ``idx`` of the scheduler
    ``ts`` (its ``policy``; up to ``retries`` more searches when one comes back empty),
    measured in a background thread while this thread searches the round of
    ``guess_next(idx)`` (kept in ``ts._prepared``; ``now()`` times the events of
    ``ts.overlap_events``). The round searched ahead by the previous call is used when it is
    this one (:func:`take_prepared`)."""
    from ..measure.overlap import InFlight

    prepared, ts._prepared = ts._prepared, None
    prepared = take_prepared(prepared, policy, num, ts.speculation)
    for _ in range(1 + max(0, retries)):
        if prepared is None:
            prepared = policy.prepare_round(num)
        if prepared.inputs:
            break
        prepared = None
    inputs = prepared.inputs if prepared is not None else []
    results: list = []
    if inputs:
        flight = InFlight(ts.measurer, inputs, ts.overlap)
        try:
            guess = guess_next(idx) if guess_next is not None else None
            nxt = ts._round_size(len(inputs))
            if guess is not None and nxt > 0 and not ts._budget_spent():
                ahead = ts.search_policies[guess]
                if hasattr(ahead, "prepare_round"):
                    ts.overlap_events.append(("search", guess, now()))
                    ts._prepared = ahead.prepare_round(nxt, in_flight=inputs)
            results = flight.result(ts.ledger)
        except BaseException:
            flight.cancel()  # a no-op once it has ended
            raise
        ts.overlap_events.append(("measured", idx, flight.finished_at))
        policy.finish_round(inputs, results)
    return inputs, results
