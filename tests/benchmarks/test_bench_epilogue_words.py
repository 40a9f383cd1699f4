"""benchmarks/bench_epilogue_words.py without a GPU: which logged state of a sketch it times,
and the re-timed log it writes, from which ApplyHistoryBest picks the re-timed state."""

from __future__ import annotations

import pytest

from autosched.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.measure.records import load_records, save_records
from autosched.search.sketch import generate_sketches
from tests.autosched.tensor_core_helpers import (
    dense_tensors,
    first_states,
    gpu_task,
    sampled_states,
)
from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_epilogue_words", keep_path=True)


def _result(seconds, error=MeasureErrorNo.NO_ERROR):
    return MeasureResult((seconds,), error, "", 0.1, 1.0)


def test_the_best_state_of_a_sketch_and_the_retimed_log(tmp_path):
    task = gpu_task(dense_tensors(128, 64, 128), target="cuda -arch=sm_90")
    states = {}
    for sketch in generate_sketches(task):
        (state,) = first_states(sampled_states(task, sketch, 0), 1)
        states[bench.sketch_kind(state)] = state
    log = tmp_path / "log.json"
    # wmma is the task's best (2 us); the warpgroup state's best good record is 5 us (a
    # failed faster one does not count).
    inputs = [MeasureInput(task, states["wmma"]), MeasureInput(task, states["warpgroup"]),
              MeasureInput(task, states["warpgroup"])]  # fmt: skip
    save_records(log, inputs, [_result(2e-6), _result(5e-6),
                               _result(1e-6, MeasureErrorNo.RUNTIME_DEVICE)])  # fmt: skip
    records = bench.records_by_key(log)[task.workload_key]
    inp, state = bench.best_of_kind(task, records, "warpgroup")
    assert bench.sketch_kind(state) == "warpgroup"
    assert bench.best_of_kind(task, records, "simt") is None
    assert bench.best_cost(records) == pytest.approx(2e-6)
    # Words made the warpgroup state 1.5 us: the re-timed log keeps every record and adds it.
    out = tmp_path / "retimed.json"
    bench.write_retimed_log(out, log, [(inp, 1.5e-6)])
    got = list(load_records(out))
    assert len(got) == 4
    good = [(i, r) for i, r in got if r.error_no == 0]
    best_inp, best_res = min(good, key=lambda x: min(x[1].costs))
    assert min(best_res.costs) == pytest.approx(1.5e-6)
    assert bench.sketch_kind(best_inp.state.to_state(task.compute_dag)) == "warpgroup"
