"""Tensor-core (wmma) kernels on a real GPU: sampled states of the tensor-core sketch equal a
float32 numpy reference within fp16 tolerance, and a short search finds a valid wmma kernel."""

import random

import numpy as np
import pytest

import autosched as ansor
from autosched.search.annotate_gpu import gpu_context, gpu_state_errors, sample_state_gpu
from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.dtype import to_numpy
from tensorir.ops.dense import batch_matmul, dense


def _dense_cast(m, n, k):
    a = te.placeholder((m, k), "float16", name="A")
    b = te.placeholder((n, k), "float16", name="B")
    c = dense(a, b, out_dtype="float32")
    return [a, b, te.compute(c.shape, lambda i, j: c[i, j].astype("float16"), name="D")]


def _dense(m, n, k, dtype="float16"):
    a = te.placeholder((m, k), dtype, name="A")
    b = te.placeholder((n, k), dtype, name="B")
    return [a, b, dense(a, b, out_dtype="float32")]


def _bmm(bs, m, n, k):
    x = te.placeholder((bs, m, k), "float16", name="X")
    y = te.placeholder((bs, n, k), "float16", name="Y")
    return [x, y, batch_matmul(x, y, out_dtype="float32")]


CASES = {
    "dense_f32_out": lambda: _dense(128, 96, 64),
    "dense_f16_out": lambda: _dense_cast(64, 128, 96),
    "batch_matmul": lambda: _bmm(3, 64, 32, 48),
    "dense_bf16": lambda: _dense(64, 64, 64, "bfloat16"),
}


def _reference(args):
    x, y = (a.astype(np.float32) for a in args)
    return x @ np.swapaxes(y, -1, -2)


@pytest.mark.parametrize("name", list(CASES))
def test_sampled_tensor_core_states_match_numpy(cuda_backend, name):
    from runtime import device

    task = ansor.SearchTask(ComputeDAG(CASES[name]()), target="cuda")
    (sketch,) = generate_sketches(task)
    ctx, rng = gpu_context(task, SearchParams()), random.Random(7)
    dag = task.compute_dag
    data = np.random.default_rng(5)
    if name == "dense_bf16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 host arrays need ml_dtypes")
    args = [data.uniform(-1, 1, t.shape).astype(to_numpy(t.dtype)) for t in dag.input_tensors]
    want = _reference(args)
    checked = 0
    for _ in range(300):
        s = sample_state_gpu(ctx, sketch, rng, task)
        if s is None:
            continue
        func = ansor.build(s, "cuda", device=device("cuda"))
        assert "wmma::mma_sync" in func.get_source()
        out = np.full(dag.output_tensors[0].shape, np.nan, dag.output_tensors[0].dtype)
        func(*args, out)
        np.testing.assert_allclose(out.astype(np.float32), want, rtol=1e-2, atol=2e-2,
                                   err_msg=str(s))  # fmt: skip
        checked += 1
        if checked == 5:
            break
    assert checked == 5


def test_short_search_finds_a_valid_tensor_core_kernel(cuda_backend, tmp_path):

    task = ansor.SearchTask(ComputeDAG(_dense(256, 256, 256)), target="cuda")
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
    assert any(p == "tensor_core" for st in best.stages for _, p in st.pragmas)
    func = ansor.build(best, "cuda")
    rng = np.random.default_rng(2)
    args = [rng.uniform(-1, 1, t.shape).astype("float16") for t in task.compute_dag.input_tensors]
    out = np.full((256, 256), np.nan, np.float32)
    func(*args, out)
    np.testing.assert_allclose(out, _reference(args), rtol=1e-2, atol=2e-2)
