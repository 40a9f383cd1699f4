"""How the CPU benchmarks time a call, in one place: the median wall time of back-to-back calls
(time.perf_counter), after one warm-up call."""

from __future__ import annotations

import time

import numpy as np


def median_s(fn, min_s: float, min_calls: int = 5, max_calls: int | None = 500) -> float:
    """Median seconds per call of ``fn``: one warm-up call, then calls timed one by one until
    ``min_s`` has passed and at least ``min_calls`` were timed, at most ``max_calls`` (None: no
    cap) once ``min_calls`` are in."""
    fn()  # warm-up
    times, end = [], time.perf_counter() + min_s
    while len(times) < min_calls or (
        time.perf_counter() < end and (max_calls is None or len(times) < max_calls)
    ):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))
