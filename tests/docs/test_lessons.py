"""Every lesson in docs/lessons/ runs, and prints the loop nests its golden file holds.

Each lesson runs as a script (``python docs/lessons/NN_x.py``) in a fresh directory with
``AUTOSCHED_LESSON_QUICK=1`` (small sizes and budgets), four at a time. Its standard output,
less the lines starting with ``~`` (measured times, which change from run to run), must equal
``tests/docs/golden/NN_x.txt``: when a change to the library changes what a lesson prints (a
loop nest, a sketch, generated code), this test fails and shows the difference, so the lessons
never drift from the code. After checking that the new output is right, refresh the goldens
with ``AUTOSCHED_UPDATE_GOLDEN=1 python -m pytest tests/docs/test_lessons.py``.

The GPU lesson (05) runs on OpenCL (PoCL on a CPU-only machine) and is skipped without an
OpenCL device.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LESSONS = REPO / "docs" / "lessons"
GOLDEN = Path(__file__).parent / "golden"
OPENCL_LESSONS = {"05_gpu_binding_and_shared_memory.py"}


def lesson_files() -> list[str]:
    return sorted(p.name for p in LESSONS.glob("[0-9][0-9]_*.py"))


def opencl_unavailable() -> str | None:
    """Why no OpenCL device can run the GPU lesson here, or None when one can."""
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return "pyopencl is not installed"
    import autosched

    return None if autosched.device("opencl", 0).exists else "no OpenCL device"


def run_lessons(names: list[str], cwd: Path, parallel: int = 4) -> dict:
    """Run the lessons as scripts, ``parallel`` at a time (they mostly wait on their measuring
    worker processes); name -> CompletedProcess."""
    env = dict(os.environ, AUTOSCHED_LESSON_QUICK="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))

    def run(name: str) -> subprocess.CompletedProcess:
        here = cwd / Path(name).stem
        here.mkdir()
        return subprocess.run([sys.executable, str(LESSONS / name)], cwd=here, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip

    with ThreadPoolExecutor(parallel) as pool:
        return dict(zip(names, pool.map(run, names)))


@pytest.fixture(scope="module")
def lesson_runs(tmp_path_factory) -> dict:
    """Every lesson that can run here, run once for the tests below."""
    names = [n for n in lesson_files() if n not in OPENCL_LESSONS or not opencl_unavailable()]
    return run_lessons(names, tmp_path_factory.mktemp("lessons"))


def deterministic_part(stdout: str) -> str:
    """The output without the measured lines (those starting with ``~``)."""
    return "".join(line for line in stdout.splitlines(True) if not line.startswith("~"))


def golden_diff(expected: str, actual: str, name: str) -> str:
    """A unified diff (first 80 lines), empty when equal."""
    diff = difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                f"golden/{name}", "lesson output", lineterm="")  # fmt: skip
    return "\n".join(list(diff)[:80])


def test_every_lesson_has_a_golden_file_and_every_golden_a_lesson():
    lessons = {Path(n).stem for n in lesson_files()}
    goldens = {p.stem for p in GOLDEN.glob("*.txt")}
    assert len(lessons) >= 10 and lessons == goldens, lessons ^ goldens


def test_golden_diff_shows_a_changed_loop():
    old = "for i (0,64)\n  C = ...\n"
    assert golden_diff(old, old, "x") == ""
    diff = golden_diff(old, "for i (0,32)\n  C = ...\n", "x")
    assert "-for i (0,64)" in diff and "+for i (0,32)" in diff


@pytest.mark.parametrize("name", lesson_files())
def test_lesson_runs_and_prints_its_golden_output(name, lesson_runs):
    if name in OPENCL_LESSONS and opencl_unavailable():
        pytest.skip(f"{name} runs on OpenCL: {opencl_unavailable()}")
    proc = lesson_runs[name]
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr and "warning" not in proc.stderr.lower(), proc.stderr
    actual = deterministic_part(proc.stdout)
    golden = GOLDEN / f"{Path(name).stem}.txt"
    if os.environ.get("AUTOSCHED_UPDATE_GOLDEN"):
        golden.write_text(actual)
    assert golden.is_file(), f"no golden file {golden}; create it with AUTOSCHED_UPDATE_GOLDEN=1"
    expected = golden.read_text()
    # Goldens hold no measurement: a time or speed belongs on a "~" line.
    assert not re.search(r"\d (ms|s)\b|GFLOP/s", expected), f"{golden.name} holds a timing"
    assert actual == expected, golden_diff(expected, actual, golden.name)
