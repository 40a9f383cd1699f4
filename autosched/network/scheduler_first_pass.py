"""The task scheduler's first pass of a short budget: the default schedule of every task
without records measured first, together, without any search (so that every task has a
latency before the budget runs out).

:meth:`~autosched.network.task_scheduler.TaskScheduler.tune` runs it when
``budget.first_pass_is_short``.
"""

from __future__ import annotations

from ..measure.timing import phase

__all__ = ["FIRST_PASS_ROUND", "seed_pass"]

# The ledger's task name of a batch of the short-budget first pass (``seed_pass``).
FIRST_PASS_ROUND = "first pass (default schedules)"


def seed_pass(ts, more_trials) -> int:
    """The first pass of a short budget (``budget.first_pass_is_short``): measure the
    default schedule of every task without records, in batches that keep every builder
    busy, without any search; each counts as the task's first round of the scheduler ``ts``.
    Tasks without a default schedule get a searched warm-up round after it. Returns the tasks
    seeded."""
    todo = [
        i
        for i, policy in enumerate(ts.search_policies)
        if not ts.task_cts[i]
        and hasattr(policy, "take_seeds")
        and getattr(policy, "pending_seeds", None)
    ]
    if ts._trial_limit is not None:
        todo = todo[: max(0, ts._trial_limit - ts.ct)]
    if not todo:
        return 0
    ts._say(
        f"First pass: the default schedules of {len(todo)} tasks, measured together "
        "(a short budget: no search until every task has a latency)"
    )
    chunk = 2 * max(1, getattr(ts.measurer.builder, "n_parallel", 1))
    done = 0
    for lo in range(0, len(todo), chunk):
        if not more_trials():
            break
        # Taken batch by batch: a seed not measured (the budget ended) stays pending.
        part = [(i, inp) for i in todo[lo : lo + chunk]
                for inp in ts.search_policies[i].take_seeds(1)]  # fmt: skip
        if not part:
            continue
        for i, _ in part:
            for cb in ts.callbacks:
                cb.pre_tune(ts, i)
        results = ts.measurer.measure([inp for _, inp in part])
        models: dict[int, tuple] = {}  # train each cost model once per batch
        for (i, inp), res in zip(part, results, strict=True):
            policy = ts.search_policies[i]
            policy.learn([inp], [res], train=False)
            entry = models.setdefault(id(policy.model), (policy.model, [], []))
            entry[1].append(inp)
            entry[2].append(res)
        for model, inputs, res_list in models.values():
            with phase("train"):
                model.update(inputs, res_list)
        for (i, inp), res in zip(part, results, strict=True):
            ts._account(i, [inp], [res])
        ts.ledger.end_round(len(part), FIRST_PASS_ROUND)  # one row per batch
        done += len(part)
    return done
