"""benchmarks/bench_shared_optin.py without a GPU: a log's records split by whether their
state fits 48 KiB of shared memory, and per task the best of each side as the build picks it."""

from __future__ import annotations

import pytest

from autosched.measure import MeasureInput, MeasureResult
from autosched.measure.records import save_records
from autosched.search import state_utils as su
from tensorir.lower import lower
from tests.autosched.test_dynamic_shared import big_pipelined_state, shared_bytes, tf32_dense
from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_shared_optin")


def test_records_split_at_48k_and_each_side_keeps_its_best(tmp_path):
    task = tf32_dense()
    big = big_pipelined_state(task)
    small = su.single_buffered(big)
    assert shared_bytes(lower(big)) > 48 * 1024 >= shared_bytes(lower(small))
    log = tmp_path / "log.json"
    save_records(log, [MeasureInput(task, big), MeasureInput(task, small)],
                 [MeasureResult((2e-6,)), MeasureResult((3e-6,))])  # fmt: skip
    every, within = bench.split_records(log, [task])
    assert len(every) == 2 and len(within) == 1
    (row,) = bench.task_rows([task], [3], task.target, every, within)
    assert row["weight"] == 3
    assert row["all_us"] == pytest.approx(2.0) and row["within_us"] == pytest.approx(3.0)
