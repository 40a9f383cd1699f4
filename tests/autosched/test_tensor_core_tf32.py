"""TF32 tensor cores for float32 GEMMs, without a GPU: the tensor-core sketch takes float32
stages only for a target with ``-allow_tf32=1`` (sm_80+ or no ``-arch``), tiles them on 16x16x8
fragments, its states replay, lower and pass the validity check; the CUDA backend emits
``wmma::precision::tf32`` fragments rounded with ``__float_to_tf32`` and nvcc compiles them to
``wmma.mma.sync ... m16n16k8 ... tf32``; without the option float32 stays exact scalar code."""

import logging

import numpy as np
import pytest

from autosched.cost_model.features import FEATURE_NAMES, slog, state_features
from autosched.kernel import generate_source
from autosched.measure import MeasureInput, MeasureResult
from autosched.measure.records import save_records
from autosched.search import sketch_rules_tensor_core as tc_rule
from autosched.search.annotate_gpu import gpu_state_errors
from autosched.search.sketch import generate_sketches
from autosched.search.sketch_rules_tensor_core import tensor_core_dtypes, tensor_core_gemm
from autosched.task import SearchTask
from codegen.cuda import build_cuda, wmma_available, wmma_unavailable_reason
from codegen.target import Target
from tensorir import steps as st
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.passes.tensor_core import FRAGMENT_SHAPES, TF32_TENSOR_CORES
from tensorir.schedule import replay
from tests.autosched.tensor_core_helpers import (
    bmm_tensors,
    dense_tensors,
    fragment_plans,
    gpu_task,
    has_tc,
    needs_nvcc,
    nvcc_ptx,
    records_round_trip,
    split_steps_of_lengths,
    tile_size_mutations,
    two_layer_mlp,
    valid_states,
)

TF32 = "cuda -allow_tf32=1"
pytestmark = pytest.mark.skipif(
    not TF32_TENSOR_CORES, reason="TF32 tensor cores are switched off (TF32_TENSOR_CORES)"
)


def dense_task(target=TF32, m=32, n=48, k=32, dtype="float32"):
    return gpu_task(dense_tensors(m, n, k, dtype), target)


def bmm_task(target=TF32, transpose_b=True):
    tensors = bmm_tensors(2, 32, 32, 24, "float32", out_dtype="", transpose_b=transpose_b)
    return gpu_task(tensors, target)


def test_one_table_gives_each_operand_dtype_its_fragment_shape_and_arch():
    tf32 = FRAGMENT_SHAPES["float32"]
    assert (tf32.m, tf32.n, tf32.k, tf32.min_arch) == (16, 16, 8, 80)
    assert (FRAGMENT_SHAPES["float16"].k, FRAGMENT_SHAPES["float16"].min_arch) == (16, 70)
    assert wmma_available("sm_80", "float32") and wmma_available("sm_90a", "float32")
    assert wmma_available("sm_75", "float32") is False
    assert wmma_available(None, "float32") is None  # decided by __CUDA_ARCH__
    why = wmma_unavailable_reason("sm_75", "float32")
    assert "sm_75" in why and "TF32" in why and "sm_80" in why
    assert wmma_unavailable_reason("sm_80", "float32") == ""


@pytest.mark.parametrize(
    "target,dtype,k,fires",
    [
        ("cuda", "float32", 32, False),  # the default: float32 stays exact (scalar sketches)
        (TF32, "float32", 32, True),
        ("cuda -arch=sm_80 -allow_tf32=1", "float32", 32, True),
        ("cuda -arch=sm_90 -allow_tf32=1", "float32", 24, True),  # TF32's K is 8
        ("cuda -arch=sm_75 -allow_tf32=1", "float32", 32, False),  # no TF32 before sm_80
        (TF32, "float16", 32, True),  # 16-bit GEMMs are unchanged
        (TF32, "float16", 24, False),  # ... their K stays 16
    ],
)
def test_the_rule_takes_float32_only_where_tf32_is_allowed(target, dtype, k, fires):
    task = dense_task(target, k=k, dtype=dtype)
    sketches = generate_sketches(task)
    assert any(has_tc(s) for s in sketches) == fires
    assert len(sketches) == 1
    op = task.compute_dag.ops[-1]
    assert (tensor_core_gemm(op, tensor_core_dtypes(task.target)) is not None) == fires
    assert tensor_core_gemm(op) is None or dtype != "float32"  # the default dtypes: 16-bit


def test_an_arch_without_tf32_says_why_the_option_has_no_effect(caplog):
    tc_rule._warn_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger=tc_rule.__name__):
        dtypes = tensor_core_dtypes(Target("cuda -arch=sm_75 -allow_tf32=1"))
    assert dtypes == ("float16", "bfloat16")
    (msg,) = [r.getMessage() for r in caplog.records]
    assert "-allow_tf32=1 has no effect" in msg and "sm_75" in msg and "sm_80" in msg
    assert "float32" in tensor_core_dtypes(Target("cuda -arch=sm_80 -allow_tf32=1"))
    assert "float32" not in tensor_core_dtypes(Target("cuda -arch=sm_90"))


def test_the_sketch_tiles_k_by_eight_and_fetches_four_floats():
    (s,) = valid_states(dense_task(), 1)
    lengths = [tuple(x.lengths) for x in s.steps if isinstance(x, st.SplitStep)]
    assert lengths.count((16,)) == 2 and (8,) in lengths  # i, j by 16; k by 8
    assert lengths.count((4,)) == 2  # each operand's 16-byte shared fetch: 4 floats
    shared = [x for x in s.stages if x.name.endswith(".shared")]
    assert len(shared) == 2


@pytest.mark.parametrize(
    "make,transposed",
    [(dense_task, True), (bmm_task, True), (lambda: bmm_task(transpose_b=False), False)],
)
def test_tf32_states_replay_lower_validate_and_compute_the_gemm(make, transposed, tmp_path):
    task = make()
    dag = task.compute_dag
    rng = np.random.default_rng(4)
    x, y = [rng.standard_normal(t.shape).astype("float32") for t in dag.input_tensors]
    args = [x, y]
    want = x @ (np.swapaxes(y, -1, -2) if transposed else y)
    states = valid_states(task)
    back = records_round_trip(task, states, tmp_path / "tf32.json")
    for s, (inp, _) in zip(states, back, strict=True):
        assert Target(inp.task.target).allow_tf32  # the record says it was tuned with TF32
        r = inp.state.to_state(dag)
        assert str(r) == str(s) and has_tc(r)
        assert not gpu_state_errors(task, r)
        prog = lower(r)
        plans = [p for p, _ in fragment_plans(prog) if p]
        assert plans and plans[0].dtype == "float32" and plans[0].shape.k == 8
        out = np.zeros(dag.output_tensors[0].shape, np.float32)
        run_program(prog, [*args, out], simt=True)  # the scalar reading: exact float32
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_the_validity_check_knows_tf32_fragments_are_k8():
    """The same state with K split by 16 (fp16's K) is no TF32 fragment nest: rejected."""
    task = dense_task()
    (s,) = valid_states(task, 1)
    steps = list(s.steps)
    (k8,) = [i for i, x in enumerate(steps) if isinstance(x, st.SplitStep) and x.lengths == (8,)]
    steps[k8] = st.SplitStep(steps[k8].stage_id, steps[k8].iter_id, steps[k8].extent, (16,),
                             steps[k8].inner_to_outer)  # fmt: skip
    bad = replay(task.compute_dag, steps)
    errs = gpu_state_errors(task, bad)
    assert any("cannot use wmma fragments" in e and "16x16x8" in e for e in errs), errs


def test_cuda_keeps_float32_scalar_unless_tf32_is_allowed():
    (s,) = valid_states(dense_task(), 1)
    prog = lower(s)
    assert "wmma" not in build_cuda(prog, arch="sm_80").code  # allow_tf32 off: exact float32
    assert "wmma" not in generate_source(s, "cuda -arch=sm_80").code
    code = generate_source(s, "cuda -arch=sm_80 -allow_tf32=1").code
    assert "precision::tf32" in code and "16, 16, 8" in code and "__float_to_tf32" in code
    # No TF32 before sm_80: the scalar loops, even when allowed.
    assert "wmma" not in build_cuda(prog, arch="sm_75", allow_tf32=True).code
    unknown = build_cuda(prog, allow_tf32=True).code  # decided when nvcc compiles
    assert "#if __CUDA_ARCH__ >= 800" in unknown and "precision::tf32" in unknown


def test_16_bit_fragments_are_unchanged_by_the_option():
    (s,) = valid_states(dense_task(TF32, dtype="float16"), 1)
    prog = lower(s)
    code = build_cuda(prog, arch="sm_80", allow_tf32=True).code
    assert code == build_cuda(prog, arch="sm_80").code
    assert "16, 16, 16, half" in code and "tf32" not in code


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tf32_cuda_compiles_to_tf32_mma_ptx(arch, tmp_path):
    (s,) = valid_states(dense_task(m=64, n=32, k=48), 1, seed=2)
    code = generate_source(s, f"cuda -arch={arch} -allow_tf32=1").code
    text = nvcc_ptx(code, arch, tmp_path)
    mma = [ln for ln in text.splitlines() if "wmma.mma.sync" in ln]
    assert mma and all("m16n16k8.f32.tf32.tf32.f32" in ln for ln in mma), mma[:2]
    assert "wmma.load.a.sync.aligned.row.m16n16k8.tf32" in text
    assert "cvt.rna.tf32.f32" in text  # __float_to_tf32: rounded, not truncated
    # The same schedule for a target without the option: exact float32 scalar code, no mma.
    text = nvcc_ptx(generate_source(s, f"cuda -arch={arch}").code, arch, tmp_path)
    assert "mma" not in text and "tf32" not in text


def test_features_see_the_tf32_fragment_shape():
    col = FEATURE_NAMES.index("tc_fragment_mnk")
    tc = FEATURE_NAMES.index("tensor_core")
    got = {}
    for dtype in ("float32", "float16"):
        task = dense_task(dtype=dtype)
        (s,) = valid_states(task, 1)
        x = state_features(task, s)
        got[dtype] = x[x[:, tc] == 1.0][:, col]
        assert len(got[dtype]) >= 2  # the accumulator (mma) and the output (fragment store)
    np.testing.assert_allclose(got["float32"], slog(16 * 16 * 8), rtol=1e-6)
    np.testing.assert_allclose(got["float16"], slog(16 * 16 * 16), rtol=1e-6)


def test_mutation_keeps_tf32_fragment_k_and_vector_splits():
    task = dense_task(m=64, n=64, k=64)
    (s,) = valid_states(task, 1)
    fixed = split_steps_of_lengths(s, ((16,), (8,), (4,), (32,)))
    assert len(fixed) >= 7  # i, j by 16; k by 8; per operand: 4-wide vector, 32 lanes
    mutated = tile_size_mutations(task, s, seed=1)
    assert mutated
    for m in mutated:
        assert [m.steps[k].lengths for k in fixed] == [s.steps[k].lengths for k in fixed]


@needs_nvcc
def test_a_float32_network_gets_tf32_tasks_whose_kernels_compile(tmp_path):
    """Network tasks carry -allow_tf32=1, their sketches are TF32 tensor-core ones, and the
    kernels a network build generates from them (weights layout-rewritten) compile to TF32."""
    import autosched as ansor

    func, params = two_layer_mlp(32, 64, 48, 32, np.random.default_rng(0), scale=0.3)
    hw = ansor.HardwareParams(num_cores=16, max_threads_per_block=1024, warp_size=32,
                              max_shared_memory_per_block=49152)  # fmt: skip
    tasks, _ = ansor.extract_tasks(func, params, "cuda -arch=sm_80 -allow_tf32=1",
                                   hardware_params=hw)  # fmt: skip
    assert len(tasks) == 2
    codes = []
    for k, task in enumerate(tasks):
        (sketch,) = generate_sketches(task)
        assert has_tc(sketch), task.compute_dag
        (s,) = valid_states(task, 1)
        code = generate_source(s, task.target, f"g{k}", layout_rewrite=True).code
        assert "precision::tf32" in code
        codes.append(code)
    ptx = nvcc_ptx("\n".join(codes), "sm_80", tmp_path, "net")
    assert ptx.count("wmma.mma.sync.aligned.row.col.m16n16k8.f32.tf32") >= 2
    plain, _ = ansor.extract_tasks(func, params, "cuda -arch=sm_80", hardware_params=hw)
    assert not any(has_tc(s) for t in plain for s in generate_sketches(t))


def test_records_tuned_with_tf32_are_not_applied_without_it(tmp_path):
    """A TF32 record serves a TF32 task or build only: a plain cuda task finds no record in
    that log, a network build for plain cuda (even another -arch) takes none."""
    from autosched.measure.dispatch import ApplyHistoryBest
    from autosched.network.build import _candidates

    task = dense_task()
    (s,) = valid_states(task, 1)
    log = tmp_path / "tf32.json"
    save_records(log, [MeasureInput(task, s)], [MeasureResult((1e-5,))])
    assert str(task.apply_best(str(log))) == str(s)
    plain = SearchTask(task.compute_dag, target="cuda", hardware_params=task.hardware_params)
    with pytest.raises(ValueError, match="no valid record"):
        plain.apply_best(str(log))
    ctx = ApplyHistoryBest(str(log))
    key = task.compute_dag.workload_key
    assert _candidates(ctx, key, Target("cuda")) == []
    assert _candidates(ctx, key, Target("cuda -arch=sm_80")) == []
    assert len(_candidates(ctx, key, Target("cuda -arch=sm_80 -allow_tf32=1"))) == 1
