"""Tensor-core (wmma) kernels on a real GPU: sampled states of the tensor-core sketch equal a
float32 numpy reference within fp16 tolerance, and a short search finds a valid wmma kernel."""

import numpy as np
import pytest

import autosched as ansor
from autosched.search.annotate_gpu import gpu_state_errors
from tensorir.dag import ComputeDAG
from tensorir.dtype import to_numpy
from tests.autosched.tensor_core_helpers import (
    bmm_tensors,
    check_sampled_kernels,
    dense_tensors,
    gemm_reference,
    has_tc,
    wmma_sketches,
)

CASES = {
    "dense_f32_out": lambda: dense_tensors(128, 96, 64),
    "dense_f16_out": lambda: dense_tensors(64, 128, 96, cast="float16"),
    "batch_matmul": lambda: bmm_tensors(3, 64, 32, 48),
    "dense_bf16": lambda: dense_tensors(64, 64, 64, "bfloat16"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sampled_tensor_core_states_match_numpy(cuda_backend, name):
    task = ansor.SearchTask(ComputeDAG(CASES[name]()), target="cuda")
    (sketch,) = wmma_sketches(task)
    dag = task.compute_dag
    data = np.random.default_rng(5)
    if name == "dense_bf16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 host arrays need ml_dtypes")
    args = [data.uniform(-1, 1, t.shape).astype(to_numpy(t.dtype)) for t in dag.input_tensors]
    check_sampled_kernels(task, sketch, args, gemm_reference(args), 5, seed=7, rtol=1e-2,
                          atol=2e-2)  # fmt: skip


def test_short_search_finds_a_valid_tensor_core_kernel(cuda_backend, tmp_path):

    task = ansor.SearchTask(ComputeDAG(dense_tensors(256, 256, 256)), target="cuda")
    log = tmp_path / "tc.json"
    params = ansor.SearchParams(evolutionary_search_population=64,
                                evolutionary_search_num_iters=2)  # fmt: skip
    policy = ansor.SketchPolicy(task, ansor.LGBModel(), params=params, seed=0, verbose=0)
    with ansor.LocalRPCMeasureContext(min_repeat_ms=20) as ctx:
        opts = ansor.TuningOptions(num_measure_trials=16, num_measures_per_round=8, verbose=0,
                                   builder=ctx.builder, runner=ctx.runner,
                                   measure_callbacks=[ansor.RecordToFile(str(log))])  # fmt: skip
        best = task.tune(opts, search_policy=policy)
    records = list(ansor.load_records(str(log)))
    ok = [r for _, r in records if r.error_no == 0]
    assert ok, [r.error_msg for _, r in records]
    assert best is not None and gpu_state_errors(task, best) == []
    assert has_tc(best)
    func = ansor.build(best, "cuda")
    rng = np.random.default_rng(2)
    args = [rng.uniform(-1, 1, t.shape).astype("float16") for t in task.compute_dag.input_tensors]
    out = np.full((256, 256), np.nan, np.float32)
    func(*args, out)
    np.testing.assert_allclose(out, gemm_reference(args), rtol=1e-2, atol=2e-2)
