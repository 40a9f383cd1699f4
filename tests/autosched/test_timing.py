"""Where tuning time goes (issue 29): the timing ledger, the one-line breakdown every tune
prints, and the build / run seconds of each record."""

import contextlib
import io
import json
import math
import re

import pytest

import autosched as ansor
from autosched import workloads
from autosched.measure.record_rows import record_rows
from autosched.measure.records import load_records
from autosched.measure.timing import MEASURE_PHASES, PHASES, TimeLedger, phase

LINE = re.compile(
    r"^Time: ([\d.]+) s, (\d+) trials \(([\d.]+) per minute\): (.*) s; "
    r"outside building and running (\d+)%$"
)


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _parse(line: str) -> tuple[float, int, dict]:
    m = LINE.match(line)
    assert m, f"not a breakdown line: {line!r}"
    parts = dict(p.rsplit(" ", 1) for p in m.group(4).split(", "))
    # "overlap -x": measurement hidden behind the search (in its phases already), taken out.
    assert list(parts) in ([*PHASES, "other"], [*PHASES, "overlap", "other"])
    return float(m.group(1)), int(m.group(2)), {k: float(v) for k, v in parts.items()}


def test_nested_phases_are_exclusive_and_rounds_are_rows():
    clock = _Clock()
    ledger = TimeLedger(clock)
    with ledger.active():
        with phase("evolve"):
            clock.now += 2.0
            with phase("predict"):
                clock.now += 3.0
                with phase("features"):
                    clock.now += 5.0
        ledger.add_build(4.0, [{"lower": 1.0, "codegen": 0.5, "compile": 1.5}] * 2, workers=2)
        ledger.add("run", 1.5)
    clock.now += 4.0 + 1.5 + 0.5  # the build and the run happened; 0.5 s untimed
    row = ledger.end_round(trials=2, task=0)
    assert ledger.seconds["evolve"] == 2.0 and ledger.seconds["predict"] == 3.0
    assert ledger.seconds["features"] == 5.0
    # 2 workers did 3 s each: 3 s of the build's 4 s wall are theirs, 1 s is waiting.
    assert (ledger.seconds["lower"], ledger.seconds["codegen"]) == (1.0, 0.5)
    assert (ledger.seconds["compile"], ledger.seconds["wait"]) == (1.5, 1.0)
    assert row["trials"] == 2 and row["wall"] == pytest.approx(16.0) and row["evolve"] == 2.0
    wall, trials, parts = _parse(ledger.line())
    assert (wall, trials) == (16.0, 2) and parts["other"] == pytest.approx(0.5)
    assert ledger.measuring() == pytest.approx(sum(parts[k] for k in MEASURE_PHASES))
    # A second round's row holds only its own time.
    with ledger.active(), phase("train"):
        clock.now += 1.0
    assert ledger.end_round(trials=1)["train"] == 1.0 and ledger.rounds[1]["evolve"] == 0.0
    assert ledger.trials == 3


def test_build_reports_never_exceed_the_wall_and_bad_phase_is_named():
    ledger = TimeLedger(_Clock())
    ledger.add_build(1.0, [{"lower": 4.0, "compile": 4.0}], workers=4)  # one busy worker
    assert ledger.seconds["lower"] + ledger.seconds["compile"] == pytest.approx(1.0)
    assert ledger.seconds["wait"] == 0.0
    ledger.add_build(2.0, [], workers=2)  # a builder that reports nothing: all compile
    assert ledger.seconds["compile"] == pytest.approx(2.5)
    with pytest.raises(ValueError, match="unknown timing phase 'linking'"):
        ledger.add("linking", 1.0)
    # Outside a tuning run, phase() charges nothing and does not fail.
    with phase("features"):
        pass


def _parts_sane(line: str, wall_limit: float, ledger) -> dict:
    wall, trials, parts = _parse(line)
    assert 0 < wall <= wall_limit
    timed = sum(v for k, v in parts.items() if k != "other")  # (overlap is negative)
    # Rounded to 0.1 s each: allow that much per phase.
    assert timed <= wall + 0.05 * len(parts)
    assert timed >= 0.5 * wall, f"the phases cover too little of the wall time: {line}"
    # The line rounds to 0.1 s, and sampling a tiny task can take less than 0.05 s: the
    # ledger's own seconds say whether each phase was charged.
    seconds = ledger.seconds
    assert seconds["run"] > 0 and seconds["sample"] > 0
    assert seconds["lower"] + seconds["codegen"] + seconds["compile"] > 0
    return parts


def test_single_task_tune_prints_breakdown_and_records_keep_build_and_run(tmp_path):
    import time

    task = ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(32, 32, 32)), target="llvm")
    log = tmp_path / "log.json"
    options = ansor.TuningOptions(
        num_measure_trials=6, num_measures_per_round=3, verbose=1,
        runner=ansor.LocalRunner(number=1, repeat=1, min_repeat_ms=0, timeout=20),
        measure_callbacks=[ansor.RecordToFile(log)],
    )  # fmt: skip
    policy = ansor.SketchPolicy(task, ansor.RandomModel(0), seed=0, verbose=0)
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        task.tune(options, policy)
    elapsed = time.perf_counter() - t0
    lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("Time: ")]
    assert len(lines) == 1
    _parts_sane(lines[0], elapsed + 1.0, policy.ledger)
    assert _parse(lines[0])[1] == 6
    assert [r["trials"] for r in policy.ledger.rounds] == [3, 3]
    records = list(load_records(log))
    assert len(records) == 6
    for _, res in records:
        assert res.build_s > 0 and res.run_s >= 0
        assert res.build_s + res.run_s == pytest.approx(res.all_cost)
    assert all(r["build_s"] > 0 and r["run_s"] >= 0 for r in record_rows(log))


def test_task_scheduler_prints_breakdown_before_the_table(tmp_path):
    import time

    tasks = [
        ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(16, 16, 16)), target="llvm"),
        ansor.SearchTask(ansor.ComputeDAG(workloads.softmax(8, 32)), target="llvm"),
    ]
    options = ansor.TuningOptions(
        num_measure_trials=8, num_measures_per_round=2, verbose=1,
        runner=ansor.LocalRunner(number=1, repeat=1, min_repeat_ms=0, timeout=20),
        measure_callbacks=[ansor.RecordToFile(tmp_path / "log.json")],
    )  # fmt: skip
    params = ansor.SearchParams(evolutionary_search_population=32, evolutionary_search_num_iters=1,
                                sample_init_min_population=8)  # fmt: skip
    ts = ansor.TaskScheduler(tasks, retime_top=0)
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        ts.tune(options, search_policy_params=params)
    elapsed = time.perf_counter() - t0
    lines = out.getvalue().splitlines()
    at = [i for i, ln in enumerate(lines) if ln.startswith("Time: ")]
    header = "|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |"
    last_table = max(i for i, ln in enumerate(lines) if ln == header)
    assert len(at) == 1 and at[0] < last_table
    _parts_sane(lines[at[0]], elapsed + 1.0, ts.ledger)
    assert _parse(lines[at[0]])[1] == ts.ct == 8
    assert sum(r["trials"] for r in ts.ledger.rounds) == 8
    assert {r["task"] for r in ts.ledger.rounds} == {t.desc for t in tasks}
    assert all(p.ledger is ts.ledger for p in ts.search_policies)
    done = [ln for ln in lines if ln.endswith("Done")]
    assert len(done) == 1 and re.search(r"Trials/min: [\d.]+  Done$", done[0])


def test_old_records_without_build_and_run_still_load(tmp_path):
    task = ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(8, 8, 8)), target="llvm")
    old = {"v": 1, "i": [[task.workload_key, "llvm"], [[], []]],
           "r": [[1.5e-6, 1.7e-6], 0, 0.25, 1.7e9], "e": ""}  # fmt: skip
    bad = dict(old, t=["x", 1.0])  # a malformed optional field: informative only
    new = dict(old, t=[0.2, 0.05])
    log = tmp_path / "log.json"
    log.write_text("\n".join(json.dumps(r) for r in (old, bad, new)) + "\n")
    results = [res for _, res in load_records(log)]
    assert len(results) == 3
    assert math.isnan(results[0].build_s) and math.isnan(results[0].run_s)
    assert math.isnan(results[1].build_s)
    assert (results[2].build_s, results[2].run_s) == (0.2, 0.05)
    assert results[0].mean_cost == pytest.approx(1.6e-6)
    pd = pytest.importorskip("pandas")
    from autosched.records import to_dataframe

    frame = to_dataframe(log)
    assert {"build_s", "run_s"} <= set(frame.columns)
    assert frame["build_s"].isna().tolist() == [True, True, False]
    assert isinstance(frame, pd.DataFrame)


def test_short_budget_first_pass_measures_every_default_schedule_together(tmp_path):
    """Issue 29: with a short time budget the first pass measures each task's default
    schedule, all tasks in builder-sized batches and without search, so every task has a
    latency early; the estimate is then known (partially as soon as any task has one)."""
    from autosched.network.default_schedules import default_schedule
    from autosched.network.task_scheduler import FIRST_PASS_ROUND
    from autosched.search.evolution import state_key

    tasks = [
        ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(16, 16, 16)), target="llvm"),
        ansor.SearchTask(ansor.ComputeDAG(workloads.softmax(8, 32)), target="llvm"),
        ansor.SearchTask(ansor.ComputeDAG(workloads.dense_bias(8, 32, 16)), target="llvm"),
    ]
    log = tmp_path / "log.json"
    options = ansor.TuningOptions(
        num_measure_trials=0, max_tuning_seconds=2.0, verbose=1,
        runner=ansor.LocalRunner(number=1, repeat=1, min_repeat_ms=0, timeout=20),
        measure_callbacks=[ansor.RecordToFile(log)],
    )  # fmt: skip
    ts = ansor.TaskScheduler(tasks, [1, 2, 3], retime_top=0)
    assert ts.partial_latency_ms() == (None, 0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ts.tune(options)
    assert "First pass: the default schedules of 3 tasks" in out.getvalue()
    first = [r for r in ts.ledger.rounds if r["task"] == FIRST_PASS_ROUND]
    assert sum(r["trials"] for r in first) == 3  # one batch (2 builders: up to 4 a batch)
    assert all(r["sample"] == r["evolve"] == 0.0 for r in first)  # no search
    defaults = {
        (t.workload_key, state_key(default_schedule(t.compute_dag, t.target))) for t in tasks
    }
    measured = set()
    for inp, _ in load_records(log, dags=tasks):
        task = next(t for t in tasks if t.workload_key == inp.task.workload_key)
        measured.add((task.workload_key, state_key(inp.state.to_state(task.compute_dag))))
    assert defaults <= measured
    assert all(n >= 1 for n in ts.task_trials)
    ms, covered = ts.partial_latency_ms()
    assert covered == 3 and ms == pytest.approx(ts.estimated_latency_ms())
    # With one task's result gone, the estimate covers the other two, weighted.
    ts.best_costs[0] = 1e10
    expected = 1e3 * (2 * ts.best_costs[1] + 3 * ts.best_costs[2])
    assert ts.partial_latency_ms() == (pytest.approx(expected), 2)
