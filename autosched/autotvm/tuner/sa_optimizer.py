"""Simulated annealing over a config space under a cost model (TVM's
``SimulatedAnnealingOptimizer``): walkers change one knob at a time, accept worse points with
a probability that falls with the temperature, and the best unmeasured points seen are kept."""

from __future__ import annotations

import heapq

import numpy as np

__all__ = ["SimulatedAnnealingOptimizer"]


class SimulatedAnnealingOptimizer:
    """Find the configurations a scoring function rates highest.

    Parameters
    ----------
    task : autotvm.task.Task
    n_iter : int
        Annealing steps.
    parallel_size : int
        Walkers.
    temp : (float, float)
        Start and end temperature (scores are normalized to [0, 1] per step).
    early_stop : int
        Stop after this many steps without a change of the kept best points.
    seed : int
    """

    def __init__(self, task, n_iter: int = 500, parallel_size: int = 128, temp=(1.0, 0.0),
                 early_stop: int = 50, seed: int = 0):  # fmt: skip
        self.space = task.config_space
        self.dims = [len(s) for s in self.space.space_map.values()]
        self.n_iter = n_iter
        self.parallel_size = min(parallel_size, len(self.space))
        self.temp = temp
        self.early_stop = early_stop
        self.rng = np.random.default_rng(seed)

    def _walk(self, index: int) -> int:
        genes = self.space.knob_indices(index)
        movable = [k for k, d in enumerate(self.dims) if d > 1]
        if not movable:
            return index
        k = movable[int(self.rng.integers(len(movable)))]
        new = int(self.rng.integers(self.dims[k] - 1))
        genes[k] = new if new < genes[k] else new + 1
        return self.space.index_of(genes)

    def find_maximums(self, score, num: int, exclusive) -> list[int]:
        """Up to ``num`` indices not in ``exclusive`` with the highest ``score(indices)``."""
        n = len(self.space)
        points = self.rng.integers(n, size=self.parallel_size).tolist()
        scores = np.asarray(score(points), float)
        heap: list[tuple[float, int]] = []
        in_heap: set[int] = set()

        def keep(idx_list, sc):
            changed = False
            for i, s in zip(idx_list, sc, strict=True):
                if i in exclusive or i in in_heap or not np.isfinite(s):
                    continue
                if len(heap) < num:
                    heapq.heappush(heap, (s, i))
                    in_heap.add(i)
                    changed = True
                elif s > heap[0][0]:
                    _, old = heapq.heapreplace(heap, (s, i))
                    in_heap.discard(old)
                    in_heap.add(i)
                    changed = True
            return changed

        keep(points, scores)
        t0, t1 = self.temp
        cool = (t0 - t1) / (self.n_iter + 1)
        t, last_change = t0, 0
        for step in range(self.n_iter):
            new_points = [self._walk(p) for p in points]
            new_scores = np.asarray(score(new_points), float)
            both = np.concatenate([scores, new_scores])
            both = both[np.isfinite(both)]
            span = float(np.ptp(both)) if both.size else 0.0
            span = span or 1.0  # score differences as a fraction of the range seen
            delta = np.nan_to_num((new_scores - scores) / span, nan=-1.0, neginf=-1.0, posinf=1.0)
            accept = self.rng.random(len(points)) < np.exp(np.minimum(delta / (t + 1e-5), 0.0))
            points = [p_new if a else p for p, p_new, a in zip(points, new_points, accept)]
            scores = np.where(accept, new_scores, scores)
            if keep(new_points, new_scores):
                last_change = step
            elif step - last_change >= self.early_stop:
                break
            t -= cool
        return [i for _, i in sorted(heap, reverse=True)]
