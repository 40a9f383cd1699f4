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


# An attempt shorter than this fraction of ``min_repeat_ms`` is too short to predict from.
CALIBRATE_BELOW = 1 / 20
# The fraction of ``min_repeat_ms`` a calibrating attempt aims at.
CALIBRATION = 1 / 10
# Aim this far past ``min_repeat_ms``: an estimate a little low must not cost another attempt.
MARGIN = 1.05


def next_number(number: int, seconds_per_call: float, min_repeat_ms: float) -> int:
    """The ``number`` of the next attempt after one of ``number`` calls at ``seconds_per_call``
    fell short of ``min_repeat_ms``.

    TVM jumps to the count that the short attempt predicts (at least 1.618x). A few calls
    predict badly: on a GPU the first launch's latency and the events' resolution are spread
    over 3 calls of tens of microseconds, so the prediction fell ~15% short and a third attempt
    of 1.618x followed; every candidate of a resnet-18 tune on the H100 was timed for about
    0.7 s under ``min_repeat_ms=300`` (session 7, benchmarks/RESULTS.md). So an attempt under
    :data:`CALIBRATE_BELOW` of the minimum is followed by one of about :data:`CALIBRATION` of
    it, long enough to predict from, and predictions aim :data:`MARGIN` past the minimum:
    about 1.15x ``min_repeat_ms`` in all instead of up to 2.3x. Each attempt is still at least
    1.618x the last.
    """
    per_call_ms = max(seconds_per_call * 1e3, 1e-9)
    short = per_call_ms * number < min_repeat_ms * CALIBRATE_BELOW
    aim = min_repeat_ms * (CALIBRATION if short else MARGIN)
    return max(math.ceil(aim / per_call_ms), math.ceil(number * 1.618))


def measure(
    time_launches: Callable[[Callable[[], None], int], float],
    fn: Callable[[], None],
    number: int = 10,
    repeat: int = 3,
    min_repeat_ms: float = 0.0,
    warm_up: bool = True,
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
    warm_up : bool
        Run ``fn`` once untimed first (False where the caller just ran it).
    """
    if number < 1 or repeat < 1:
        raise ValueError(f"number and repeat must be >= 1, got number={number}, repeat={repeat}")
    if warm_up:  # first-touch page faults, lazy module loading, caches
        time_launches(fn, 1)
    results = []
    for _ in range(repeat):
        while True:
            t = time_launches(fn, number)
            if min_repeat_ms <= 0 or t * number * 1e3 >= min_repeat_ms:
                break
            number = next_number(number, t, min_repeat_ms)
        results.append(t)
    return TimingResult(
        mean=sum(results) / len(results), median=statistics.median(results), results=tuple(results)
    )


# A run shorter than this is timed as replays of a graph of several runs (GPU): launched one by
# one from Python, back-to-back runs cannot start faster than the host issues them.
SHORT_RUN_S = 50e-6
# Runs per replayed graph: the graph's own launch (a few us) then overlaps the GPU's work.
RUNS_PER_GRAPH = 10


def measure_short_runs(
    time_launches: Callable[[Callable[[], None], int], float],
    fn: Callable[[], None],
    replay_of: Callable[[int], Callable[[], None] | None],
    number: int = 10,
    repeat: int = 3,
    min_repeat_ms: float = 0.0,
) -> TimingResult:
    """:func:`measure`, except that a run shorter than :data:`SHORT_RUN_S` is timed as replays
    of a graph holding :data:`RUNS_PER_GRAPH` runs.

    Launched back to back from Python, runs of a GPU kernel start no faster than the host
    issues them: about 5 us apart through pycuda on an H100's host, so every kernel faster
    than that timed the same and the search could not rank them (bert-base float16, session 17,
    benchmarks/RESULTS.md: its layer norms, softmaxes and attention matmuls take 2-4 us). A
    network runs its kernels as one replayed CUDA graph, about 1 us apart; so are these runs.

    Parameters
    ----------
    time_launches, fn, number, repeat, min_repeat_ms
        As :func:`measure`.
    replay_of : callable
        ``replay_of(runs)`` -> a function enqueuing one replay of a graph of ``runs`` runs of
        ``fn``, or None where graphs cannot be made; then (or when the run is long) ``fn`` is
        timed as :func:`measure` does.

    Returns
    -------
    TimingResult
        Seconds per run.
    """
    first = time_launches(fn, 1)  # also the warm-up: lazy loading, page faults
    replay = replay_of(RUNS_PER_GRAPH) if first < SHORT_RUN_S else None
    if replay is None:  # the run above was the warm-up
        return measure(time_launches, fn, number, repeat, min_repeat_ms, warm_up=False)
    graphs = max(1, math.ceil(number / RUNS_PER_GRAPH))
    per_graph = measure(time_launches, replay, graphs, repeat, min_repeat_ms)
    results = tuple(r / RUNS_PER_GRAPH for r in per_graph.results)
    return TimingResult(
        mean=per_graph.mean / RUNS_PER_GRAPH,
        median=per_graph.median / RUNS_PER_GRAPH,
        results=results,
    )
