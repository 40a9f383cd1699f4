"""A tracker restart during tuning: a clear error while it is gone, the runner and the
servers find it again once it is back, and the tuning output gets one line about it, not
dask's tracebacks (``rpc_restart_script.py``, run in a process of its own)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_tracker_restart_is_a_clear_error_then_survived_in_one_line():
    out = subprocess.run(
        [sys.executable, str(HERE / "rpc_restart_script.py")],
        capture_output=True, text=True, timeout=400,
        env=dict(os.environ, PYTHONPATH=str(HERE.parents[1])),
    )  # fmt: skip
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "rpc_restart_script: ok" in out.stdout, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    lost = [line for line in text.splitlines() if "went away" in line]
    assert len(lost) <= 2, lost  # a line per connection dask saw lost, no traceback
