"""benchmarks/bench_cold_cache_gpu.py's summary (no GPU needed): per task, the cold time of
the state the warm ranking picks against the best cold one, weighted by the task's calls."""

from __future__ import annotations

import pytest

from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_cold_cache_gpu")


def test_weighted_sums_compare_the_warm_pick_with_the_cold_best():
    rows = [
        # task a: warm ranking picks s1 (fast warm, slow cold); s2 is best cold
        {"task": "a", "weight": 12, "warm_us": 5.0, "cold_us": 9.0},
        {"task": "a", "weight": 12, "warm_us": 6.0, "cold_us": 7.0},
        # task b: one state agrees both ways; a failed measurement is left out
        {"task": "b", "weight": 1, "warm_us": 3.0, "cold_us": 4.0},
        {"task": "b", "weight": 1, "warm_us": None, "cold_us": 2.0},
    ]
    sums = bench.weighted_sums(rows)
    assert sums["tasks"] == 2
    assert sums["warm_pick_cold_us"] == pytest.approx(12 * 9.0 + 4.0)
    assert sums["cold_pick_cold_us"] == pytest.approx(12 * 7.0 + 4.0)
