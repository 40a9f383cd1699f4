"""Make the two screenshots of docs/notebook.md from a real run of the example notebook.

    python docs/site/screenshots.py

1. ``docs/images/notebook-live-view.png``: the executed notebook's cells (the DAG table, the
   task list, the task scheduler's live view, the records table) as a page, shot with a
   headless Chromium (``chromium-headless-shell`` or ``chromium``, e.g. from apt);
2. ``docs/images/notebook-tuning-curve.png``: the PNG the notebook's last cell shows
   (``autosched.plot.tuning_curve`` of the run's log).

The page is assembled from the cells' outputs as Jupyter shows them (HTML and PNG data), in
the style of a notebook: each cell's code, then its output. The pictures come from a run with
``TRIALS`` task-scheduler trials instead of the notebook's 6, for a curve with some steps.
"""

from __future__ import annotations

import base64
import html
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbclient
import nbformat

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "docs" / "notebooks" / "autosched_in_a_notebook.ipynb"
IMAGES = REPO / "docs" / "images"
SHOWN = ("dag = ", "tasks = ", "log = ", "ansor.RecordsTable")  # cells on the screenshot
TRIALS = 24  # the task scheduler's budget in the pictures (the notebook itself has 6)


def execute(workdir: Path):
    paths = [str(REPO), os.environ.get("PYTHONPATH")]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:  # CI runs 6 trials; the picture shows a longer run
        cell.source = cell.source.replace("num_measure_trials=6,", f"num_measure_trials={TRIALS},")
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}}).execute()  # fmt: skip
    return nb


def output_html(cell) -> str:
    parts = []
    for out in cell.outputs:
        data = out.get("data", {})
        if "text/html" in data:
            parts.append(data["text/html"])
        elif "image/png" in data:
            parts.append(f'<img src="data:image/png;base64,{data["image/png"]}">')
    return "".join(parts)


def page(nb) -> str:
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not any(s in cell.source for s in SHOWN):
            continue
        cells.append(
            f'<div class="in"><pre>{html.escape(cell.source)}</pre></div>'
            f'<div class="out">{output_html(cell)}</div>'
        )
    style = (
        "body{font-family:sans-serif;margin:16px;width:960px}"
        ".in{background:#f7f7f7;border:1px solid #cfcfcf;padding:4px 8px;margin-top:12px}"
        ".in pre{margin:0;font-size:12px}.out{padding:6px 8px}"
    )
    return f"<html><head><style>{style}</style></head><body>{''.join(cells)}</body></html>"


def chromium() -> str | None:
    for name in ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name) or next(
            (str(p) for p in Path("/usr/lib/chromium").glob(name) if p.is_file()), None
        )
        if found:
            return found
    return None


def main() -> int:
    IMAGES.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        nb = execute(Path(tmp))
        plot_cell = next(c for c in nb.cells if "plot.tuning_curve" in c.source)
        png = next(o["data"]["image/png"] for o in plot_cell.outputs if "image/png" in o.get(
            "data", {}))  # fmt: skip
        (IMAGES / "notebook-tuning-curve.png").write_bytes(base64.b64decode(png))
        browser = chromium()
        if browser is None:
            print("no headless Chromium found (apt install chromium-headless-shell); "
                  "wrote only the tuning curve", file=sys.stderr)  # fmt: skip
            return 1
        page_path = Path(tmp) / "notebook.html"
        page_path.write_text(page(nb))
        shot = IMAGES / "notebook-live-view.png"
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 f"--screenshot={shot}", "--window-size=1000,1500"]  # fmt: skip
        subprocess.run([browser, *flags, page_path.as_uri()], check=True,
                       capture_output=True, timeout=120)  # fmt: skip
    print(f"wrote {IMAGES}/notebook-live-view.png and notebook-tuning-curve.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
