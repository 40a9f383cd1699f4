"""docs/notebooks/autosched_in_a_notebook.ipynb runs in a real Jupyter kernel (nbclient): every
cell without an error, the objects shown as HTML (DAG, state, code, timing, task list, records),
the live tuning views drawn, the plot shown as an image. About 15 s."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
if importlib.util.find_spec("ipykernel") is None:  # (not imported: the kernel runs apart)
    pytest.skip("ipykernel is not installed", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "docs" / "notebooks" / "autosched_in_a_notebook.ipynb"


def execute(path: Path, cwd: Path):
    nb = nbformat.read(path, as_version=4)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
    )
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(cwd)}})  # fmt: skip
    client.execute()
    return nb


def _html(cell) -> str:
    return "".join(
        out.get("data", {}).get("text/html", "")
        for out in cell.outputs
        if out.output_type in ("execute_result", "display_data")
    )


def test_notebook_shows_html_reprs_the_live_view_and_plots(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    nb = execute(NOTEBOOK, tmp_path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for cell in code:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"cell {cell.source[:60]!r} failed: {errors[0].get('evalue')}"
        stderr = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stderr")
        assert "Traceback" not in stderr and "Warning" not in stderr, stderr
    by_start = {cell.source.splitlines()[0]: cell for cell in code}

    def cell(start: str):
        return next(c for first, c in by_start.items() if first.startswith(start))

    assert "<table" in _html(cell("import numpy")) and "524.29 KFLOP" in _html(cell("import numpy"))
    assert "State</b> of 3 stages" in _html(cell("state = "))
    assert "<span" in _html(cell("func = ansor.build"))  # highlighted LLVM IR
    assert "Execution time summary" in _html(cell("rng = "))
    assert _html(cell("tasks = ")).count("<details>") == 2
    live = _html(cell("log = "))
    assert 'class="autosched-live"' in live and "<svg" in live and "<polyline" in live
    assert "6/6 trials" in live  # the view's last redraw: the whole budget
    assert "best GFLOP/s" in _html(cell("tasks[1].tune"))
    assert "onclick=" in _html(cell("ansor.RecordsTable"))
    assert "<table" in _html(cell("from autosched.records"))  # the DataFrame
    plot_outputs = [o for o in cell("from autosched import plot").outputs if "data" in o]
    assert any("image/png" in o["data"] for o in plot_outputs)
