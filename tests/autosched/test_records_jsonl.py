"""Logs are pure JSON lines (run markers are JSON objects too; old ``#`` comment lines still
load), and records carry the real library version (issue 16)."""

import json
import warnings

import pytest

import autosched
from autosched._version import _PYPROJECT, package_version
from autosched.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.measure.dispatch import ApplyHistoryBest
from autosched.measure.records import (
    RecordToFile,
    distill,
    load_records,
    log_ended_cleanly,
)
from autosched.workloads import matmul
from tensorir.dag import ComputeDAG


class _Task:
    def __init__(self, dag):
        self.compute_dag, self.workload_key, self.target = dag, dag.workload_key, "llvm"


def _write_two_runs(log):
    dag = ComputeDAG(matmul(16, 16, 16))
    inp = MeasureInput(_Task(dag), dag.get_init_state())
    for cost in (3e-4, 1e-4):  # two runs, each with its start and end marker
        with RecordToFile(log) as rec:
            rec.callback([inp], [MeasureResult((cost,), MeasureErrorNo.NO_ERROR, "", 0.1, 1.0)])
    return dag


def test_every_line_of_a_log_is_a_json_object(tmp_path):
    log = tmp_path / "log.json"
    dag = _write_two_runs(log)
    objs = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(isinstance(o, dict) for o in objs) and len(objs) == 6
    markers = [o["autosched_marker"] for o in objs if "autosched_marker" in o]
    assert markers == ["run-start", "run-end", "run-start", "run-end"]
    assert objs[2]["records"] == 1 and isinstance(objs[0]["time"], str)
    assert log_ended_cleanly(log)
    # Every reader skips the markers.
    assert [r.costs for _, r in load_records(log)] == [(3e-4,), (1e-4,)]
    assert distill(log, tmp_path / "best.json") == 1
    assert ApplyHistoryBest(str(log)).lookup(dag.workload_key, "llvm")[1].costs == (1e-4,)
    pandas = pytest.importorskip("pandas")
    frame = pandas.read_json(log, lines=True)
    assert len(frame) == 6


def test_old_logs_with_comment_lines_still_load(tmp_path):
    log = tmp_path / "new.json"
    _write_two_runs(log)
    old = tmp_path / "old.json"
    lines = [
        "# start of run 2024-01-01T00:00:00" if "run-start" in ln else ln
        for ln in log.read_text().splitlines()
        if "run-end" not in ln
    ]
    old.write_text("\n".join([*lines, "# end of run 2024-01-01T00:01:00: 2 records"]) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # comment lines are no corrupt records
        assert len(list(load_records(old))) == 2
    assert log_ended_cleanly(old)


def test_records_carry_the_real_version(tmp_path, monkeypatch):
    """Run from a checkout with no installed distribution, the version is pyproject.toml's."""
    import importlib.metadata

    import autosched.measure.records as records

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    monkeypatch.setattr(records, "_VERSIONS", None)  # the versions are read once per process
    log = tmp_path / "log.json"
    _write_two_runs(log)
    versions = {json.loads(ln)["versions"]["autosched"] for ln in log.read_text().splitlines()
                if '"versions"' in ln}  # fmt: skip
    expected = _PYPROJECT.read_text().split('\nversion = "', 1)[1].split('"', 1)[0]
    assert versions == {expected} == {autosched.__version__}
    assert package_version() == expected
    other = tmp_path / "pyproject.toml"
    other.write_text('[project]\nname = "other"\nversion = "9.9"\n')
    assert package_version(other) == "0+unknown"  # not ours, and nothing installed
