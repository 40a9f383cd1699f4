"""benchmarks/bench_search.py: its JSON (trials per minute, the breakdown, the rounds) on a
tiny task, and a clear error for an unknown case."""

from __future__ import annotations

import json

import pytest

import autosched as ansor
from autosched import workloads
from autosched.measure.timing import PHASES
from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_search")


def test_task_case_reports_trials_per_minute_and_the_breakdown(tmp_path, monkeypatch, capsys):
    task = ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(16, 16, 16)), target="llvm")
    monkeypatch.setattr(bench, "_network_tasks", lambda target: ([task], [1]))
    out = tmp_path / "out.json"
    args = ["--cases", "task", "--task", "0", "--task-seconds", "1", "--json", str(out),
            "--work-dir", str(tmp_path / "work")]  # fmt: skip
    assert bench.main(args) == 0
    (result,) = json.loads(out.read_text())
    assert result["case"] == "task" and result["trials"] >= 1
    assert result["trials_per_min"] == pytest.approx(60 * result["trials"] / result["wall_s"], 0.05)
    assert set(result["seconds"]) == set(PHASES) and result["seconds"]["run"] > 0
    assert 0 <= result["outside_build_run"] <= 1
    assert sum(r["trials"] for r in result["rounds"]) == result["trials"]
    assert result["line"].startswith("Time: ") and result["line"] in capsys.readouterr().out


def test_unknown_case_is_one_clear_error(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--cases", "tasks"])
    assert "--cases: unknown ['tasks']" in capsys.readouterr().err


def test_simulated_device_overlaps_the_search_with_its_runs(tmp_path, monkeypatch):
    # --device-s: a runner that sleeps instead of timing (a GPU-like device on a CPU-only
    # machine); rounds after the first are searched while the device is busy.
    monkeypatch.delenv("AUTOSCHED_OVERLAP", raising=False)
    task = ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(16, 16, 16)), target="llvm")
    monkeypatch.setattr(bench, "_network_tasks", lambda target: ([task], [1]))
    out = tmp_path / "out.json"
    args = ["--cases", "task", "--task", "0", "--task-seconds", "3", "--device-s", "0.05",
            "--json", str(out), "--work-dir", str(tmp_path / "work")]  # fmt: skip
    assert bench.main(args) == 0
    (result,) = json.loads(out.read_text())
    assert result["trials"] >= 1 and result["seconds"]["run"] >= 0.05
    assert len(result["rounds"]) < 2 or result["overlap_s"] > 0


def test_states_case_reports_per_state_costs(tmp_path, monkeypatch, capsys):
    task = ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(16, 16, 16)), target="llvm")
    monkeypatch.setattr(bench, "_network_tasks", lambda target: ([task], [1]))
    out = tmp_path / "out.json"
    assert bench.main(["--cases", "states", "--json", str(out)]) == 0
    (result,) = json.loads(out.read_text())
    assert result["case"] == "states" and result["tasks"] == 1
    assert result["sampled"] >= 1 and 1 <= result["featured"] <= min(40, result["sampled"])
    assert result["sample_ms"] > 0 and result["features_ms"] > 0
    assert "ms a state" in capsys.readouterr().out
