"""Record files: round trip, corrupt lines, distill (API and CLI), best record, ApplyHistoryBest."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autosched.measure import MAX_COST, MeasureErrorNo, MeasureInput, MeasureResult
from autosched.measure.data import usable_cost, usable_result
from autosched.measure.dispatch import ApplyHistoryBest
from autosched.measure.records import (
    RECORD_VERSION,
    RecordToFile,
    RecordWarning,
    distill,
    load_best_record,
    load_ranked_records,
    load_records,
    log_ended_cleanly,
    save_records,
)
from autosched.workloads import matmul, matmul_relu
from tensorir.dag import ComputeDAG
from tensorir.schedule import replay

ROOT = Path(__file__).resolve().parents[2]


class _Task:
    """The three attributes records need from a SearchTask (no hardware probing)."""

    def __init__(self, dag, target="llvm"):
        self.compute_dag = dag
        self.workload_key = dag.workload_key
        self.target = target


@pytest.fixture(scope="module")
def mm():
    return ComputeDAG(matmul(64, 64, 64))


@pytest.fixture(scope="module")
def mmr():
    return ComputeDAG(matmul_relu(32, 32, 32))


def tiled(dag, factor):
    s = dag.get_init_state()
    C = dag.compute_ops[0].name
    io, _ = s.split(C, 0, [factor])
    s.parallel(C, io)
    return s


def ok(cost, ts=1.0):
    return MeasureResult((cost, cost), MeasureErrorNo.NO_ERROR, "", 0.5, ts)


def failed(code=MeasureErrorNo.RUNTIME_DEVICE):
    return MeasureResult((MAX_COST,), code, "measuring process died with signal 11", 0.1, 2.0)


def test_round_trip_keeps_steps_result_and_format(tmp_path, mm):
    states = [tiled(mm, 8), tiled(mm, 4), mm.get_init_state()]
    results = [ok(3e-4), failed(), ok(1e-4)]
    log = tmp_path / "log.json"
    rec = RecordToFile(log)
    rec.callback([MeasureInput(_Task(mm), s) for s in states], results)
    assert not log_ended_cleanly(log)  # still running
    rec.close()
    assert log_ended_cleanly(log)

    lines = [ln for ln in log.read_text().splitlines() if "autosched_marker" not in ln]
    first = json.loads(lines[0])
    assert first["v"] == RECORD_VERSION
    assert first["i"][0] == [mm.workload_key, "llvm"]
    assert first["i"][1][0] == [] and first["i"][1][1][0][0] == "SP"
    assert set(first["versions"]) == {"autosched", "llvmlite"}

    loaded = list(load_records(log, dags={mm.workload_key: mm}))
    assert [r for _, r in loaded] == results
    for (inp, _), s in zip(loaded, states):
        assert inp.task.workload_key == mm.workload_key and inp.task.target == "llvm"
        assert str(inp.state.to_state()) == str(s)
        assert str(replay(mm, inp.state.steps)) == str(s)
    assert loaded[1][1].error_msg == "measuring process died with signal 11"


def test_records_load_without_a_dag(tmp_path):
    # A DAG never seen by this process: steps stay JSON, replay asks for the DAG.
    dag = ComputeDAG(matmul(48, 16, 8))
    log = tmp_path / "log.json"
    save_records(log, [MeasureInput(_Task(dag), tiled(dag, 6))], [ok(1e-3)])
    [(inp, res)] = list(load_records(log))
    assert inp.task.compute_dag is None and res.mean_cost == pytest.approx(1e-3)
    assert inp.state.steps[0].lengths == (6,)
    with pytest.raises(ValueError, match="register_dag"):
        inp.state.to_state()
    assert str(inp.state.to_state(dag)) == str(tiled(dag, 6))


def test_truncated_and_corrupt_lines_warn_once_and_keep_the_rest(tmp_path, mm):
    log = tmp_path / "log.json"
    inputs = [MeasureInput(_Task(mm), tiled(mm, f)) for f in (2, 4, 8)]
    save_records(log, inputs, [ok(3e-4), ok(2e-4), ok(1e-4)])
    text = log.read_text().splitlines()
    # a garbage line in the middle, and the last line cut in half as by a killed process
    text.insert(1, '{"v": 1, "i": "nonsense"}')
    text[-1] = text[-1][: len(text[-1]) // 2]
    log.write_text("\n".join(text) + "\n# a comment\n\n")
    with pytest.warns(RecordWarning) as caught:
        loaded = list(load_records(log))
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert str(log) in msg and "line 2, 4" in msg and "2 corrupt" in msg
    assert [r.mean_cost for _, r in loaded] == pytest.approx([3e-4, 2e-4])


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        list(load_records(tmp_path / "nope.json"))


def _mixed_log(path, mm, mmr):
    a, b = _Task(mm), _Task(mmr)
    inputs = [MeasureInput(t, tiled(t.compute_dag, f)) for t, f in [
        (a, 2), (a, 4), (b, 2), (a, 8), (b, 4), (b, 8)]]  # fmt: skip
    results = [ok(3e-4), ok(1e-4), ok(5e-5), failed(), ok(9e-5), ok(6e-5)]
    # the failed record carries MAX_COST; a "cost 0" error record must not win either
    results[3] = MeasureResult((0.0,), MeasureErrorNo.WRONG_ANSWER, "x", 0.1, 3.0)
    save_records(path, inputs, results)
    return inputs


def test_load_best_record_skips_errors(tmp_path, mm, mmr):
    log = tmp_path / "log.json"
    _mixed_log(log, mm, mmr)
    inp, res = load_best_record(log, mm.workload_key)
    assert res.mean_cost == pytest.approx(1e-4) and inp.state.steps[0].lengths == (4,)
    inp, res = load_best_record(log, mmr.workload_key, target="llvm")
    assert res.mean_cost == pytest.approx(5e-5)
    assert load_best_record(log, mm.workload_key, target="cuda") is None
    assert load_best_record(log, "no such key") is None


def test_a_gzip_compressed_log_reads_as_the_plain_one(tmp_path, mm, mmr):
    """Logs kept or shared compressed (benchmarks/logs) load, rank and distill as they are;
    appending to one would corrupt it, so RecordToFile refuses it by name."""
    import gzip
    import shutil

    log, packed = tmp_path / "log.json", tmp_path / "log.json.gz"
    _mixed_log(log, mm, mmr)
    with open(log, "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)

    def rows(path):
        return [(i.task.workload_key, str(i.state.steps), r.costs) for i, r in load_records(path)]

    assert len(rows(packed)) == 6 and rows(packed) == rows(log)
    assert load_best_record(packed, mm.workload_key)[1].mean_cost == pytest.approx(1e-4)
    assert distill(packed, tmp_path / "best.json") == 2
    with ApplyHistoryBest(packed) as ctx:
        assert ctx.query(mm.workload_key, "llvm") is not None
    with pytest.raises(ValueError, match="log.json.gz.*gzip-compressed.*plain .json log"):
        RecordToFile(packed)


def test_distill_keeps_best_per_workload(tmp_path, mm, mmr):
    log, best = tmp_path / "log.json", tmp_path / "best.json"
    _mixed_log(log, mm, mmr)
    assert distill(log, best) == 2
    kept = {i.task.workload_key: r.mean_cost for i, r in load_records(best)}
    assert kept == {mm.workload_key: pytest.approx(1e-4), mmr.workload_key: pytest.approx(5e-5)}


def test_distill_cli(tmp_path, mm, mmr):
    log, best = tmp_path / "log.json", tmp_path / "best.json"
    _mixed_log(log, mm, mmr)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "autosched.records", "distill"]
    done = subprocess.run(
        [*cmd, "-i", str(log), "-o", str(best)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "kept 2 record(s)" in done.stdout
    assert len(best.read_text().splitlines()) == 2
    missing = subprocess.run(
        [*cmd, "-i", str(tmp_path / "gone.json")], env=env, capture_output=True, text=True
    )
    assert missing.returncode == 2 and "gone.json" in missing.stderr
    assert "does not exist" in missing.stderr


@pytest.mark.parametrize(
    "cmd",
    [
        ["-m", "autosched.records", "--mode", "distill", "-i"],  # seed 001/003, as TVM spells it
        ["-m", "autosched.records", "--mode", "distill", "--i"],  # seed 000
        ["-m", "autosched", "distill", "-i"],
    ],
)
def test_distill_as_the_seeds_type_it(tmp_path, mm, mmr, cmd):
    log = tmp_path / "log.json"
    _mixed_log(log, mm, mmr)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", *cmd, str(log)],
        env=env, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "RuntimeWarning" not in done.stderr and "Traceback" not in done.stderr
    best = tmp_path / "log.best.json"
    kept = {i.task.workload_key: r.mean_cost for i, r in load_records(best)}
    assert kept == {mm.workload_key: pytest.approx(1e-4), mmr.workload_key: pytest.approx(5e-5)}


def test_apply_history_best_query_counts_and_nesting(tmp_path, mm, mmr):
    log = tmp_path / "log.json"
    _mixed_log(log, mm, mmr)
    assert ApplyHistoryBest.current() is None
    outer = ApplyHistoryBest(log)
    only_mm = ApplyHistoryBest([(i, r) for i, r in load_records(log)][:2])
    with outer:
        assert ApplyHistoryBest.current() is outer
        steps = outer.query(mm.workload_key, "llvm")
        assert steps[0].lengths == (4,)
        assert str(replay(mm, steps)) == str(tiled(mm, 4))
        with only_mm:
            assert ApplyHistoryBest.current() is only_mm
            assert only_mm.query(mmr.workload_key) is None
        assert ApplyHistoryBest.current() is outer
        assert outer.query(mmr.workload_key, "llvm")[0].lengths == (2,)
        assert outer.query(mm.workload_key, "cuda") is None
        assert outer.query("missing") is None
    assert ApplyHistoryBest.current() is None
    assert outer.summary().startswith("2 of 3 tasks used a tuned record")
    assert "missing" in outer.summary()
    assert only_mm.summary().startswith("0 of 1 tasks")


@pytest.mark.parametrize(
    "result, usable",
    [
        (ok(1e-4), True),
        (ok(5e9), True),  # slow but measured: below MAX_COST (AutoTVM once cut at 1e9)
        (ok(MAX_COST), False),  # the cost of a failure
        (ok(math.inf), False),
        (ok(math.nan), False),
        (ok(0.0), False),
        (ok(-1e-4), False),
        (MeasureResult((), MeasureErrorNo.NO_ERROR, "", 0.0, 1.0), False),  # no costs
        (MeasureResult((1e-4,), MeasureErrorNo.RUNTIME_DEVICE, "", 0.0, 1.0), False),
        (failed(), False),
    ],
)
def test_one_rule_decides_a_usable_result(result, usable):
    assert usable_result(result) is usable
    assert usable_cost(result.mean_cost) is usable


def test_every_reader_of_records_applies_the_one_rule(tmp_path, mm):
    # A slow record (5e9 s, below MAX_COST) once counted in distill and not in AutoTVM's
    # reader; now every reader keeps it, and one of MAX_COST in none.
    log = tmp_path / "log.json"
    inputs = [MeasureInput(_Task(mm), tiled(mm, f)) for f in (8, 4)]
    save_records(log, inputs, [ok(5e9), ok(MAX_COST)])
    assert distill(log, tmp_path / "best.json") == 1
    assert len(load_ranked_records(log, mm.workload_key)) == 1
    assert ApplyHistoryBest(log).lookup(mm.workload_key)[1].mean_cost == pytest.approx(5e9)
