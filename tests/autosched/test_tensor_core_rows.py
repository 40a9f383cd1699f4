"""Tensor-core sampling on the GEMMs real networks give it (issue 28), without a GPU.

An implicit-GEMM conv at batch > 1 reads its GEMM back as ``out[n, oh, ow, co] =
gemm[(n*OH + oh)*OW + ow, co]``; the sketch fuses ``n, oh, ow`` into one loop ``f`` that it
tiles like the GEMM's rows, and bound inference must see that the index is ``f`` again to give
the GEMM (computed at the warps loop) the rows of one tile. Until the simplifier folded that
three-axis flattening back (``tensorir.arith``), it saw a whole image or more, the fragment
rules failed, and 0 of every draw was valid: every conv of resnet-18 at batch 16, the batch-2
14x14 stride-2 conv of the GPU test (P = 98 rows in 112), fp16 and TF32 alike. The table of
valid-draw rates before and after is in benchmarks/RESULTS.md (2026-11-27)."""

import random

import numpy as np
import pytest

import autosched as ansor
from autosched.search.annotate_gpu import gpu_context, gpu_state_errors, sample_state_gpu
from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from tensorir.interp import eval_dag
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tests.autosched.tensor_core_helpers import (
    GPU_HW,
    NVCC,
    bmm_tensors,
    conv_dag,
    dense_tensors,
    fragment_plans,
    gpu_task,
    has_tc,
    needs_nvcc,
    nvcc_ptx,
    random_args,
    records_round_trip,
    valid_states,
)

TF32 = "cuda -arch=sm_90 -allow_tf32=1"
MIN_RATE = 0.1  # of the draws: at least this many valid (today's rates: RESULTS.md)

# (layout, n, ci, h, co, k, stride, pad): the convs of resnet-18/50 whose GEMM rows cross
# image boundaries in a tile, and the rows that are not a power-of-two multiple of 16.
CONVS = {
    "gpu-test b2 14x14 s2 (P 98 in 112)": ("NHWC", 2, 32, 14, 64, 3, 2, 1),
    "resnet-18 b16 conv4 s2 (P 784)": ("NHWC", 16, 128, 28, 256, 3, 2, 1),
    "resnet-18 b16 conv5 1x1 s2 (P 784)": ("NHWC", 16, 256, 14, 512, 1, 2, 0),
    "resnet-50 b1 conv4 1x1 (P 196 in 208)": ("NHWC", 1, 1024, 14, 256, 1, 1, 0),
    "resnet-50 b16 conv5 (P 784)": ("NHWC", 16, 512, 7, 512, 3, 1, 1),
}
SMALL_B2 = ("NHWC", 2, 16, 14, 16, 3, 2, 1)  # the same rows (98 in 112), 16 channels
# bert-base at seq 128: the dense layers (M, N, K) and the attention's batch_matmuls.
DENSES = {"qkv": (128, 2304, 768), "ffn-in": (128, 3072, 768), "ffn-out": (128, 768, 3072)}
BMMS = {"q.kT": (12, 128, 128, 64), "attn.v": (12, 128, 64, 128)}


def valid_draws(task, draws, seed=0) -> int:
    """How many of ``draws`` seeded draws from the task's tensor-core sketch are valid: the
    fewest of its sketches (sm_90's K-major GEMMs also have the warpgroup one)."""
    sketches = generate_sketches(task)
    assert sketches and all(has_tc(s) for s in sketches)
    counts = []
    for sketch in sketches:
        ctx, rng = gpu_context(task, SearchParams()), random.Random(seed)
        counts.append(sum(sample_state_gpu(ctx, sketch, rng, task) is not None
                          for _ in range(draws)))  # fmt: skip
    return min(counts)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("name", list(CONVS))
def test_real_network_convs_sample_valid_states(name, dtype):
    dag = conv_dag(*CONVS[name], epilogue=True, dtype=dtype)
    draws = 12
    assert valid_draws(gpu_task(dag, TF32), draws) >= MIN_RATE * draws, name


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("shape", [*DENSES.values(), *BMMS.values()], ids=[*DENSES, *BMMS])
def test_bert_base_gemms_sample_valid_states(shape, dtype):
    tensors = dense_tensors(*shape, dtype=dtype) if len(shape) == 3 else bmm_tensors(*shape, dtype)
    draws = 12
    assert valid_draws(gpu_task(tensors, TF32), draws) >= MIN_RATE * draws, shape


@pytest.mark.slow
def test_every_tensor_core_task_of_resnet18_at_batch_16_samples_valid_states():
    """The tasks as a user extracts them (TF32; fp16 through to_mixed_precision), one per
    GEMM shape: each samples valid states (0 of 20 draws each before the fix)."""
    mod, params, _, _ = ansor.networks.get_network("resnet-18", 16, "NHWC")
    tasks, _ = ansor.extract_tasks(mod, params, TF32, hardware_params=GPU_HW)
    mixed = ansor.to_mixed_precision(mod, "float16", params)
    tasks16, _ = ansor.extract_tasks(mixed, None, "cuda -arch=sm_90", hardware_params=GPU_HW)
    checked, seen = 0, set()
    for task in [*tasks, *tasks16]:
        if not any(has_tc(s) for s in generate_sketches(task)):
            continue
        gemm = next(op for op in task.compute_dag.ops if op.name == "conv2d_gemm")
        key = (str(task.target), tuple(gemm.shape), gemm.reduce_axes[0].extent)
        if key in seen or len(seen) >= 6:  # the first six distinct shapes: a few seconds
            continue
        seen.add(key)
        assert valid_draws(task, 8) >= 1, (task.desc, key)
        checked += 1
    assert checked == 6


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_the_batch_2_strided_conv_replays_lowers_and_computes_the_conv(dtype, tmp_path):
    """The GPU test's original case (restored in tests/gpu/test_tensor_core_conv_tf32_cuda.py)
    with fewer channels (the interpreter's time): its states replay from records, lower to
    one kernel of fragments whose epilogue is fused, and compute the conv on the scalar
    reading (the rows of a tile span both images)."""
    dag = conv_dag(*SMALL_B2, epilogue=True, dtype=dtype)
    target = TF32 if dtype == "float32" else "cuda -arch=sm_90"
    task = gpu_task(dag, target)
    states = valid_states(task, 1, seed=1, tries=40)
    args = random_args(dag, seed=3)
    want = eval_dag(dag, args)[0].astype(np.float32)
    back = records_round_trip(task, states, tmp_path / "b2.json")
    for st, (inp, _) in zip(states, back, strict=True):
        r = inp.state.to_state(dag)
        assert str(r) == str(st) and not gpu_state_errors(task, r)
        prog = lower(r)
        ((plan, why),) = fragment_plans(prog)  # one kernel: the epilogue in the store nest
        assert plan is not None and plan.dtype == dtype and plan.store, why
        out = np.zeros(want.shape, dag.output_tensors[0].dtype)
        run_program(prog, [*args, out], simt=True)
        tol = 1e-5 if dtype == "float32" else 2e-2  # fp16 output
        np.testing.assert_allclose(out.astype(np.float32), want, rtol=tol, atol=tol)


@needs_nvcc
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_the_batch_2_strided_conv_compiles_to_mma_ptx(dtype, tmp_path):
    from autosched.kernel import generate_source

    dag = conv_dag(*CONVS["gpu-test b2 14x14 s2 (P 98 in 112)"], epilogue=True, dtype=dtype)
    target = TF32 if dtype == "float32" else "cuda -arch=sm_90"
    (st,) = valid_states(gpu_task(dag, target), 1, seed=2, tries=40)
    code = generate_source(st, target).code
    assert code.count("__global__") == 1 and "wmma::mma_sync" in code
    assert NVCC is not None
    text = nvcc_ptx(code, "sm_90", tmp_path)
    assert "wmma.mma.sync" in text and "wmma.store.d" in text


@pytest.mark.parametrize("case", ["conv", "dense"])
def test_the_shared_memory_estimate_decides_as_the_verifier(case):
    """The estimate before binding (block_shared_bytes: the shared rows padded; and
    store_tile_bytes: the store nests' per-warp tiles) refuses exactly the tilings the
    verifier refuses (single-buffered): those are redrawn before lowering, not lost after
    it."""

    if case == "conv":
        task = gpu_task(conv_dag(*CONVS["resnet-18 b16 conv4 s2 (P 784)"], dtype="float32"), TF32)
    else:
        task = gpu_task(dense_tensors(*DENSES["ffn-in"]), TF32)
    verdicts = []
    for sketch in generate_sketches(task):  # sm_90's dense: the wmma and warpgroup sketches
        verdicts += shared_memory_verdicts(task, sketch)
    assert any(verdicts) and not all(verdicts)


def shared_memory_verdicts(task, sketch) -> list:
    """Whether each of 10 tilings of ``sketch`` is over the shared-memory limit, asserting
    that the estimate before binding says what the verifier says."""
    from autosched.search import annotate_gpu as ag
    from autosched.search import state_utils as su

    ctx, rng = gpu_context(task, SearchParams()), random.Random(4)
    limit = ctx.hw.max_shared_memory_per_block
    verdicts = []
    for _ in range(10):
        s = ag.init_fill_tile_size_gpu(ctx, sketch, rng)
        stores = max(ag.store_tile_bytes(s).values(), default=0)  # one kernel (wgmma: none)
        over = max(ag.block_shared_bytes(ctx, s).values()) + stores > limit
        s = ag.init_thread_bind(ctx, s, rng, su.bound_extents(s))
        errors = gpu_state_errors(task, su.with_pipeline_stages(s, 1))
        assert over == any("shared memory" in e for e in errors), errors
        verdicts.append(over)
    return verdicts


def test_tile_size_mutations_of_the_batch_2_conv_stay_valid():
    """Evolution mutates the row split (block tile, warps, fragments per warp) of a state whose
    tiles span both images: the verifier keeps accepting such states (it refused all before)."""
    from tests.autosched.tensor_core_helpers import tile_size_mutations

    dag = conv_dag(*CONVS["gpu-test b2 14x14 s2 (P 98 in 112)"], epilogue=True, dtype="float32")
    task = gpu_task(dag, TF32)
    (state,) = valid_states(task, 1, seed=5, tries=40)
    mutated = tile_size_mutations(task, state, seed=6, tries=20)
    rows = [m for m in mutated if m.steps != state.steps]
    valid = [m for m in rows if not gpu_state_errors(task, m)]
    assert len(valid) >= MIN_RATE * len(rows) > 0, (len(valid), len(rows))


def test_the_pipeline_depths_offered_are_those_the_verifier_accepts():
    """N copies of the staged tiles plus the store tiles once: a depth above 2 (up to the k
    tiles of the pipelined loop) is offered exactly when the state with that many stages
    passes the verifier's shared-memory check."""
    from autosched.search import annotate_gpu as ag
    from autosched.search import state_utils as su
    from tensorir import steps as st
    from tensorir.passes.double_buffer import PIPELINE_PRAGMAS

    task = gpu_task(dense_tensors(256, 256, 1024), "cuda -arch=sm_90")
    ctx = gpu_context(task, SearchParams(gpu_tensor_core_pipeline=4))
    rng, seen = random.Random(8), {True: 0, False: 0}
    sketches = generate_sketches(task)  # the wmma and the warpgroup sketch, in turn
    for draw in range(16 * len(sketches)):
        sketch = sketches[draw % len(sketches)]
        s = ag.init_fill_tile_size_gpu(ctx, sketch, rng)
        choices = ag.pipeline_depth_choices(ctx, s)
        stage = s.stages[s.steps[su.pipeline_steps(s.steps)[0]].stage_id]
        ext = st.derive_extents(stage, {it.name: it.extent for it in stage.root_iters})
        k_tiles = min(ext[name] for name, p in stage.pragmas if p in PIPELINE_PRAGMAS)
        bound = ag.init_thread_bind(ctx, s, rng, su.bound_extents(s))
        for n in range(3, min(4, k_tiles) + 1):
            staged = su.with_pipeline_stages(bound, n)
            fits = not any("shared memory" in e for e in gpu_state_errors(task, staged))
            assert (n in choices) == fits, (n, choices, str(s))
            seen[fits] += 1
    assert seen[True] and seen[False], seen
