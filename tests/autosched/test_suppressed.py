"""Errors the library catches and goes on without are counted, logged at DEBUG and raised under
AUTOSCHED_STRICT=1 (autosched/suppressed.py); the test suite runs strict (tests/conftest.py)."""

import contextlib
import io
import logging

import pytest

import autosched as ansor
from autosched import suppressed as sup
from autosched import testing
from autosched.cost_model import feature_pool
from autosched.cost_model.features import N_FEATURES, state_features
from autosched.network import default_schedules
from autosched.network.default_schedules import default_schedule
from codegen.target import Target
from tensorir.dag import ComputeDAG


def _fail(exc: BaseException, site: str, **kw) -> None:
    try:
        raise exc
    except Exception:
        sup.suppressed(site, **kw)


def test_the_suite_runs_strict():
    assert sup.strict()


def test_strict_raises_except_the_expected():
    with pytest.raises(TypeError, match="a bug"):
        _fail(TypeError("a bug"), "unit site")
    before = sup.counts()
    _fail(OSError("no driver"), "unit probe", expected=OSError)  # never raised
    assert (sup.counts() - before) == {"unit probe": 1}


@pytest.mark.not_strict
def test_lenient_counts_logs_and_summarises(caplog):
    assert not sup.strict()
    before = sup.counts()
    assert sup.summary(before) is None
    with caplog.at_level(logging.DEBUG, logger="autosched"):
        _fail(TypeError("a bug"), "unit site")
        _fail(KeyError("k"), "unit site")
        _fail(IndexError("i"), "other site")
    assert (sup.counts() - before) == {"unit site": 2, "other site": 1}
    recs = [r for r in caplog.records if r.name == "autosched.suppressed"]
    assert [r.levelno for r in recs] == [logging.DEBUG] * 3
    assert recs[0].getMessage() == "suppressed error at unit site"
    assert recs[0].exc_info[0] is TypeError  # the traceback goes with it
    assert sup.summary(before) == (
        "3 errors suppressed in the search (unit site 2, other site 1); rerun with "
        'AUTOSCHED_STRICT=1 or DEBUG logging (logging.getLogger("autosched")) to see them'
    )
    sup.merge({"unit site": 2, "nothing": 0})
    assert (sup.counts() - before) == {"unit site": 4, "other site": 1}


def _matmul_task():
    return ansor.SearchTask(ComputeDAG(testing.matmul(16, 16, 16)), target="llvm")


def test_features_of_an_invalid_state_are_empty_but_a_bug_raises(monkeypatch):
    task = _matmul_task()
    state = task.compute_dag.get_init_state()
    assert state_features(task, state).shape[0] > 0
    import tensorir.lower

    def invalid(*a, **k):
        raise ValueError("an invalid state")

    monkeypatch.setattr(tensorir.lower, "lower", invalid)
    before = sup.counts()
    assert state_features(task, state).shape == (0, N_FEATURES)  # expected: not counted
    assert sup.counts() == before

    def bug(*a, **k):
        raise TypeError("a bug in lowering")

    monkeypatch.setattr(tensorir.lower, "lower", bug)
    with pytest.raises(TypeError, match="a bug in lowering"):
        state_features(task, state)
    assert (sup.counts() - before) == {"cost-model features": 1}  # counted, then raised
    monkeypatch.setenv("AUTOSCHED_STRICT", "0")
    assert state_features(task, state).shape == (0, N_FEATURES)
    assert (sup.counts() - before) == {"cost-model features": 2}


@pytest.mark.not_strict
def test_feature_workers_send_their_counts_back():
    feature_pool.shutdown()  # a pool started now inherits AUTOSCHED_STRICT=0
    try:
        before = sup.counts()
        # Steps that are not a list of records: a TypeError inside the worker (a bug's shape).
        rows = feature_pool.extract_many(_matmul_task(), ['["x", 5]'], workers=1)
        assert [r.shape for r in rows] == [(0, N_FEATURES)]
        assert (sup.counts() - before) == {"cost-model features": 1}
    finally:
        feature_pool.shutdown()  # later tests get a strict pool again


def test_a_default_schedule_that_fails_is_counted_not_silent(monkeypatch):
    dag = ComputeDAG(testing.matmul(16, 16, 16))

    def bug(*a, **k):
        raise RuntimeError("a bug in the default schedule")

    monkeypatch.setattr(dag, "is_strictly_inlinable", bug)
    with pytest.raises(RuntimeError, match="a bug in the default schedule"):
        default_schedule(dag, Target("llvm"))
    monkeypatch.setenv("AUTOSCHED_STRICT", "0")
    before = sup.counts()
    state = default_schedule(dag, Target("llvm"))
    assert str(state) == str(dag.get_init_state())  # the plain loop nest, as before
    assert (sup.counts() - before) == {"default schedules": 1}


@pytest.mark.not_strict
def test_task_scheduler_summary_names_a_dropped_seed(monkeypatch, tmp_path):
    def bug(*a, **k):
        raise RuntimeError("a bug in the default schedule")

    monkeypatch.setattr(default_schedules, "default_schedule", bug)
    options = ansor.TuningOptions(
        num_measure_trials=2, num_measures_per_round=2, verbose=1,
        runner=ansor.LocalRunner(number=1, repeat=1, min_repeat_ms=0, timeout=20),
    )  # fmt: skip
    params = ansor.SearchParams(evolutionary_search_population=8, evolutionary_search_num_iters=1,
                                sample_init_min_population=4)  # fmt: skip
    ts = ansor.TaskScheduler([_matmul_task()], retime_top=0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ts.tune(options, search_policy_params=params)
    lines = out.getvalue().splitlines()
    at = [i for i, ln in enumerate(lines) if "suppressed in the search" in ln]
    assert len(at) == 1 and lines[at[0]].startswith("1 error suppressed in the search (seed ")
    assert lines[at[0] - 1].startswith("Time: ")
