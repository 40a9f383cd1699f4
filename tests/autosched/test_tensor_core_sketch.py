"""The tensor-core sketch (wmma fragments) without a GPU: when it fires, that its sampled states
replay from records and compute the right result as scalar loops, that the validity check
knows the fragment rules, and that nvcc compiles the generated CUDA to PTX with wmma."""

import random
import shutil
import subprocess

import numpy as np
import pytest

from autosched.hardware import HardwareParams
from autosched.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.measure.records import load_records, save_records
from autosched.search.annotate_gpu import gpu_context, gpu_state_errors, sample_state_gpu
from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from autosched.search.sketch_rules_tensor_core import tensor_core_gemm
from autosched.task import SearchTask
from codegen.cuda import build_cuda
from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.ops.dense import batch_matmul, dense
from tensorir.passes.tensor_core import fragment_plan
from tensorir.passes.verify_gpu import kernels

NVCC = shutil.which("nvcc") or shutil.which("nvcc", path="/usr/local/cuda/bin")


def _task(tensors):
    hw = HardwareParams(num_cores=1, max_shared_memory_per_block=49152)
    return SearchTask(ComputeDAG(tensors), target="cuda", hardware_params=hw)


def dense_task(m=32, n=48, k=32, dtype="float16", out="float32"):
    a = te.placeholder((m, k), dtype, name="A")
    b = te.placeholder((n, k), dtype, name="B")
    return _task([a, b, dense(a, b, out_dtype=out)])


def bmm_task(batch=2, m=32, n=32, k=32, transpose_b=True, y_batch=None):
    x = te.placeholder((batch, m, k), "float16", name="X")
    y_shape = (n, k) if transpose_b else (k, n)
    y = te.placeholder((y_batch or batch, *y_shape), "float16", name="Y")
    return _task([x, y, batch_matmul(x, y, out_dtype="float32", transpose_b=transpose_b)])


def bmm_nn_broadcast_task():
    """``y[0, k, j]`` for every batch: not transposed, broadcast."""
    return bmm_task(transpose_b=False, y_batch=1)


def has_tc(state) -> bool:
    return any(p == "tensor_core" for s in state.stages for _, p in s.pragmas)


def valid_states(task, n=3, seed=0):
    sk = [s for s in generate_sketches(task) if has_tc(s)]
    assert sk, "no tensor-core sketch"
    ctx, rng = gpu_context(task, SearchParams()), random.Random(seed)
    out = []
    for _ in range(200):
        s = sample_state_gpu(ctx, sk[0], rng, task)
        if s is not None:
            out.append(s)
            if len(out) == n:
                break
    assert len(out) == n
    return out


@pytest.mark.parametrize(
    "make,fires",
    [
        (lambda: dense_task(), True),
        (lambda: dense_task(out="float16"), True),
        (lambda: bmm_task(), True),
        (lambda: dense_task(dtype="float32"), False),  # no fp32 wmma
        (lambda: dense_task(m=1, n=48, k=32), False),  # batch-1 dense: M = 1
        (lambda: dense_task(k=24), False),  # K not a multiple of 16
    ],
)
def test_the_rule_fires_on_fp16_gemms_with_whole_fragments_only(make, fires):
    task = make()
    op = task.compute_dag.ops[-1]
    assert (tensor_core_gemm(op) is not None) == fires
    sketches = generate_sketches(task)
    assert any(has_tc(s) for s in sketches) == fires
    # The tensor-core sketch replaces the scalar one for the stage it matches.
    assert len(sketches) == 1 or not fires


@pytest.mark.parametrize("make", [dense_task, bmm_task, bmm_nn_broadcast_task])
def test_sampled_states_replay_from_records_and_compute_the_gemm(make, tmp_path):
    task = make()
    dag = task.compute_dag
    rng = np.random.default_rng(3)
    args = [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]
    x, y = (a.astype(np.float32) for a in args)
    want = x @ (y if make is bmm_nn_broadcast_task else np.swapaxes(y, -1, -2))
    states = valid_states(task)
    path = tmp_path / "tc.json"
    save_records(
        path,
        [MeasureInput(task, s) for s in states],
        [MeasureResult((1.0,), MeasureErrorNo.NO_ERROR, "", 0.1, 1.0)] * len(states),
    )
    back = [inp.state.to_state(dag) for inp, _ in load_records(path)]
    for s, r in zip(states, back, strict=True):
        assert str(r) == str(s) and has_tc(r)
        assert not gpu_state_errors(task, r)
        prog = lower(r)
        plans = [fragment_plan(k.stmt, k.extents) for k in kernels(prog)]
        assert any(p is not None for p, _ in plans), plans
        out = np.zeros(dag.output_tensors[0].shape, np.float32)
        run_program(prog, [*args, out], simt=True)  # the scalar reading of the marked loops
        np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)


def test_validity_check_knows_the_fragment_rules():
    task = dense_task()
    (s,) = valid_states(task, 1)
    prog = lower(s)
    small = task.hardware_params.as_limits() | {"max_shared_memory_per_block": 1024}
    from tensorir.passes.verify_gpu import gpu_program_errors

    errs = gpu_program_errors(prog, small)
    assert any("fragment store tiles" in e for e in errs), errs
    # A warp whose lanes are not one threadIdx.x row cannot share fragments.
    info = kernels(prog)[0]
    plan, why = fragment_plan(info.stmt, {**info.extents, "threadIdx.x": 16})
    assert plan is None and "32" in why


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize(
    "arch,dtype", [("sm_80", "float16"), ("sm_90", "float16"), (None, "float16"),
                   ("sm_80", "bfloat16")],
)  # fmt: skip
def test_generated_cuda_compiles_to_wmma_ptx(arch, dtype, tmp_path):
    task = dense_task(dtype=dtype, out="float32" if dtype == "bfloat16" else "float16")
    (s,) = valid_states(task, 1, seed=5)
    code = build_cuda(lower(s), arch=arch).code
    assert "nvcuda::wmma::mma_sync" in code
    if arch is None:  # unknown arch: scalar fallback under #if __CUDA_ARCH__
        assert "#if __CUDA_ARCH__ >= 700" in code
    if dtype == "bfloat16":
        assert "__nv_bfloat16, nvcuda::wmma::row_major" in code
    src = tmp_path / "k.cu"
    src.write_text(code)
    ptx = tmp_path / "k.ptx"
    subprocess.run([NVCC, "-ptx", f"-arch={arch or 'sm_80'}", str(src), "-o", str(ptx)],
                   check=True, capture_output=True)  # fmt: skip
    text = ptx.read_text()
    assert "wmma.mma.sync" in text and "wmma.load.a" in text


def test_an_older_arch_keeps_the_scalar_loops():
    (s,) = valid_states(dense_task(), 1)
    assert "wmma" not in build_cuda(lower(s), arch="sm_61").code
    (s,) = valid_states(dense_task(dtype="bfloat16"), 1)  # bf16 fragments need sm_80
    assert "wmma" not in build_cuda(lower(s), arch="sm_75").code
    assert "wmma" in build_cuda(lower(s), arch="sm_80").code


def test_features_mark_tensor_core_stores_only():
    from autosched.cost_model.features import FEATURE_NAMES, state_features

    task = dense_task()
    (s,) = valid_states(task, 1)
    x = state_features(task, s)
    col = FEATURE_NAMES.index("tensor_core")
    assert x.shape[1] == len(FEATURE_NAMES) and x[:, col].max() == 1.0
    assert x[x[:, col] == 1.0][:, col + 2].min() > 0  # accumulator fragments per warp
    scalar = dense_task(dtype="float32")
    (sk,) = generate_sketches(scalar)
    ctx, rng = gpu_context(scalar, SearchParams()), random.Random(0)
    st = next(t for t in (sample_state_gpu(ctx, sk, rng, scalar) for _ in range(50)) if t)
    assert not state_features(scalar, st)[:, col:].any()


def test_mutation_keeps_the_fixed_fragment_lanes_and_vector_splits():
    from autosched.search.mutation import mutate_tile_size
    from tensorir import steps as st

    task = dense_task(m=64, n=64, k=64)
    (s,) = valid_states(task, 1)
    ctx = gpu_context(task, SearchParams())
    fixed = [
        k
        for k, step in enumerate(s.steps)
        if isinstance(step, st.SplitStep) and tuple(step.lengths) in ((16,), (32,), (8,))
    ]
    assert len(fixed) >= 7  # i, j, k by 16; per operand: 8-wide vector, 32 lanes
    rng, changed = random.Random(0), 0
    for _ in range(60):
        m = mutate_tile_size(ctx, s, rng)
        if m is None:
            continue
        changed += 1
        assert [m.steps[k].lengths for k in fixed] == [s.steps[k].lengths for k in fixed]
    assert changed  # the searched splits (warps, fragments, k tile) still mutate


def test_a_mixed_precision_network_gets_tensor_core_tasks_with_fused_epilogues():
    import autosched as ansor
    from tensorir.dtype import tolerance
    from tensorir.graph import ir as gir
    from tensorir.graph import nn, op
    from tensorir.interp import eval_dag

    rng = np.random.default_rng(0)
    shapes = {"w1": (32, 64), "b1": (32,), "w2": (16, 32)}
    data, *ws = [op.var("data", (32, 64)), *(op.var(k, s) for k, s in shapes.items())]
    out = nn.dense(nn.relu(nn.bias_add(nn.dense(data, ws[0]), ws[1])), ws[2])
    params = {k: rng.normal(0, 0.3, s).astype("float32") for k, s in shapes.items()}
    mod = gir.Module({"main": gir.Function((data, *ws), out)})
    mixed = ansor.to_mixed_precision(mod, "float16", params)
    tasks, _ = ansor.extract_tasks(mixed, params, "cuda")
    assert len(tasks) == 2
    for task in tasks:
        (sketch,) = generate_sketches(task)
        assert has_tc(sketch), task.compute_dag
    task = next(t for t in tasks if "relu" in str(t.compute_dag))
    (s,) = valid_states(task, 1)
    dag = task.compute_dag
    args = [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]
    outs = [np.zeros(t.shape, t.dtype) for t in dag.output_tensors]
    run_program(lower(s), [*args, *outs], simt=True)  # bias + relu + cast in the store nest
    for got, want in zip(outs, eval_dag(dag, args), strict=True):
        np.testing.assert_allclose(got.astype("f4"), want.astype("f4"), *tolerance("float16"))
    assert "store_matrix_sync" in build_cuda(lower(s), arch="sm_80").code
