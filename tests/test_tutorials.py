"""The seed tutorials in docs/tutorials/ run as a user runs them, with CI's tiny budget.

Each tutorial is run as a script (``python docs/tutorials/X.py``) in a fresh directory, so its
log lands there, with ``AUTOSCHED_TUTORIAL_TARGET`` (llvm, or OpenCL on PoCL) and
``AUTOSCHED_TUTORIAL_TRIALS=1`` (one trial per task). What it prints is what a user sees: the
task DAGs, the task-scheduler table and the timing summary, and nothing on stderr that looks
like a problem (no traceback, no warning). tests/gpu/test_tutorials_cuda.py runs the CUDA
tutorial on its own target.

These tune and build whole networks (resnet-18, mobilenet: about two dozen tasks each), so
each run takes one to four minutes on two busy cores; they are marked ``slow``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import autosched as auto_scheduler

REPO = Path(__file__).resolve().parents[1]
TUTORIALS = REPO / "docs" / "tutorials"

# (tutorial file, the log file it writes for a target kind)
LOGS = {
    "tune_network_cuda.py": "resnet-18-NHWC-B1-{kind}.json",
    "tune_network_mali.py": "mobilenet-NHWC-B1-{kind}.json",
}


def run_tutorial(name: str, cwd: Path, **env_vars: str) -> subprocess.CompletedProcess:
    """Run docs/tutorials/``name`` as a script in ``cwd`` with the extra environment variables."""
    env = dict(os.environ, **env_vars)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(TUTORIALS / name)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(f"{name} ({env_vars}): {time.perf_counter() - start:.0f} s")
    return proc


def failed_trials(log: Path) -> str:
    """The log's failed measurements (error number, message), to explain a default-schedule
    warning: with one trial per task, a task whose only trial failed has no record."""
    if not log.is_file():
        return "(no log)"
    failed = []
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if "r" in record and record["r"][1] != 0:
            failed.append(f"{record['i'][0][0][:60]}: error {record['r'][1]}: {record['e'][:300]}")
    return "\n".join(failed) or "(none)"


def check_clean_run(proc: subprocess.CompletedProcess, log: Path, n_tasks_at_least: int) -> None:
    """Exit 0, the seed's printed sections in order, a log with records, a clean stderr."""
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0, f"exit {proc.returncode}\n--- stderr:\n{err[-4000:]}"
    assert "Traceback" not in err and "warning" not in err.lower(), (
        f"stderr:\n{err}\nfailed trials in the log:\n{failed_trials(log)}"
    )
    headers = [line for line in out.splitlines() if line.startswith("========== Task ")]
    assert len(headers) >= n_tasks_at_least, out[:2000]
    assert headers[0].startswith("========== Task 0  (workload key: ")
    order = ["Extract tasks...", "Begin tuning...", "[ Task Scheduler ]", "Compile...",
             "Evaluate inference time cost...", "Execution time summary:"]  # fmt: skip
    positions = [out.find(marker) for marker in order]
    assert -1 not in positions and positions == sorted(positions), out[-3000:]
    assert "| Latency (ms) | Speed (GFLOPS) | Trials |" in out
    assert log.is_file() and log.stat().st_size > 0, f"no log {log.name}"


def opencl_unavailable() -> str | None:
    """Why no OpenCL device can run the tutorials here, or None when one can."""
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return "pyopencl is not installed"
    if not auto_scheduler.device("opencl", 0).exists:
        return "no OpenCL device"
    return None


TARGETS = [
    pytest.param("llvm", id="llvm"),
    pytest.param(
        "opencl",
        id="opencl",
        marks=pytest.mark.skipif(bool(opencl_unavailable()), reason=str(opencl_unavailable())),
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tutorial", sorted(LOGS))
def test_tutorial_runs_clean_with_a_tiny_budget(tutorial, target, tmp_path):
    proc = run_tutorial(
        tutorial, tmp_path, AUTOSCHED_TUTORIAL_TARGET=target, AUTOSCHED_TUTORIAL_TRIALS="1"
    )
    check_clean_run(proc, tmp_path / LOGS[tutorial].format(kind=target), n_tasks_at_least=20)
    if tutorial == "tune_network_cuda.py":  # the seed-000 timing through time_evaluator
        assert "Mean inference time (std dev): " in proc.stdout
