"""Evolutionary search under the cost model, and the eps-greedy pick of what to measure.

Follows TVM's ``EvolutionarySearch`` (ansor-notes section 5.4): fitness-proportional (roulette)
selection on the predicted scores clamped at 0, one mutation per child with probability
``mutation_prob`` (otherwise the parent is copied), no crossover, and a bounded set of the best
*unmeasured* distinct states seen in any generation.

States are identified by their step list (``state.steps``: a tuple of frozen records, so
hashable and cheap to compare). Two different step lists can give the same program; that only
costs a duplicate measurement now and then, while printing every state to compare loop trees
(TVM's key) costs more than it saves here.
"""

from __future__ import annotations

import heapq
import itertools

import numpy as np

__all__ = ["evolutionary_search", "pick_states_eps_greedy", "state_key"]


def state_key(state) -> tuple:
    """The identity of a state for deduplication and the measured set."""
    return state.steps


def evolutionary_search(
    task,
    population: list,
    model,
    mutate,
    rng: np.random.Generator,
    *,
    out_size: int,
    num_iters: int,
    population_size: int,
    mutation_prob: float,
    exclude: set | frozenset = frozenset(),
    mutate_many=None,
) -> list:
    """Evolve ``population`` and return up to ``out_size`` best-predicted new states.

    Parameters
    ----------
    task : SearchTask
    population : list of State
        The initial population (random samples plus the best measured states).
    model : CostModel
        ``predict(task, states) -> scores`` (higher is better).
    mutate : callable
        ``mutate(task, state, seed) -> State | None`` (``seed``: an int).
    rng : numpy.random.Generator
    out_size : int
        How many states to return (TVM: 2 x measures per round).
    num_iters : int
        Generations; the population is scored ``num_iters + 1`` times.
    population_size : int
        Size of every generation after the first.
    mutation_prob : float
        Probability that a child is a mutation (else a copy of its parent).
    exclude : set
        Keys (:func:`state_key`) never to return, e.g. already-measured states.
    mutate_many : callable, optional
        ``mutate_many(task, states, seeds) -> list of (State or None)``: a generation's
        mutations in one call, in place of ``mutate`` one by one (a GPU policy spreads them
        over its worker processes). Same seeds, same children.

    Returns
    -------
    list of State
        Best predicted first.
    """
    if mutate_many is None:
        mutate_many = _one_by_one(mutate)
    best: list[tuple[float, int, object]] = []  # min-heap of (score, tiebreak, state)
    in_best: set = set()
    counter = itertools.count()
    for generation in range(num_iters + 1):
        if not population:
            break
        scores = np.asarray(model.predict(task, population), dtype=np.float64)
        for state, score in zip(population, scores, strict=True):
            if not np.isfinite(score):
                continue
            key = state_key(state)
            if key in exclude or key in in_best:
                continue
            if len(best) < out_size:
                heapq.heappush(best, (score, next(counter), state))
                in_best.add(key)
            elif score > best[0][0]:
                _, _, dropped = heapq.heapreplace(best, (score, next(counter), state))
                in_best.discard(state_key(dropped))
                in_best.add(key)
        if generation == num_iters:
            break
        population = _next_generation(
            task, population, scores, mutate_many, rng, population_size, mutation_prob
        )
    return [state for _, _, state in sorted(best, key=lambda x: (-x[0], x[1]))]


def _one_by_one(mutate):
    def mutate_many(task, states, seeds):
        return [mutate(task, s, x) for s, x in zip(states, seeds, strict=True)]

    return mutate_many


def _next_generation(task, population, scores, mutate_many, rng, size, mutation_prob) -> list:
    weights = np.where(np.isfinite(scores), np.maximum(scores, 0.0), 0.0)
    total = weights.sum()
    probs = weights / total if total > 0 else None  # None: uniform (all scores <= 0)
    out = []
    # Parents, coin flips and mutation seeds are drawn here, the mutations made in one batch
    # per pass; the failed ones are drawn again. The attempts are bounded so that a population
    # of states that cannot be mutated does not loop forever.
    attempts = 0
    while len(out) < size and attempts < 4 * size:
        n = min(size - len(out), 4 * size - attempts)
        attempts += n
        parents = rng.choice(len(population), size=n, p=probs)
        mutating = rng.random(n) < mutation_prob
        seeds = [int(x) for x in rng.integers(0, 2**63 - 1, size=int(mutating.sum()))]
        chosen = [population[i] for i, m in zip(parents, mutating, strict=True) if m]
        children = iter(mutate_many(task, chosen, seeds))
        for i, m in zip(parents, mutating, strict=True):
            if not m:
                out.append(population[i])
            elif (child := next(children)) is not None:
                out.append(child)
    return out


def pick_states_eps_greedy(
    best_states: list, random_states: list, num_measure: int, eps: float, measured: set
) -> list:
    """Take ``num_measure`` states: mostly the best predicted, ``eps`` of them random.

    Skips states whose key is in ``measured`` and adds the picked keys to it.
    """
    num_random = int(eps * num_measure)
    num_good = num_measure - num_random
    picked = []
    good, rand = iter(best_states), iter(random_states)

    def take(primary, fallback) -> bool:
        for source in (primary, fallback):
            for state in source:
                key = state_key(state)
                if key not in measured:
                    measured.add(key)
                    picked.append(state)
                    return True
        return False

    while len(picked) < num_measure:
        primary, fallback = (good, rand) if len(picked) < num_good else (rand, good)
        if not take(primary, fallback):
            break
    return picked
