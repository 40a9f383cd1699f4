"""The CUDA tutorial (docs/tutorials/tune_network_cuda.py) on its own target, "cuda", with a
small budget: the seed's workflow end to end on an NVIDIA GPU, printed output clean.

tests/test_tutorials.py runs the same file on llvm and OpenCL; this one leaves
``AUTOSCHED_TUTORIAL_TARGET`` unset, so the tutorial runs exactly as written, with
``AUTOSCHED_TUTORIAL_TRIALS=2`` (two trials per task) instead of its 200 trials.
"""

import sys
from pathlib import Path

import pytest

from .conftest import CUDA_REASON

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_tutorials import check_clean_run, run_tutorial  # noqa: E402


@pytest.mark.slow
def test_cuda_tutorial_tunes_builds_and_benchmarks_resnet18(tmp_path):
    if CUDA_REASON:
        pytest.skip(CUDA_REASON)
    proc = run_tutorial("tune_network_cuda.py", tmp_path, AUTOSCHED_TUTORIAL_TRIALS="2")
    check_clean_run(proc, tmp_path / "resnet-18-NHWC-B1-cuda.json", n_tasks_at_least=20)
    assert "Mean inference time (std dev): " in proc.stdout
