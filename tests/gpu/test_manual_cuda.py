"""Hand-written GPU schedules (autosched.manual) through ``build(state, "cuda")`` vs numpy."""

import numpy as np
import pytest

import autosched as ansor
from autosched import manual, workloads
from tensorir.interp import eval_dag


def _check(dag, state, seed):
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]
    outs = [np.full(t.shape, np.nan, t.dtype) for t in dag.output_tensors]
    func = ansor.build(state, "cuda")
    func(*args, *outs)
    for out, ref in zip(outs, eval_dag(dag, args), strict=True):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    return func, args, outs


@pytest.mark.parametrize("n,m,k", [(1024, 1024, 1024), (100, 72, 50)])
def test_matmul_gpu(cuda_backend, n, m, k):
    dag = ansor.ComputeDAG(workloads.matmul(n, m, k))
    func, args, outs = _check(dag, manual.matmul_gpu(dag), seed=n)
    sec = func.time_evaluator(number=10, repeat=3)(*args, *outs).median
    print(f"hand matmul {n}x{m}x{k} on CUDA: {sec * 1e3:.3f} ms, "
          f"{dag.flop_count() / sec / 1e9:.0f} GFLOP/s")  # fmt: skip


def test_conv2d_gpu(cuda_backend):
    dag = ansor.ComputeDAG(workloads.conv2d_nhwc_bias_relu(1, 56, 56, 64, 64, 3, 3, 1, 1))
    func, args, outs = _check(dag, manual.conv2d_nhwc_gpu(dag), seed=7)
    sec = func.time_evaluator(number=10, repeat=3)(*args, *outs).median
    print(f"hand conv2d 1x56x56x64 3x3 on CUDA: {sec * 1e3:.3f} ms, "
          f"{dag.flop_count() / sec / 1e9:.0f} GFLOP/s")  # fmt: skip
