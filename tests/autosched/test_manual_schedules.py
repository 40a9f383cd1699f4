"""Hand-written schedules (autosched.manual) built for LLVM and OpenCL, vs the interpreter.

The same schedules run on CUDA in tests/gpu/test_manual_cuda.py.
"""

import numpy as np
import pytest

import autosched as ansor
from autosched import manual, workloads
from tensorir.interp import eval_dag


def _check(dag, state, target, seed):
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]
    outs = [np.full(t.shape, np.nan, t.dtype) for t in dag.output_tensors]
    ansor.build(state, target)(*args, *outs)
    for out, ref in zip(outs, eval_dag(dag, args), strict=True):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


# Sizes that do not divide the register tiles exercise the tail guards.
MATMULS = [(128, 128, 96), (100, 72, 50)]


@pytest.mark.parametrize("n,m,k", MATMULS)
def test_matmul_cpu(n, m, k):
    dag = ansor.ComputeDAG(workloads.matmul(n, m, k))
    _check(dag, manual.matmul_cpu(dag), "llvm", seed=n)


@pytest.mark.parametrize("lanes", [8, 16])
def test_matmul_cpu_register_tile_follows_vector_width(monkeypatch, lanes):
    monkeypatch.setattr(manual, "_host_vector_lanes", lambda: lanes)
    dag = ansor.ComputeDAG(workloads.matmul(96, 64, 32))
    state = manual.matmul_cpu(dag)
    vec = [it for it in state["C"].iters if it.annotation == "vectorize"]
    assert [it.extent for it in vec] == [2 * lanes]
    _check(dag, state, "llvm", seed=lanes)


def test_conv2d_cpu():
    dag = ansor.ComputeDAG(workloads.conv2d_nhwc_bias_relu(1, 14, 14, 32, 32, 3, 3, 1, 1))
    _check(dag, manual.conv2d_nhwc_cpu(dag), "llvm", seed=3)


@pytest.fixture(scope="module")
def opencl():
    pytest.importorskip("pyopencl")
    try:
        if not ansor.device("opencl", 0).exists:
            pytest.skip("no OpenCL device")
    except Exception as err:  # noqa: BLE001 - a missing ICD loader or platform
        pytest.skip(f"no OpenCL device: {err}")


@pytest.mark.parametrize("n,m,k", MATMULS)
def test_matmul_gpu_schedule_on_opencl(opencl, n, m, k):
    dag = ansor.ComputeDAG(workloads.matmul(n, m, k))
    _check(dag, manual.matmul_gpu(dag), "opencl", seed=n)


def test_conv2d_gpu_schedule_on_opencl(opencl):
    dag = ansor.ComputeDAG(workloads.conv2d_nhwc_bias_relu(1, 14, 14, 32, 32, 3, 3, 1, 1))
    _check(dag, manual.conv2d_nhwc_gpu(dag), "opencl", seed=5)
