"""The timing protocol shared by every backend: warm up, repeat, report seconds per call."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class TimingResult:
    """Seconds per call; ``results`` has one entry per repeat (the mean over ``number`` calls).

    It answers both TVM result types the seed tutorials read: ``ProfileResult`` (``mean``,
    ``results``) from a time evaluator and ``BenchmarkResult`` (``mean``, ``median``, ``max``,
    ``min``, ``std``, ``results``) from ``module.benchmark``; ``str()`` is the latter's
    "Execution time summary" table, in milliseconds.
    """

    mean: float
    median: float
    results: tuple[float, ...]

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def std(self) -> float:
        """Population standard deviation of ``results`` (numpy's ``std``, as TVM uses)."""
        return statistics.pstdev(self.results)

    def __str__(self) -> str:
        # TVM's BenchmarkResult layout: every column 12 wide, centred, one space apart.
        titles = ("mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)")
        values = (self.mean, self.median, self.max, self.min, self.std)
        return (
            "Execution time summary:\n"
            + " ".join(f"{t:^12}" for t in titles)
            + "\n"
            + " ".join(f"{v * 1e3:^12.4f}" for v in values)
        )

    def _repr_html_(self) -> str:
        from .display import timing_html

        return timing_html(self)


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
