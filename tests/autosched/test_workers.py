"""Worker processes never re-import the user's script; cores and AUTOSCHED_* read in one place;
SIGINT / SIGTERM stop a tuning run cleanly.

The launch-mode tests run a tiny tune (a 64x64 matmul, 4 trials) in a fresh interpreter the way
a user would start it, without a main guard, and check the log has good records.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autosched import workers
from autosched.measure import worker as _measure_worker
from autosched.workers import WorkerPool, env
from runtime import environment

ROOT = Path(__file__).resolve().parents[2]

# Module-level code only, as TVM's tutorials are written: no `if __name__ == "__main__":`.
# The builder's timeout is generous: these tests are about how workers start, and on a busy
# 2-core machine (load 10) a candidate's first LLVM build took 17-20 s, past the default 15 s.
TUNE_SOURCE = """\
import autosched as ansor
from autosched import te

A = te.placeholder((64, 64), name="A")
B = te.placeholder((64, 64), name="B")
k = te.reduce_axis((0, 64), name="k")
C = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
task = ansor.SearchTask(compute_dag=ansor.ComputeDAG([A, B, C]), target="llvm")
task.tune(ansor.TuningOptions(
    num_measure_trials={trials},
    num_measures_per_round=4,
    builder=ansor.LocalBuilder(n_parallel=2, timeout=120),
    runner=ansor.LocalRunner(repeat=1, number=1, min_repeat_ms=0),
    measure_callbacks=[ansor.RecordToFile({log!r})],
))
print("TUNE FINISHED", flush=True)
"""


def _env() -> dict[str, str]:
    # Only the repository on the path: the script's own directory must not matter.
    return dict(os.environ, PYTHONPATH=str(ROOT), AUTOSCHED_FEATURE_WORKERS="0")


def _records(log: Path) -> list[dict]:
    objs = [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()]  # all parse
    return [o for o in objs if "autosched_marker" not in o]


def _assert_good_log(log: Path, trials: int) -> None:
    records = _records(log)
    assert len(records) == trials
    errors = [r["r"] for r in records if r["r"][1] != 0]
    assert not errors, f"measurement errors in {log}: {errors}"


def _run(cmd: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        cmd, cwd=cwd, input=stdin, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "bootstrapping phase" not in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def test_tune_from_a_plain_script_without_main_guard(tmp_path):
    log = tmp_path / "mm.json"
    script = tmp_path / "tutorial.py"
    script.write_text(TUNE_SOURCE.format(trials=4, log=str(log)))
    proc = _run([sys.executable, str(script)], cwd=tmp_path)
    # The script ran once: a worker re-importing it would tune (and print) again.
    assert proc.stdout.count("TUNE FINISHED") == 1
    _assert_good_log(log, 4)


@pytest.mark.slow
def test_tune_from_python_c(tmp_path):
    log = tmp_path / "mm.json"
    _run([sys.executable, "-c", TUNE_SOURCE.format(trials=4, log=str(log))], cwd=tmp_path)
    _assert_good_log(log, 4)


@pytest.mark.slow
def test_tune_from_stdin(tmp_path):
    log = tmp_path / "mm.json"
    _run([sys.executable, "-"], cwd=tmp_path, stdin=TUNE_SOURCE.format(trials=4, log=str(log)))
    _assert_good_log(log, 4)


@pytest.mark.slow
def test_tune_from_a_notebook_like_cell(tmp_path):
    # An interactive __main__ (sys.ps1 set, no __file__) exec-ing a cell's source, as a
    # notebook kernel does.
    log = tmp_path / "mm.json"
    cell = tmp_path / "cell.txt"
    cell.write_text(TUNE_SOURCE.format(trials=4, log=str(log)))
    line = f"exec(compile(open({str(cell)!r}).read(), '<cell>', 'exec'))\n"
    _run([sys.executable, "-q", "-i"], cwd=tmp_path, stdin=line)
    _assert_good_log(log, 4)


def _interrupt(tmp_path, sig: int, to_group: bool):
    log = tmp_path / "long.json"
    script = tmp_path / "long_tune.py"
    script.write_text(TUNE_SOURCE.format(trials=400, log=str(log)))
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: a terminal's Ctrl-C reaches all of it
    )
    try:
        deadline = time.monotonic() + 120
        while not (log.exists() and _records(log)):
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "no batch was logged in 120 s"
            time.sleep(0.1)
        if to_group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        sent = time.monotonic()
        _, stderr = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc, stderr, took, log


@pytest.mark.parametrize(
    "sig, to_group",
    [
        (signal.SIGINT, True),  # Ctrl-C: the whole process group gets it, workers too
        pytest.param(signal.SIGTERM, False, marks=pytest.mark.slow),  # `kill PID`
    ],
)
def test_signal_stops_tuning_cleanly(tmp_path, sig, to_group):
    proc, stderr, took, log = _interrupt(tmp_path, sig, to_group)
    assert proc.returncode != 0
    assert took < 20, f"took {took:.1f} s to stop"
    assert "Traceback" not in stderr, stderr[-3000:]
    assert "leaked semaphore" not in stderr, stderr[-3000:]
    assert f"tuning stopped by {signal.Signals(sig).name}" in stderr, stderr[-3000:]
    assert "load_log_file" in stderr or "PreloadMeasuredStates" in stderr
    assert str(log) in stderr
    records = _records(log)  # every line parses
    assert records and len(records) % 4 == 0  # whole batches of 2 * n_parallel only
    assert log.read_text().rstrip().splitlines()[-1].startswith("{")  # no end mark: resumable
    # No worker outlives the run: the group empties (workers told to stop exit when they see
    # their pipe close; on a loaded machine that can take a moment after the parent is gone).
    deadline = time.monotonic() + 15
    while True:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "a worker process outlived the tuning run by 15 s"
        time.sleep(0.1)


# ----------------------------------------------------------------------------- the pool


def _pool_pids(pool: WorkerPool) -> set[int]:
    return set(pool.pids)


def test_pool_runs_functions_and_reuses_workers():
    pool = WorkerPool(2, name="test worker")
    try:
        errors = [ValueError("bad tile"), KeyError("x")]
        outcomes = pool.map(_measure_worker.short_error, [(e,) for e in errors])
        assert [o.value for o in outcomes] == ["ValueError: bad tile", "KeyError: 'x'"]
        pids = _pool_pids(pool)
        pool.map(_measure_worker.short_error, [(RuntimeError("again"),)])
        assert _pool_pids(pool) <= pids  # long-lived: no new process per call
    finally:
        pool.close()
    assert pool.pids == []


def test_pool_kills_a_task_past_its_timeout_and_replaces_the_worker():
    pool = WorkerPool(1, name="test worker")
    try:
        # time.sleep is not ours: a worker refuses it (only our packages' functions run).
        with pytest.raises(ValueError, match="only run module-level functions"):
            pool.map(time.sleep, [(1,)])
        t0 = time.monotonic()
        out = pool.map(_measure_worker._inject, [("hang", False)], timeout=0.5)
        # Bounded, not tight: starting the worker (a fresh interpreter) took 13 s at a load of 10.
        assert out[0].status == "timeout" and time.monotonic() - t0 < 120
        died = pool.map(_measure_worker._inject, [("segfault", True)])
        assert died[0].status == "died" and "SIGSEGV" in died[0].detail
        raised = pool.map(_measure_worker._inject, [("raise", True)])
        assert raised[0].status == "error" and "injected fault" in str(raised[0].error)
        ok = pool.map(_measure_worker.short_error, [(ValueError("v"),)])
        assert ok[0].value == "ValueError: v"  # a fresh worker took over
    finally:
        pool.close()


def test_worker_refuses_functions_outside_our_packages():
    from autosched.workers.protocol import resolve

    with pytest.raises(PermissionError, match="only functions of"):
        resolve("os", "system")


# ----------------------------------------------------------------------------- cores, env


def test_cpu_count_follows_affinity_and_cgroup_quota(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    monkeypatch.setattr(environment, "_cgroup_quota_cores", lambda: None)
    assert workers.cpu_count() == 6
    monkeypatch.setattr(environment, "_cgroup_quota_cores", lambda: 2)
    assert workers.cpu_count() == 2


def test_cgroup_cpu_max_is_read(monkeypatch, tmp_path):
    import builtins

    real_open = builtins.open
    files = {"/sys/fs/cgroup/cpu.max": "150000 100000\n"}

    def fake_open(path, *args, **kwargs):
        if path in files:
            p = tmp_path / "cpu.max"
            p.write_text(files[path])
            return real_open(p, *args, **kwargs)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    assert environment._cgroup_quota_cores() == 2  # 1.5 cores of quota: 2 workers
    files["/sys/fs/cgroup/cpu.max"] = "max 100000\n"
    assert environment._cgroup_quota_cores() is None


@pytest.mark.parametrize(
    "name, bad",
    [
        ("AUTOSCHED_NUM_THREADS", "0"),
        ("AUTOSCHED_FEATURE_WORKERS", "-1"),
        ("AUTOSCHED_PARALLEL_LAUNCHER", "gomp"),
        ("AUTOSCHED_CUDA_GRAPH", "maybe"),
    ],
)
def test_bad_environment_value_names_the_variable(monkeypatch, name, bad):
    monkeypatch.setenv(name, bad)
    with pytest.raises(ValueError, match=f"{name}={bad!r} is invalid: expected"):
        env(name)


def test_cores_and_variables_are_read_in_one_place():
    # Any other os.cpu_count / sched_getaffinity / AUTOSCHED_ environ read is a second copy
    # that can disagree (e.g. ignore the affinity mask or parse a value differently).
    import re

    pattern = re.compile(r"os\.cpu_count|sched_getaffinity|environ[^\n]*AUTOSCHED_")
    owner = ROOT / "runtime" / "environment.py"
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for pkg in ("tensorir", "codegen", "runtime", "autosched")
        for path in sorted((ROOT / pkg).rglob("*.py"))
        if path != owner
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, offenders
