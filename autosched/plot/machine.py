"""This machine's measured peak compute and memory bandwidth, for the roofline.

Measured once per process with numpy (a float32 matrix product for the peak, a large array
copy for the bandwidth) and cached: the numbers are what a well-tuned library reaches here,
the roof a tuned kernel is compared with.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np

__all__ = ["MachinePeak", "machine_peak"]


@dataclass(frozen=True)
class MachinePeak:
    """``gflops``: float32 GFLOP/s of numpy's matrix product; ``bandwidth_gbs``: GB/s of a
    memory copy (bytes read plus written)."""

    gflops: float
    bandwidth_gbs: float


def _best_seconds(fn, repeat: int) -> float:
    fn()  # warm up (page faults, library threads)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@functools.lru_cache(maxsize=1)
def machine_peak(size: int = 1024, copy_mb: int = 64, repeat: int = 3) -> MachinePeak:
    """Measure (once per process and arguments) the peak GFLOP/s and memory GB/s.

    Parameters
    ----------
    size : int
        The square matrix product's size.
    copy_mb : int
        Megabytes copied for the bandwidth (larger than the last-level cache).
    repeat : int
        Best of this many runs.
    """
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    seconds = _best_seconds(lambda: a @ b, repeat)
    src = rng.standard_normal(copy_mb * 2**20 // 4, dtype=np.float32)
    dst = np.empty_like(src)
    copy_s = _best_seconds(lambda: np.copyto(dst, src), repeat)
    return MachinePeak(2 * size**3 / seconds / 1e9, 2 * src.nbytes / copy_s / 1e9)
