"""benchmarks/log_sketches.py without a GPU: each task's best record is classified by the sketch
its state comes from, and the weighted kernel time is shared out by kind."""

from __future__ import annotations

import pytest

from autosched.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.measure.records import save_records
from autosched.search.sketch import generate_sketches
from tests.autosched.tensor_core_helpers import (
    dense_tensors,
    first_states,
    gpu_task,
    sampled_states,
)
from tests.benchmarks.bench_loader import load_bench

bench = load_bench("log_sketches", keep_path=True)


def _states(task):
    """One sampled state of each of the task's sketches, keyed by kind."""
    out = {}
    for sketch in generate_sketches(task):
        (state,) = first_states(sampled_states(task, sketch, 0), 1)
        out[bench.sketch_kind(state)] = state
    return out


def test_the_best_record_of_each_task_names_its_sketch(tmp_path):
    tc = gpu_task(dense_tensors(128, 64, 128), target="cuda -arch=sm_90")
    states = _states(tc)
    assert set(states) == {"warpgroup", "wmma"}
    log = tmp_path / "log.json"

    def result(seconds, error=MeasureErrorNo.NO_ERROR):
        return MeasureResult((seconds,), error, "", 0.1, 1.0)

    # The warpgroup state is faster; a failed faster record does not count.
    inputs = [MeasureInput(tc, states["wmma"]), MeasureInput(tc, states["warpgroup"]),
              MeasureInput(tc, states["wmma"])]  # fmt: skip
    results = [result(4e-6), result(3e-6), result(1e-6, MeasureErrorNo.RUNTIME_DEVICE)]
    save_records(log, inputs, results)
    by_key = bench.records_by_key(log)
    rows = bench.best_rows([tc], [3], by_key)
    assert rows[0]["kind"] == "warpgroup" and rows[0]["best_us"] == pytest.approx(3.0)
    # A task without records keeps a row with no kind.
    other = gpu_task(dense_tensors(64, 64, 64), target="cuda -arch=sm_90")
    rows = bench.best_rows([tc, other], [3, 2], by_key)
    assert rows[1]["kind"] is None
    shares = bench.weighted_shares(rows)
    assert shares["warpgroup"] == {"tasks": 1, "weighted_us": pytest.approx(9.0)}
    assert shares["wmma"]["tasks"] == 0 and shares["simt"]["tasks"] == 0
