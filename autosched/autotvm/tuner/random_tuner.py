"""``RandomTuner``: configurations in a random order, each once."""

from __future__ import annotations

from .tuner import Tuner

__all__ = ["RandomTuner"]


class RandomTuner(Tuner):
    """Propose unmeasured configurations uniformly at random.

    Parameters
    ----------
    task : autotvm.task.Task
    range_idx : (int, int), optional
        Only indices in ``[lo, hi]`` (inclusive, as TVM).
    seed : int, optional
    """

    def __init__(self, task, range_idx=None, seed: int | None = 0):
        super().__init__(task, seed)
        lo, hi = range_idx if range_idx is not None else (0, len(self.space) - 1)
        if not 0 <= lo <= hi < len(self.space):
            raise ValueError(
                f"RandomTuner range_idx {range_idx!r} must lie within [0, {len(self.space) - 1}]"
            )
        self.lo, self.hi = lo, hi

    def has_next(self) -> bool:
        return len(self.visited) < self.hi - self.lo + 1

    def next_batch(self, batch_size: int) -> list:
        out, taken = [], set()
        while len(out) < batch_size and len(self.visited) + len(out) < self.hi - self.lo + 1:
            index = int(self.rng.integers(self.lo, self.hi + 1))
            if index in self.visited or index in taken:
                continue
            taken.add(index)
            out.append(self.space.get(index))
        return out
