"""``GATuner``: a genetic algorithm over the knobs (TVM's GATuner).

A gene is the list of per-knob entity indices. Each generation measures its population; the
next keeps the ``elite_num`` best, and fills up with children of parents drawn in proportion
to their measured FLOPS: one-point crossover, then each knob mutated with ``mutation_prob``.
Children already measured are redrawn (a bounded number of times).
"""

from __future__ import annotations

import numpy as np

from .tuner import Tuner

__all__ = ["GATuner"]


class GATuner(Tuner):
    """Genetic-algorithm tuner.

    Parameters
    ----------
    task : autotvm.task.Task
    pop_size : int
        Configurations per generation.
    elite_num : int
        Best configurations carried into the next generation.
    mutation_prob : float
        Chance that a child's knob takes a random entity.
    seed : int, optional
    """

    def __init__(self, task, pop_size: int = 100, elite_num: int = 3, mutation_prob: float = 0.1,
                 seed: int | None = 0):  # fmt: skip
        super().__init__(task, seed)
        if pop_size < 1 or not 0 <= elite_num <= pop_size or not 0 <= mutation_prob <= 1:
            raise ValueError(
                f"GATuner needs pop_size >= 1, 0 <= elite_num <= pop_size and mutation_prob in "
                f"[0, 1]; got {pop_size}, {elite_num}, {mutation_prob}"
            )
        self.pop_size = min(pop_size, len(self.space))
        self.elite_num = elite_num
        self.mutation_prob = mutation_prob
        self.dims = [len(s) for s in self.space.space_map.values()]
        self.scores: dict[int, float] = {}  # index -> measured FLOPS (0 when failed)
        self.population = self._random_indices(self.pop_size)
        self.elites: list[int] = []  # the best of earlier generations (measured already)
        self.trial_pt = 0

    def _random_indices(self, n: int) -> list[int]:
        out: list[int] = []
        seen = set(self.visited)
        tries = 0
        while len(out) < n and tries < 50 * n:
            tries += 1
            index = int(self.rng.integers(len(self.space)))
            if index not in seen:
                seen.add(index)
                out.append(index)
        return out

    def next_batch(self, batch_size: int) -> list:
        out = []
        while len(out) < batch_size and self.has_next():
            if self.trial_pt >= len(self.population):
                self._next_generation()
                if not self.population:
                    break
            index = self.population[self.trial_pt]
            self.trial_pt += 1
            if index not in self.visited and all(c.index != index for c in out):
                out.append(self.space.get(index))
        return out

    def update(self, inputs, results) -> None:
        for inp, res in zip(inputs, results, strict=True):
            ok = res.error_no == 0
            self.scores[inp.config.index] = self.task.flop / res.mean_cost if ok else 0.0

    def _next_generation(self) -> None:
        measured = [i for i in dict.fromkeys(self.population + self.elites) if i in self.scores]
        if not measured:
            self.population, self.trial_pt = self._random_indices(self.pop_size), 0
            return
        genes = [self.space.knob_indices(i) for i in measured]
        scores = np.array([self.scores[i] for i in measured])
        elites = [measured[k] for k in np.argsort(-scores)[: self.elite_num]]
        probs = scores + 1e-8
        probs = probs / probs.sum()
        children: list[int] = []
        seen = set(self.visited)
        tries = 0
        while len(children) < self.pop_size - len(elites) and tries < 20 * self.pop_size:
            tries += 1
            a, b = self.rng.choice(len(genes), size=2, p=probs)
            point = int(self.rng.integers(len(self.dims))) if len(self.dims) > 1 else 0
            child = genes[a][:point] + genes[b][point:]
            for k, dim in enumerate(self.dims):
                if self.rng.random() < self.mutation_prob:
                    child[k] = int(self.rng.integers(dim))
            index = self.space.index_of(child)
            if index not in seen:
                seen.add(index)
                children.append(index)
        if len(children) < self.pop_size - len(elites):  # a converged population: fresh blood
            children += self._random_indices(self.pop_size - len(elites) - len(children))
        # Elites are measured already: they stay parents of the next generation, not trials.
        self.population = children
        self.elites = elites
        self.trial_pt = 0
