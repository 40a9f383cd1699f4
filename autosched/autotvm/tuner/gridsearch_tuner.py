"""``GridSearchTuner``: every configuration in index order."""

from __future__ import annotations

from .tuner import Tuner

__all__ = ["GridSearchTuner"]


class GridSearchTuner(Tuner):
    """Enumerate the space in index order (the first knob varies fastest)."""

    def __init__(self, task, seed: int | None = 0):
        super().__init__(task, seed)
        self.counter = 0

    def next_batch(self, batch_size: int) -> list:
        out = []
        while len(out) < batch_size and self.counter < len(self.space):
            if self.counter not in self.visited:
                out.append(self.space.get(self.counter))
            self.counter += 1
        return out

    def has_next(self) -> bool:
        return self.counter < len(self.space)
