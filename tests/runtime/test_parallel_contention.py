"""The parallel runtime under load: a busy process on one core must not make a parallel kernel
wait for a descheduled thread (issue 17: it was 14x its single-thread time)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import numpy as np
import pytest
from test_cpu import heavy_parallel

import runtime
import runtime.cpu as cpu
from codegen.llvm import build_llvm

RNG = np.random.default_rng(17)


@pytest.fixture
def restore_threads():
    before = cpu.get_num_threads()
    yield
    cpu.set_num_threads(before)


def _median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        time.sleep(0.003)  # other work between kernels (as in tuning): idle threads may sleep
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def test_parallel_kernel_with_a_busy_core_stays_near_its_single_thread_time(restore_threads):
    mod = runtime.load_module(**build_llvm(heavy_parallel(64, 100)).as_dict())
    a = RNG.standard_normal(64).astype("float32")
    b = RNG.standard_normal(64).astype("float32")
    ref = b.astype("float64")
    for _ in range(100):
        ref = np.tanh(ref + a)
    run = lambda: mod(a, b.copy())  # noqa: E731
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)  # let it start spinning
        single, parallel = [], []
        for _ in range(3):  # alternate, so that both see the same machine
            cpu.set_num_threads(1)
            single.append(_median_ms(run, 15))
            cpu.set_num_threads(2)
            parallel.append(_median_ms(run, 15))
    finally:
        busy.kill()
        busy.wait()
    out = b.copy()
    mod(a, out)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    one, two = statistics.median(single), statistics.median(parallel)
    print(f"busy core: 1 thread {one:.3f} ms, 2 threads {two:.3f} ms ({two / one:.1f}x)")
    assert two < 3 * one, f"2 threads took {two:.3f} ms against {one:.3f} ms on one thread"
