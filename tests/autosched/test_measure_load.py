"""Measurements that resist load (issue 17): tick-sized outlier repeats are re-measured and left
out of ``mean_cost``; the task scheduler re-times each task's best few; ApplyHistoryBest pools a
candidate's measurements."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import autosched as ansor
from autosched import workloads
from autosched.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.measure.data import RETIMED, steady_costs
from autosched.measure.dispatch import ApplyHistoryBest
from autosched.measure.records import load_records, save_records
from autosched.measure.worker import CandidateRunner
from runtime.timer import TimingResult
from tensorir.dag import ComputeDAG


def _ok(*costs_ms, note=""):
    return MeasureResult(tuple(c * 1e-3 for c in costs_ms), MeasureErrorNo.NO_ERROR, note, 0.1, 1.0)


def test_mean_cost_leaves_out_tick_sized_outliers():
    assert _ok(1.0, 1.1, 5.0).mean_cost == pytest.approx(1.05e-3)  # +4 ms, 5x: a tick
    assert _ok(10.0, 16.0).mean_cost == pytest.approx(10e-3)  # 1.6x and +6 ms
    assert _ok(10.0, 14.0).mean_cost == pytest.approx(12e-3)  # 1.4x: noise, kept
    assert _ok(0.1, 0.3).mean_cost == pytest.approx(0.2e-3)  # 3x but +0.2 ms: kept
    assert steady_costs([0.004]) == [0.004]


class _ScriptedModule:
    """time_evaluator returning scripted repeats (seconds), to drive the worker's timing."""

    def __init__(self, script):
        self.script, self.asked = list(script), []

    def time_evaluator(self, number, repeat, min_repeat_ms):
        def run(*args):
            self.asked.append(repeat)
            results = tuple(self.script.pop(0)[:repeat])
            return TimingResult(float(np.mean(results)), float(np.median(results)), results)

        return run


def test_worker_remeasures_outlier_repeats_and_keeps_all_costs():
    job = {"number": 3, "repeat": 3, "min_repeat_ms": 0.0, "flush": False}
    mod = _ScriptedModule([[1e-3, 9e-3, 1.1e-3], [1.05e-3]])
    runner = CandidateRunner.__new__(CandidateRunner)  # no reference cache needed for timing
    costs = runner.time(mod, [], job)
    assert mod.asked == [3, 1]  # one repeat again, for the one outlier
    assert costs == [1e-3, 9e-3, 1.1e-3, 1.05e-3]
    assert MeasureResult(tuple(costs)).mean_cost == pytest.approx(1.05e-3)
    quiet = _ScriptedModule([[1e-3, 1.2e-3, 1.1e-3]])
    assert runner.time(quiet, [], job) == [1e-3, 1.2e-3, 1.1e-3] and quiet.asked == [3]


class _Task:
    def __init__(self, dag):
        self.compute_dag, self.workload_key, self.target = dag, dag.workload_key, "llvm"


def _tiled(dag, factor):
    s = dag.get_init_state()
    s.split(dag.compute_ops[0].name, 0, [factor])
    return s


def test_apply_history_best_pools_a_candidates_measurements(tmp_path):
    dag = ComputeDAG(workloads.matmul(16, 16, 16))
    lucky, steady = _tiled(dag, 2), _tiled(dag, 4)
    log = tmp_path / "log.json"
    inputs = [MeasureInput(_Task(dag), s) for s in (lucky, steady, lucky, steady)]
    results = [_ok(1.0), _ok(1.5), _ok(3.0, note=RETIMED), _ok(1.5, note=RETIMED)]
    save_records(log, inputs, results)
    best_inp, best_res = ApplyHistoryBest(log).lookup(dag.workload_key, "llvm")
    assert best_res.costs == (1.5e-3, 1.5e-3)  # the lucky 1.0 ms was a 2 ms candidate
    assert str(best_inp.state.to_state(dag)) == str(steady)


def test_task_scheduler_retimes_the_best_candidates(tmp_path, monkeypatch):
    # 8 trials: re-time the best 2 once 4 (not 8) candidates were measured, failures aside.
    monkeypatch.setattr("autosched.network.task_scheduler.RETIME_MIN_FACTOR", 2)
    log = tmp_path / "log.json"
    task = ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(32, 32, 32)), target="llvm")
    options = ansor.TuningOptions(
        num_measure_trials=8, num_measures_per_round=8, verbose=1,
        runner=ansor.LocalRunner(number=1, repeat=2, min_repeat_ms=0, timeout=10),
        measure_callbacks=[ansor.RecordToFile(log)],
    )  # fmt: skip
    search = ansor.SearchParams(evolutionary_search_population=16, evolutionary_search_num_iters=1)
    ts = ansor.TaskScheduler([task], retime_top=2)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ts.tune(options, search_policy_params=search)
    records = list(load_records(log))
    again = [(i, r) for i, r in records if r.error_msg == RETIMED]
    first = [(i, r) for i, r in records if r.error_msg != RETIMED]
    assert len(first) == 8 and len(again) == 2 and ts.ct == 8 and ts.retimed == {0}
    # best_costs is the best pooled mean over each re-timed candidate's measurements.
    pooled = []
    for inp, res in again:
        same = [r for i, r in first if i.state.steps_json == inp.state.steps_json]
        pooled.append(MeasureResult(same[0].costs + res.costs).mean_cost)
    assert ts.best_costs[0] == pytest.approx(min(pooled))
    assert "Re-timed the best 2 candidates of 1 tasks (2 measurements" in out.getvalue()
    assert "* re-timed" in out.getvalue()
    assert ApplyHistoryBest(log).lookup(task.workload_key, "llvm")[1].mean_cost <= min(pooled)


class _SlowBackend:
    """A kernel of ``seconds`` per cold run (sleeps), for the flushed timing loop."""

    def __init__(self, seconds):
        self.seconds, self.launches = seconds, 0

    def time_launches(self, fn, number):
        import time

        self.launches += 1
        time.sleep(self.seconds)
        return self.seconds


def test_cold_repeats_of_a_slow_kernel_stop_at_the_time_limit():
    """Issue 29: a default schedule of seconds per run ran 10 cold repeats into the run timeout
    and lost them all (RUN_TIMEOUT); the repeats now stop at ``time_limit_s``, one at least."""
    from types import SimpleNamespace

    backend = _SlowBackend(0.05)
    mod = SimpleNamespace(_prepare=lambda args: ((), None), _bound_run=lambda h: None,
                          _backend=backend)  # fmt: skip
    runner = CandidateRunner.__new__(CandidateRunner)
    runner.flush_buf = np.zeros(8)  # no LLC-sized buffer needed here
    job = {"number": 1, "repeat": 10, "min_repeat_ms": 0.0, "flush": True, "time_limit_s": 0.01}
    costs = runner._time(mod, [], job, 10)
    assert costs == [0.05] and backend.launches == 2  # the warm-up and one timed repeat
    job["time_limit_s"] = None  # no limit: every repeat
    assert len(runner._time(mod, [], job, 4)) == 4
