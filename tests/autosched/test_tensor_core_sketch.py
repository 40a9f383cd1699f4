"""The tensor-core sketch (wmma fragments) without a GPU: when it fires, that its sampled states
replay from records and compute the right result as scalar loops, that the validity check
knows the fragment rules, and that nvcc compiles the generated CUDA to PTX with wmma."""

import numpy as np
import pytest

from autosched.search.annotate_gpu import gpu_state_errors
from autosched.search.sketch import generate_sketches
from autosched.search.sketch_rules_tensor_core import tensor_core_gemm
from codegen.cuda import build_cuda
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.passes.tensor_core import fragment_plan
from tensorir.passes.verify_gpu import kernels
from tests.autosched.tensor_core_helpers import (
    bmm_tensors,
    dense_tensors,
    fragment_plans,
    gemm_reference,
    gpu_task,
    has_tc,
    needs_nvcc,
    nvcc_ptx,
    random_args,
    records_round_trip,
    sampled_states,
    split_steps_of_lengths,
    tile_size_mutations,
    two_layer_mlp,
    valid_states,
)


def dense_task(m=32, n=48, k=32, dtype="float16", out="float32"):
    return gpu_task(dense_tensors(m, n, k, dtype, out))


def bmm_task(batch=2, m=32, n=32, k=32, transpose_b=True, y_batch=None):
    return gpu_task(bmm_tensors(batch, m, n, k, transpose_b=transpose_b, y_batch=y_batch))


def bmm_nn_broadcast_task():
    """``y[0, k, j]`` for every batch: not transposed, broadcast."""
    return bmm_task(transpose_b=False, y_batch=1)


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
    args = random_args(dag, seed=3)
    want = gemm_reference(args, transpose_b=make is not bmm_nn_broadcast_task)
    states = valid_states(task)
    records = records_round_trip(task, states, tmp_path / "tc.json")
    back = [inp.state.to_state(dag) for inp, _ in records]
    for s, r in zip(states, back, strict=True):
        assert str(r) == str(s) and has_tc(r)
        assert not gpu_state_errors(task, r)
        prog = lower(r)
        plans = fragment_plans(prog)
        assert any(p is not None for p, _ in plans), plans
        out = np.zeros(dag.output_tensors[0].shape, np.float32)
        run_program(prog, [*args, out], simt=True)  # the scalar reading of the marked loops
        np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)


def test_validity_check_knows_the_fragment_rules():
    task = dense_task()
    (s,) = valid_states(task, 1)
    prog = lower(s)
    small = task.hardware_params.as_limits() | dict.fromkeys(
        ("max_shared_memory_per_block", "max_shared_memory_per_block_optin"), 1024
    )
    from tensorir.passes.verify_gpu import gpu_program_errors

    errs = gpu_program_errors(prog, small)
    assert any("fragment store tiles" in e for e in errs), errs
    # A warp whose lanes are not one threadIdx.x row cannot share fragments.
    info = kernels(prog)[0]
    plan, why = fragment_plan(info.stmt, {**info.extents, "threadIdx.x": 16})
    assert plan is None and "32" in why


@needs_nvcc
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
    text = nvcc_ptx(code, arch or "sm_80", tmp_path)
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
    st = next(sampled_states(scalar, sk, seed=0, tries=50))
    assert not state_features(scalar, st)[:, col:].any()


def test_mutation_keeps_the_fixed_fragment_lanes_and_vector_splits():
    task = dense_task(m=64, n=64, k=64)
    (s,) = valid_states(task, 1)
    fixed = split_steps_of_lengths(s, ((16,), (32,), (8,)))
    assert len(fixed) >= 7  # i, j, k by 16; per operand: 8-wide vector, 32 lanes
    mutated = tile_size_mutations(task, s, seed=0)
    assert mutated  # the searched splits (warps, fragments, k tile) still mutate
    for m in mutated:
        assert [m.steps[k].lengths for k in fixed] == [s.steps[k].lengths for k in fixed]


def test_a_mixed_precision_network_gets_tensor_core_tasks_with_fused_epilogues():
    import autosched as ansor
    from tensorir.dtype import tolerance
    from tensorir.graph import ir as gir
    from tensorir.interp import eval_dag

    rng = np.random.default_rng(0)
    func, params = two_layer_mlp(32, 64, 32, 16, rng, scale=0.3)
    mod = gir.Module({"main": func})
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
