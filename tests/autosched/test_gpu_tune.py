"""End-to-end ``task.tune`` for an OpenCL task (PoCL on the CPU here, a GPU on a GPU machine):
GPU sketches, validity checks, the isolated measuring process of ``LocalRPCMeasureContext``,
records, and a build of the best record checked against the interpreter."""

import numpy as np
import pytest

import autosched as ansor
from autosched import workloads as W
from autosched.measure import MeasureErrorNo
from autosched.measure.records import load_records
from autosched.search.annotate_gpu import gpu_state_errors
from tensorir.interp import eval_dag


def _opencl_device():
    try:
        import runtime

        return runtime.device("opencl")
    except Exception:  # noqa: BLE001 - no pyopencl / no platform
        return None


@pytest.mark.skipif(_opencl_device() is None, reason="no OpenCL device")
def test_tune_opencl_matmul_relu(tmp_path):
    dag = ansor.ComputeDAG(W.matmul_relu(64, 64, 64))
    task = ansor.SearchTask(dag, target="opencl")
    # Small unrolled bodies: a fully unrolled 1024-statement candidate (unroll 1024, inner
    # tiles of 32) takes PoCL minutes to compile on a busy 2-core machine with a cold cache,
    # which tests nothing here but the machine's load.
    params = ansor.SearchParams(
        evolutionary_search_population=32,
        evolutionary_search_num_iters=1,
        sample_init_min_population=8,
        auto_unroll_configs_gpu=(0, 16),
        max_innermost_split_factor=8,
    )
    policy = ansor.SketchPolicy(task, ansor.LGBModel(), params=params, seed=0, verbose=0)
    log = tmp_path / "gpu.json"
    with ansor.LocalRPCMeasureContext(min_repeat_ms=0, n_parallel=2) as ctx:
        opts = ansor.TuningOptions(num_measure_trials=6, num_measures_per_round=3, verbose=0,
                                   builder=ctx.builder, runner=ctx.runner,
                                   measure_callbacks=[ansor.RecordToFile(str(log))])  # fmt: skip
        best = task.tune(opts, search_policy=policy)
    records = list(load_records(str(log)))
    assert len(records) == 6 and policy.num_trials == 6
    # Every candidate passed the output check (a wrong one would be WRONG_ANSWER).
    errors = [res.error_msg for _, res in records if res.error_no != MeasureErrorNo.NO_ERROR]
    assert not errors, errors
    assert best is not None and gpu_state_errors(task, best) == []
    assert any(it.annotation == "threadIdx.x" for it in best["T_relu"].iters)
    func = ansor.build(task.apply_best(str(log)), "opencl")
    rng = np.random.default_rng(3)
    args = [rng.uniform(-1, 1, t.shape).astype("float32") for t in dag.input_tensors]
    out = np.full(dag.output_tensors[0].shape, np.nan, "float32")
    func(*args, out)
    np.testing.assert_allclose(out, eval_dag(dag, args)[0], rtol=1e-4, atol=1e-4)
