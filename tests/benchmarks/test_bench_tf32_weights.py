"""benchmarks/bench_tf32_weights.py: the error it reports, and that it restores the switch
it flips (the builds themselves need a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from autosched.network import tf32_weights
from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_tf32_weights")


def test_the_error_is_relative_to_the_largest_output():
    ref = np.array([4.0, -8.0, 1.0])
    assert bench.relative_error(ref + [0.0, 0.0, 0.4], ref) == pytest.approx(0.05)
    assert bench.relative_error(ref, ref) == 0.0


def test_the_switch_is_restored_when_the_build_fails():
    before = tf32_weights.TF32_ROUND_WEIGHTS
    with pytest.raises(Exception):  # noqa: B017 - no network: whatever the build raises
        bench.build_and_check(None, {}, "no-such-log.json", [], [], not before)
    assert tf32_weights.TF32_ROUND_WEIGHTS is before
