"""The tuning-then-timing flow (issue 17): right after a tune in the same process, the best
kernel times as it does in a fresh process (it timed 6-8 ms instead of 0.2 ms in 3 of 6 runs on
a 2-core machine with another process running; on main this test failed 1 of 2 runs here, the
kernel taking 7-23 ms with libgomp's static split)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import autosched as ansor
from autosched import workloads

ROOT = Path(__file__).resolve().parents[2]

# Builds the best kernel of the log and prints the median of 5 medians of its time in ms.
TIME_BEST = """
import sys, numpy as np, autosched as ansor
from autosched import workloads
task = ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(256, 256, 256)), target="llvm")
func = ansor.build(task.apply_best(sys.argv[1]), target="llvm")
rng = np.random.default_rng(1)
a, b = (rng.uniform(-1, 1, (256, 256)).astype("float32") for _ in range(2))
c = np.empty((256, 256), "float32")
func(a, b, c)
assert np.allclose(c, a @ b, atol=1e-3)
ev = func.time_evaluator(number=20, repeat=5)
print(np.median([ev(a, b, c).median for _ in range(5)]) * 1e3)
"""


def _time_here(log: Path, monkeypatch) -> float:
    """TIME_BEST run in this process (its print collected)."""
    out: list = []
    monkeypatch.setattr(sys, "argv", ["-", str(log)])
    code = TIME_BEST.replace("print(", "out.append(")
    exec(compile(code, "<time-best>", "exec"), {"out": out})
    return float(out[0])


def test_best_kernel_times_the_same_after_a_tune_as_in_a_fresh_process(tmp_path, monkeypatch):
    log = tmp_path / "mm.json"
    task = ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(256, 256, 256)), target="llvm")
    params = ansor.SearchParams(evolutionary_search_population=16, evolutionary_search_num_iters=1)
    policy = ansor.SketchPolicy(task, ansor.LGBModel(), params=params, seed=0, verbose=0)
    options = ansor.TuningOptions(
        num_measure_trials=8,
        num_measures_per_round=8,
        verbose=0,
        runner=ansor.LocalRunner(number=2, repeat=2, min_repeat_ms=0, timeout=20),
        measure_callbacks=[ansor.RecordToFile(log)],
    )
    task.tune(options, policy)
    in_process = _time_here(log, monkeypatch)  # right after the tune, in the tuning process
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    fresh = subprocess.run(
        [sys.executable, "-c", TIME_BEST, str(log)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr
    fresh_ms = float(fresh.stdout.split()[-1])
    again = _time_here(log, monkeypatch)
    print(f"best kernel: {in_process:.3f} ms after the tune, {fresh_ms:.3f} ms fresh, "
          f"{again:.3f} ms after that")  # fmt: skip
    # The bug made the kernel 30x slower after a tune (6-8 ms for 0.2 ms). A 3x margin still
    # catches it and holds when the machine's load changes between the three timings (a load
    # of 4 on 2 cores moves a kernel's median by up to ~2x).
    ratio = max(in_process, again) / fresh_ms
    assert 1 / 3 < ratio < 3, (in_process, again, fresh_ms)
    assert np.isfinite(in_process) and in_process > 0
