"""Notebook display: the HTML forms of the IR, code, timings, tasks and records; the records
as rows / a DataFrame; the plots of a real (tiny) tuning log; the live view's points."""

from __future__ import annotations

import html
import math
import pickle
import re
import sys
import time

import numpy as np
import pytest

import autosched as ansor
from autosched import te
from autosched.records import record_rows, to_dataframe
from runtime.timer import TimingResult
from tensorir.display import format_flops


def _matmul_task(n: int, name: str) -> ansor.SearchTask:
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name=name)
    return ansor.SearchTask(compute_dag=ansor.ComputeDAG([A, B, C]), target="llvm", desc=name)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """Two matmul tasks tuned together for 8 trials: a real log (about 5 s)."""
    log = tmp_path_factory.mktemp("tuned") / "log.json"
    tasks = [_matmul_task(64, "mm64"), _matmul_task(32, "mm32")]
    options = ansor.TuningOptions(
        num_measure_trials=8, num_measures_per_round=2, verbose=0,
        runner=ansor.LocalRunner(repeat=1, number=1, min_repeat_ms=1),
        measure_callbacks=[ansor.RecordToFile(log)],
    )  # fmt: skip
    ansor.TaskScheduler(tasks, [1, 2], callbacks=[]).tune(options)
    return tasks, log


def test_dag_html_lists_every_stage_with_shape_and_flops():
    dag = _matmul_task(64, "C").compute_dag
    rows = dag.stage_rows()
    assert [r["name"] for r in rows] == ["A", "B", "C"]
    assert [r["kind"] for r in rows] == ["placeholder", "placeholder", "reduce"]
    assert sum(r["flops"] for r in rows) == dag.flop_count() == 2 * 64**3
    page = dag._repr_html_()
    assert "<table" in page and "64x64" in page
    assert format_flops(2 * 64**3) == "524.29 KFLOP" and "524.29 KFLOP" in page
    assert "C(i, j) += (A[i, k]*B[k, j])" in page


def test_state_html_highlights_the_loop_nest_and_falls_back_without_pygments(monkeypatch):
    dag = _matmul_task(64, "C").compute_dag
    s = dag.get_init_state()
    s.split("C", "i", [16])
    page = s._repr_html_()
    assert "<span style=" in page  # pygments' inline colours
    assert str(s) in html.unescape(re.sub(r"<[^>]+>", "", page))  # the whole loop nest
    monkeypatch.setitem(sys.modules, "pygments", None)  # "not installed"
    plain = s._repr_html_()
    assert "<pre>" in plain and "for i.1 (0,16)" in plain


def test_source_and_timing_render_as_html():
    dag = _matmul_task(16, "C").compute_dag
    func = ansor.build(dag.get_init_state(), "llvm")
    code = func.get_source()
    assert isinstance(code, str) and code.startswith(str(code)[:20])
    assert "define" in code and "<span" in code._repr_html_()  # LLVM IR, highlighted
    copied = pickle.loads(pickle.dumps(code))
    assert copied == code and copied.lang == "llvm"
    timing = TimingResult(mean=2e-3, median=1.5e-3, results=(1e-3, 2e-3, 3e-3))
    page = timing._repr_html_()
    assert "2.0000" in page and "1.5000" in page and "3.0000" in page and "<table" in page


def test_task_list_folds_each_dag_and_stays_a_list():
    tasks = ansor.TaskList([_matmul_task(64, "mm64"), _matmul_task(32, "mm32")], [3, 1])
    assert isinstance(tasks, list) and tasks[1].desc == "mm32" and len(tasks) == 2
    page = tasks._repr_html_()
    assert page.count("<details>") == 2 and "mm32" in page and ">3<" in page
    assert tasks[0].workload_key.replace('"', "&quot;") in page


def test_records_rows_dataframe_and_sortable_table(tuned):
    tasks, log = tuned
    rows = record_rows(log, tasks)
    assert len(rows) == 8 and [r["trial"] for r in rows] == list(range(8))
    by_key = {t.workload_key: t for t in tasks}
    for r in rows:
        task = by_key[r["workload"]]
        assert r["task"] == task.desc and r["target"].startswith("llvm")
        if r["error"] == "NO_ERROR":
            assert r["gflops"] == pytest.approx(task.compute_dag.flop_count() / r["cost"] / 1e9)
        else:
            assert math.isnan(r["cost"])
        assert r["bytes"] == 3 * int(np.prod(task.compute_dag.tensors[0].shape)) * 4
    frame = to_dataframe(log, tasks)
    assert list(frame.columns)[:6] == ["trial", "workload", "task", "target", "cost", "gflops"]
    assert len(frame) == 8 and str(frame["time"].dtype).startswith("datetime64")
    assert frame["steps"].tolist() == [r["steps"] for r in rows]
    table = ansor.RecordsTable(log, tasks)
    page = table._repr_html_()
    assert page.count("<tr>") == 9 and "onclick=" in page and "mm64" in page
    assert "8 records" in repr(table)


def test_plots_from_a_real_log(tuned, tmp_path):
    pytest.importorskip("matplotlib")
    from autosched import plot

    tasks, log = tuned
    peak = plot.MachinePeak(gflops=100.0, bandwidth_gbs=10.0)  # measured below, once
    figures = {
        "curve": plot.tuning_curve(log, tasks),
        "gflops": plot.tuning_curve(log, tasks, metric="gflops"),
        "trials": plot.trials_per_task(log, tasks),
        "roofline": plot.roofline(log, tasks, peak=peak),
    }
    for name, fig in figures.items():
        for ax in fig.axes:
            assert ax.get_xlabel() and ax.get_ylabel(), name
        path = tmp_path / f"{name}.png"
        fig.savefig(path)
        assert path.stat().st_size > 1000 and path.read_bytes()[:4] == b"\x89PNG"
    (bars,) = [figures["trials"].axes[0]]
    heights = [p.get_height() for p in bars.patches]
    assert sum(heights) == 8  # every trial of the log, measured or failed
    with pytest.raises(ValueError, match="metric must be"):
        plot.tuning_curve(log, tasks, metric="speed")
    measured = plot.machine_peak(size=256, copy_mb=8, repeat=1)
    assert measured.gflops > 0.1 and measured.bandwidth_gbs > 0.1


def test_live_views_collect_the_objective_each_round(tuned):
    from types import SimpleNamespace

    from autosched.network.progress import NotebookView
    from autosched.tuning import TaskLiveView

    tasks, _ = tuned
    view = NotebookView(8, display=False)
    estimates = iter([None, 2.5, 1.5])  # no estimate until every task has a valid result
    scheduler = SimpleNamespace(ct=0, tic=time.time(), estimated_latency_ms=lambda: next(estimates))
    for round_ in range(3):
        scheduler.ct += 2
        view.post_tune(scheduler, round_ % 2)
    assert view.view.done == 6 and view.view.trials == [4, 6] and view.view.values == [2.5, 1.5]
    page = view.view._repr_html_()
    assert "<svg" in page and "<polyline" in page and "6/8 trials" in page
    assert "est. latency 1.500 ms" in page
    live = TaskLiveView(tasks[1], 4, display=False)
    ok = ansor.MeasureResult((2e-6,))
    live.callback([None], [ansor.MeasureResult((1e10,), error_no=4)])
    live.callback([None, None], [ok, ok])
    assert live.view.trials == [3]
    assert live.view.values == [pytest.approx(2 * 32**3 / 2e-6 / 1e9)]


def test_live_chart_uses_a_log_axis_only_for_values_decades_apart():
    from autosched.display.svg import line_chart_svg

    def heights(ys):
        svg = line_chart_svg([1, 2, 3], ys, "trials", "ms")
        return [float(y) for y in re.findall(r'<circle cx="[\d.]+" cy="([\d.]+)"', svg)], svg

    (top, middle, bottom), svg = heights([100.0, 10.0, 1.0])
    assert "log scale" in svg and middle - top == pytest.approx(bottom - middle, abs=0.2)
    (top, middle, bottom), svg = heights([3.0, 2.0, 1.0])
    assert "log scale" not in svg and middle - top == pytest.approx(bottom - middle, abs=0.2)
    (top, middle, bottom), _ = heights([3.0, 2.5, 1.0])
    assert middle - top < bottom - middle  # linear: 2.5 sits near 3


def test_missing_optional_packages_name_the_extra(tuned, monkeypatch):
    tasks, log = tuned
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r'pip install "autosched\[data\]"'):
        to_dataframe(log, tasks)
    from autosched.plot import figure

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    figure._figure_class.cache_clear()
    try:
        with pytest.raises(ImportError, match=r'pip install "autosched\[viz\]"'):
            figure.new_figure(4, 3)
    finally:
        figure._figure_class.cache_clear()


def test_gflops_curve_of_a_log_without_dags_asks_for_the_tasks(tuned, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from autosched import plot
    from autosched.measure import records

    _, log = tuned
    monkeypatch.setattr(records, "_DAGS", {})  # a fresh process: no DAG registered
    with pytest.raises(ValueError, match=r"GFLOP/s need the tasks' DAGs: pass tasks="):
        plot.tuning_curve(log, metric="gflops")
    assert plot.tuning_curve(log).axes[0].get_ylabel() == "best latency (ms)"


def test_an_imported_ipykernel_is_not_a_notebook(monkeypatch):
    """Only a running kernel's shell makes the output live: a process that merely imported
    ipykernel (a test runner, a library) keeps the periodic table."""
    import types

    from autosched.display.live import in_notebook
    from autosched.network.progress import _live_output

    class NotATerminal:
        def isatty(self):
            return False

    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: None))
    assert not in_notebook() and not _live_output(NotATerminal())

    class ZMQInteractiveShell:  # what get_ipython() returns inside a Jupyter kernel
        pass

    shell = ZMQInteractiveShell()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert in_notebook() and _live_output(NotATerminal())
