"""The timing protocol shared by every backend: warm up, repeat, report seconds per call."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class TimingResult:
    """Seconds per call; ``results`` has one entry per repeat (the mean over ``number`` calls)."""

    mean: float
    median: float
    results: tuple[float, ...]

    def __str__(self) -> str:
        return (
            f"TimingResult(mean={self.mean * 1e3:.4f} ms, median={self.median * 1e3:.4f} ms, "
            f"repeats={len(self.results)})"
        )


def measure(
    time_launches: Callable[[Callable[[], None], int], float],
    fn: Callable[[], None],
    number: int = 10,
    repeat: int = 3,
    min_repeat_ms: float = 0.0,
) -> TimingResult:
    """Time ``fn`` the TVM way and return a :class:`TimingResult`.

    Parameters
    ----------
    time_launches : callable
        ``time_launches(fn, number) -> mean seconds per call`` from the backend (device events on
        GPUs, ``perf_counter`` on CPU).
    fn : callable
        Enqueues one run (all launches of a module).
    number : int
        Calls averaged inside one repeat.
    repeat : int
        Independent repeats; each gives one entry of ``results``.
    min_repeat_ms : float
        ``number`` is raised until one repeat lasts at least this long, so that very short kernels
        are not dominated by timer resolution.
    """
    if number < 1 or repeat < 1:
        raise ValueError(f"number and repeat must be >= 1, got number={number}, repeat={repeat}")
    time_launches(fn, 1)  # warm-up: first-touch page faults, lazy module loading, caches
    results = []
    for _ in range(repeat):
        while True:
            t = time_launches(fn, number)
            if min_repeat_ms <= 0 or t * number * 1e3 >= min_repeat_ms:
                break
            # Grow like TVM: jump to the predicted count, but at least by the golden ratio.
            want = min_repeat_ms / max(t * 1e3, 1e-9)
            number = max(math.ceil(want), math.ceil(number * 1.618))
        results.append(t)
    return TimingResult(
        mean=sum(results) / len(results), median=statistics.median(results), results=tuple(results)
    )
