"""The task scheduler's choice of the next task: similarity groups and the gradient of the
objective per task (ansor-notes section 8.3), as functions of the scheduler's numbers.

:class:`~autosched.network.task_scheduler.TaskScheduler` keeps the state (best costs, round
counts, histories, groups) and calls these; nothing here changes a scheduler but
:func:`adjust_similarity_group`, which edits the group lists it is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "adjust_similarity_group",
    "alive_tasks",
    "choose_task",
    "derive_similarity_tag",
    "gradients",
    "guess_task",
    "lowest",
    "next_round_robin",
    "objective",
    "similarity_groups",
]


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


def objective(task_weights, objective_func, n_tasks: int):
    """``(weights, func)``: the task weights as floats (or None) and the objective
    ``func(best_costs) -> float`` to minimise: ``objective_func``, else the weighted sum of
    the costs (the plain sum without weights).

    Raises
    ------
    ValueError
        When the weights are not one per task.
    """
    if task_weights is not None:
        task_weights = [float(w) for w in task_weights]
        if len(task_weights) != n_tasks:
            raise ValueError(f"{len(task_weights)} task weights for {n_tasks} tasks; give one each")
    if objective_func is not None:
        return task_weights, objective_func
    if task_weights is not None:
        return task_weights, lambda costs: sum(c * w for c, w in zip(costs, task_weights))
    return task_weights, sum


def similarity_groups(tasks: Sequence):
    """``(task_tags, tag_to_group_id, group_task_ids, flop_cts)`` of ``tasks``: each task's
    similarity tag, the group id of each tag, the tasks of each group and each task's FLOPs."""
    task_tags: list[str | None] = []
    tag_to_group_id: dict[str, int] = {}
    group_task_ids: list[list[int]] = []
    flop_cts: list[float] = []
    for i, task in enumerate(tasks):
        tag = derive_similarity_tag(task.compute_dag)
        task_tags.append(tag)
        flop_cts.append(float(task.compute_dag.flop_count()))
        if tag:
            gid = tag_to_group_id.setdefault(tag, len(group_task_ids))
            if gid == len(group_task_ids):
                group_task_ids.append([])
            group_task_ids[gid].append(i)
    return task_tags, tag_to_group_id, group_task_ids, flop_cts


def gradients(
    score: Callable,
    best_costs,
    task_cts: Sequence[int],
    histories: Sequence[Sequence[float]],
    dead: set[int],
    *,
    alpha: float,
    beta: float,
    window: int,
    task_tags: Sequence[str | None],
    tag_to_group_id: dict[str, int],
    group_task_ids: Sequence[Sequence[int]],
    flop_cts: Sequence[float],
) -> list[float]:
    """``d objective / d trials`` estimate per task (0 for dead tasks; more negative =
    larger expected decrease), ansor-notes 8.3. ``score(costs)`` is the objective,
    ``histories[i]`` task ``i``'s best cost after each of its rounds and ``window`` the
    rounds over which the backward gradient is measured."""
    grads = []
    delta = 1e-4
    base = score(best_costs)
    for i in range(len(task_cts)):
        if i in dead:
            grads.append(0.0)
            continue
        best = float(best_costs[i])
        costs = list(best_costs)
        costs[i] -= delta
        chain_grad = (base - score(costs)) / delta
        t = task_cts[i]
        hist = histories[i]
        w = window
        if t - 1 < len(hist) and t - 1 - w >= 0:
            backward_grad = (hist[t - 1] - hist[t - 1 - w]) / w
        else:
            backward_grad = 0.0
        g_next_1 = best - best / max(t, 1)
        g_next_2 = beta * 1e30
        gid = tag_to_group_id.get(task_tags[i] or "")
        if gid is not None and len(group_task_ids[gid]) > 1:
            best_flops = max(flop_cts[j] / best_costs[j] for j in group_task_ids[gid])
            g_next_2 = beta * flop_cts[i] / best_flops
        forward_grad = min(g_next_1, g_next_2) - best
        grads.append(chain_grad * (alpha * backward_grad + (1 - alpha) * forward_grad))
    return grads


def alive_tasks(n: int, dead: set[int]) -> list[int]:
    """The tasks not dead, or all ``n`` when every one is (the choice needs a candidate)."""
    return [i for i in range(n) if i not in dead] or list(range(n))


def lowest(grads: Sequence[float], alive: Sequence[int]) -> int | None:
    """The task of ``alive`` with the most negative gradient; None on a tie of all of them."""
    values = [grads[i] for i in alive]
    if max(values) == min(values):
        return None
    return int(alive[int(np.argmin(values))])


def next_round_robin(last: int, n: int, dead: set[int]) -> int | None:
    """The first task after ``last`` (cyclically) that is not dead; None when all are."""
    j = last
    for _ in range(n):
        j = (j + 1) % n
        if j not in dead:
            return j
    return None


def adjust_similarity_group(
    idx: int,
    task_tags: list[str | None],
    tag_to_group_id: dict[str, int],
    group_task_ids: list[list[int]],
    flop_cts: Sequence[float],
    best_costs,
    task_cts: Sequence[int],
    beta: float,
) -> None:
    """Drop ``idx`` from its group when it stays much slower than the group's best."""
    gid = tag_to_group_id.get(task_tags[idx] or "")
    if gid is None or len(group_task_ids[gid]) <= 1:
        return
    members = group_task_ids[gid]
    best_flops = max(flop_cts[j] / best_costs[j] for j in members)
    cur_flops = flop_cts[idx] / best_costs[idx]
    most_other_rounds = max(task_cts[j] for j in members if j != idx)
    if cur_flops < best_flops / beta and task_cts[idx] > 5 + most_other_rounds:
        task_tags[idx] = None
        members.remove(idx)


def choose_task(strategy: str, last: int, n: int, dead: set[int], grads: Callable, rng):
    """``(task, last)``: the next task to tune (never a dead one while a live one exists)
    and the round-robin index after it. ``last`` is the round-robin index, ``grads()`` the
    gradients (:func:`gradients`) and ``rng`` breaks ties between equal ones."""
    if strategy == "round-robin":
        idx = next_round_robin(last, n, dead)
        # All dead (never while tuning): the index after n steps, the last one again.
        idx = last % n if idx is None else idx
        return idx, idx
    alive = alive_tasks(n, dead)
    best = lowest(grads(), alive)
    if best is None:
        return int(alive[rng.integers(len(alive))]), last
    return best, last


def guess_task(
    idx: int,
    strategy: str,
    last: int,
    n: int,
    dead: set[int],
    task_cts: list[int],
    histories: list[list[float]],
    best_costs,
    grads: Callable,
) -> int | None:
    """The task :func:`choose_task` most likely picks after this round of ``idx``, assuming
    the round does not improve it (None on a tie: the choice is random). Pure: the round is
    added to ``task_cts`` and ``histories`` (what ``grads()`` reads) only while ``grads()``
    runs, and the round-robin index and the tie-breaking generator are left alone."""
    if strategy == "round-robin":
        return next_round_robin(last, n, dead)
    history = histories[idx]
    task_cts[idx] += 1  # the round as accounted without improvement
    history.append(float(best_costs[idx]))
    try:
        grads_after = grads()
    finally:
        task_cts[idx] -= 1
        history.pop()
    return lowest(grads_after, alive_tasks(n, dead))
