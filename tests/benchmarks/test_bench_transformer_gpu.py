"""benchmarks/bench_transformer_gpu.py's side of each ``--precision`` (no GPU needed): what is
tuned, for which target, into which log, against which reference."""

from __future__ import annotations

import numpy as np
import pytest

import autosched as ansor
from tensorir.graph import evaluate
from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_transformer_gpu")


def _dtypes(tasks) -> set[str]:
    return {str(t.dtype) for task in tasks for t in task.compute_dag.input_tensors}


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
def test_16_bit_precisions_tune_16_bit_gemms_into_their_own_log(precision):
    ours = bench.our_network("bert-tiny", 16, precision)
    assert ours["target"] == "cuda" and ours["params"] == {}
    assert ours["log_name"] == f"bert-tiny-S16-B1-cuda-{precision}.json"
    tasks, _ = ansor.extract_tasks(ours["mod"], ours["params"], ours["target"])
    assert precision in _dtypes(tasks)
    # The reference is the float32 network; the 16-bit one stays close to it on random ids.
    ids = np.random.default_rng(1).integers(0, 30522, ours["shape"]).astype("int64")
    ref = evaluate(ours["mod32"], {"input_ids": ids}, ours["params32"])
    low = evaluate(ours["mod"], {"input_ids": ids}, ours["params"])
    assert low.dtype == np.float32
    err = np.abs(low - ref).max() / np.abs(ref).max()
    assert 0 < err < (2e-2 if precision == "bfloat16" else 3e-3)


def test_float32_and_tf32_keep_the_float32_network_on_their_targets():
    f32 = bench.our_network("bert-tiny", 16, "float32")
    tf32 = bench.our_network("bert-tiny", 16, "tf32")
    assert (f32["target"], tf32["target"]) == ("cuda", "cuda -allow_tf32=1")
    assert f32["log_name"] == "bert-tiny-S16-B1-cuda.json"
    assert tf32["log_name"] == "bert-tiny-S16-B1-cuda-tf32.json"
    assert tf32["mod"] is tf32["mod32"] and tf32["params"] is tf32["params32"]
    tasks, _ = ansor.extract_tasks(tf32["mod"], tf32["params"], tf32["target"])
    assert _dtypes(tasks) <= {"float32", "int64", "int32"}
