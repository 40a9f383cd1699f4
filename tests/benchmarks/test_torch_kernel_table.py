"""benchmarks/torch_kernel_table.py without a GPU: profiler events summed per kernel name."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.benchmarks.bench_loader import load_bench

table = load_bench("torch_kernel_table")


def _event(name: str, us: float, device: str = "CUDA"):
    return SimpleNamespace(name=name, device_time=us, device_type=SimpleNamespace(name=device))


def test_kernels_are_summed_per_run_longest_first_and_host_events_left_out():
    events = [_event("conv", 12.0), _event("relu", 2.0), _event("conv", 14.0),
              _event("relu", 3.0), _event("aten::conv2d", 99.0, device="CPU")]  # fmt: skip
    rows = table.kernel_table(events, runs=2)
    assert [r[0] for r in rows] == ["conv", "relu"]
    assert rows[0][1:] == pytest.approx((13.0, 1.0))  # 26 us over two runs, one call a run
    assert rows[1][1:] == pytest.approx((2.5, 1.0))
