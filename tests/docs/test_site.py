"""The documentation site builds: ``mkdocs build --strict`` from the repository root, with the
lessons' committed output (``AUTOSCHED_DOCS_OUTPUT=golden``; tests/docs/test_lessons.py runs
them) and the tutorials' recorded output. A broken link, a page missing from the navigation's
files or a hook error fails the build (strict mode turns warnings into errors). About 3 s."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")

REPO = Path(__file__).resolve().parents[2]


def test_site_builds_strict_with_lessons_and_tutorials(tmp_path):
    site = tmp_path / "site"
    env = dict(os.environ, AUTOSCHED_DOCS_OUTPUT="golden")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lesson = (site / "lessons" / "02_the_loop_state_and_its_primitives" / "index.html").read_text()
    assert "io, ii = s.split(&quot;C&quot;, i, [8])" in lesson  # the code, escaped
    golden = (REPO / "tests/docs/golden/02_the_loop_state_and_its_primitives.txt").read_text()
    assert "parallel i.0@j.0@ (0,32)" in golden and "parallel i.0@j.0@ (0,32)" in lesson
    autotvm = (site / "lessons" / "09_template_tuning" / "index.html").read_text()
    assert "@autotvm.template(&quot;lesson/matmul&quot;)" in autotvm
    assert "ConfigSpace (len=98, space_map=" in autotvm
    vta = (site / "lessons" / "10_simulated_accelerator" / "index.html").read_text()
    assert "bit-exact against the int8 numpy reference: True" in vta
    tutorial = (site / "tutorials" / "tune_network_cuda" / "index.html").read_text()
    assert "Execution time summary:" in tutorial and "Extract tasks..." in tutorial
    notebook = (site / "notebook" / "index.html").read_text()
    for image in ("notebook-live-view.png", "notebook-tuning-curve.png"):
        assert image in notebook and (site / "images" / image).stat().st_size > 1000
    assert not (site / "lessons" / "01_te_and_the_compute_dag.py").exists()  # pages, not copies
