"""The warpgroup (wgmma) tensor-core sketch without a GPU: when it fires, what its states
lower to (warpgroup tiles the CUDA backend reads), that they compute the GEMM when read as
plain loops, which lengths mutation must keep, and the CUDA it renders (wgmma products of
swizzled shared tiles) compiling for sm_90a. tests/gpu/test_warpgroup_cuda.py runs them."""

import re

import numpy as np
import pytest

from autosched.search.annotate_gpu import gpu_state_errors
from autosched.search.sketch import generate_sketches
from autosched.search.sketch_rules_warpgroup import is_warpgroup_state
from autosched.search.state_utils import tensor_core_fixed_split
from codegen.cuda import build_cuda
from tensorir.dtype import truncate_to_tf32
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.passes.warpgroup import WARPGROUP_LANES, warpgroup_tile
from tensorir.steps import SplitStep
from tests.autosched.tensor_core_helpers import (
    bmm_tensors,
    dense_tensors,
    first_states,
    fragment_plans,
    gpu_task,
    needs_nvcc,
    nvcc_ptx,
    sampled_states,
)

SM90 = "cuda -arch=sm_90"
SM90_TF32 = "cuda -arch=sm_90 -allow_tf32=1"


def warpgroup_sketches(task) -> list:
    return [s for s in generate_sketches(task) if is_warpgroup_state(s)]


def warpgroup_states(task, n, seed=0) -> list:
    (sketch,) = warpgroup_sketches(task)
    return first_states(sampled_states(task, sketch, seed), n)


@pytest.mark.parametrize(
    "target, tensors, fires",
    [
        (SM90, lambda: dense_tensors(128, 64, 128), True),
        (SM90, lambda: dense_tensors(128, 64, 128, "bfloat16"), True),
        (SM90, lambda: bmm_tensors(2, 64, 32, 64), True),
        ("cuda -arch=sm_80", lambda: dense_tensors(128, 64, 128), False),
        ("cuda -arch=sm_100", lambda: dense_tensors(128, 64, 128), False),
        (SM90, lambda: bmm_tensors(2, 64, 32, 64, transpose_b=False), False),  # B not K-major
        (SM90, lambda: dense_tensors(48, 64, 128), False),  # rows not a multiple of 64
        (SM90, lambda: dense_tensors(128, 64, 96), False),  # k not a multiple of 64
        (SM90, lambda: dense_tensors(128, 64, 128, out_dtype="float16"), False),  # fp16 acc
        (SM90_TF32, lambda: dense_tensors(128, 64, 96, "float32"), True),  # k: rows of 32
        (SM90_TF32, lambda: dense_tensors(128, 64, 80, "float32"), False),  # k not 32s
        (SM90, lambda: dense_tensors(128, 64, 96, "float32"), False),  # no -allow_tf32=1
    ],
)
def test_the_rule_fires_on_sm_90_k_major_gemms_beside_the_wmma_sketch(target, tensors, fires):
    sketches = generate_sketches(gpu_task(tensors(), target=target))
    assert sum(map(is_warpgroup_state, sketches)) == int(fires)
    assert sum(not is_warpgroup_state(s) for s in sketches) == 1  # the wmma (or SIMT) one


def test_sampled_states_lower_to_warpgroup_tiles_the_gpu_check_accepts():
    task = gpu_task(dense_tensors(256, 256, 128), target=SM90)
    (wmma,) = [s for s in generate_sketches(task) if not is_warpgroup_state(s)]
    assert not any(map(is_warpgroup_state, first_states(sampled_states(task, wmma), 5)))
    for state in warpgroup_states(task, 5):
        assert is_warpgroup_state(state) and gpu_state_errors(task, state) == []
        ((plan, why),) = fragment_plans(lower(state))
        assert why == "" and plan.warpgroup and plan.staging_bytes == 0
        for key in plan.mma:
            tile = warpgroup_tile(plan, key)
            assert not isinstance(tile, str), tile
            assert tile.n % 16 == 0 and 16 <= tile.n <= 256 and tile.m_tiles == 1


def test_the_loops_as_written_compute_the_gemm():
    task = gpu_task(dense_tensors(128, 32, 128), target=SM90)
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, (128, 128)).astype(np.float16)
    b = rng.uniform(-1, 1, (32, 128)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32).T
    for state in warpgroup_states(task, 2, seed=3):
        out = np.full((128, 32), np.nan, np.float32)
        run_program(lower(state), [a, b, out], simt=True)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_mutation_keeps_the_lengths_the_sketch_fixed():
    task = gpu_task(dense_tensors(256, 256, 128), target=SM90)
    (state,) = warpgroup_states(task, 1)
    fixed = [(k, s.lengths) for k, s in enumerate(state.steps)
             if isinstance(s, SplitStep) and tensor_core_fixed_split(state, k)]  # fmt: skip
    lengths = sorted(ls for _, ls in fixed)
    # i by 64 then 16, j by 16, k by 64 then 16; each shared copy by 8 halves and 128 lanes
    assert lengths.count((64,)) == 2 and lengths.count((16,)) == 3
    assert lengths.count((WARPGROUP_LANES,)) == 2 and lengths.count((8,)) == 2


def test_the_rendered_kernel_multiplies_swizzled_tiles_with_wgmma():
    task = gpu_task(dense_tensors(128, 64, 128, cast="float16"), target=SM90)
    (state,) = warpgroup_states(task, 1)
    code = build_cuda(lower(state), arch="sm_90").code
    assert "wgmma.mma_async.sync.aligned.m64n" in code and "wmma::" not in code
    assert code.count("__align__(1024)") == 2  # A's and B's tiles: 1024-byte swizzle atoms
    assert re.search(r"cp_async16\(&A_shared\[\(+.*\^", code)  # stores swizzled
    assert "fence_async_shared();" in code and "wgmma_wait<0>();" in code
    assert "__CUDA_ARCH_FEAT_SM90_ALL" not in code  # the arch is known: no scalar copy
    unknown = build_cuda(lower(state)).code  # arch decided by nvcc: both forms
    assert "__CUDA_ARCH_FEAT_SM90_ALL" in unknown and "SWIZZLE_OR_PLAIN_64(" in unknown
    # Another architecture cannot run wgmma: the loops stay scalar (128 lanes each).
    assert "wgmma.mma_async" not in build_cuda(lower(state), arch="sm_80").code


@needs_nvcc
def test_nvcc_compiles_the_kernel_for_sm_90a(tmp_path):
    task = gpu_task(dense_tensors(256, 128, 128, cast="float16"), target=SM90)
    (state,) = warpgroup_states(task, 1, seed=2)
    ptx = nvcc_ptx(build_cuda(lower(state), arch="sm_90").code, "sm_90a", tmp_path)
    assert "wgmma.mma_async.sync.aligned" in ptx and "fence.proxy.async" in ptx
    # Unknown arch: compiles for sm_90a with wgmma, and for sm_80 without it.
    code = build_cuda(lower(state)).code
    assert "wgmma.mma_async" in nvcc_ptx(code, "sm_90a", tmp_path, "a")
    assert "wgmma.mma_async" not in nvcc_ptx(code, "sm_80", tmp_path, "b")


def test_three_stage_pipelines_lag_a_tile_for_the_products_in_flight():
    """With 3 stages a warpgroup pipeline copies one tile ahead, not two (its products of the
    last tile may still read their buffer after the barrier): the loops still compute the
    GEMM, and the kernel waits for all but the newest group of products at each tile and for
    all of them before the epilogue."""
    from autosched.search.state_utils import with_pipeline_stages
    from tensorir.loops import For, walk_stmts
    from tensorir.passes.double_buffer import lag_of

    task = gpu_task(dense_tensors(128, 32, 256, cast="float16"), target=SM90)
    (state,) = warpgroup_states(task, 1, seed=2)
    rng = np.random.default_rng(6)
    a = rng.uniform(-1, 1, (128, 256)).astype(np.float16)
    b = rng.uniform(-1, 1, (32, 256)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32).T
    for stages, lag in ((2, 0), (3, 1)):
        prog = lower(with_pipeline_stages(state, stages))
        lags = [lag_of(x) for x in walk_stmts(prog.body) if isinstance(x, For)]
        assert max(lags) == lag
        out = np.full((128, 32), np.nan, np.float16)
        run_program(prog, [a, b, out], simt=True)
        np.testing.assert_allclose(out.astype(np.float32), want, rtol=1e-2, atol=2e-2)
        code = build_cuda(prog, arch="sm_90").code
        assert f"wgmma_wait<{lag}>();" in code and ("wgmma_wait<1>();" in code) == bool(lag)
        assert "wgmma_wait<0>();" in code.split("wgmma_commit();")[-1]  # before the epilogue
        if lag:  # tile k + 1 is copied in iteration k, into buffer (k + 1) % 3
            assert "((k_0 + 1) % 3)" in code and "(k_0 + 2)" not in code


@pytest.mark.parametrize(
    "layout, fires",
    [("NHWC:OHWI", True), ("NCHW", False), ("NHWC", False)],  # NCHW: P = 64 is j; HWIO: Y[k, j]
)
def test_an_nhwc_conv_with_a_k_major_weight_runs_on_warpgroups(layout, fires, tmp_path):
    """An NHWC conv's implicit GEMM with an OHWI weight (as the network stores constant
    weights for tensor cores) gets the warpgroup sketch; its states compute the conv and its
    epilogue when read as plain loops, and render wgmma products."""
    from tensorir.dtype import tolerance
    from tensorir.interp import eval_dag
    from tests.autosched.tensor_core_helpers import conv_dag, random_args

    dag = conv_dag(layout, 1, 64, 8, 16, 3, 1, 1, 1, epilogue=True)  # P = 64, K = 576
    task = gpu_task(dag, target=SM90)
    assert len(warpgroup_sketches(task)) == int(fires)
    if not fires:
        return
    args = random_args(dag, seed=5)
    want = eval_dag(dag, args)[0].astype(np.float32)
    for state in warpgroup_states(task, 1, seed=1):
        assert gpu_state_errors(task, state) == []
        prog = lower(state)
        out = np.zeros(dag.output_tensors[0].shape, dag.output_tensors[0].dtype)
        run_program(prog, [*args, out], simt=True)
        np.testing.assert_allclose(out.astype(np.float32), want, *tolerance("float16"))
        assert "wgmma.mma_async.sync.aligned.m64n" in build_cuda(prog, arch="sm_90").code


def test_float32_gemms_run_on_tf32_warpgroups_in_rows_of_32():
    """On a -allow_tf32=1 target a float32 dense gets the warpgroup sketch with k tiles of 32
    floats (one 128-byte row) in four k8 steps: its states pass the GPU check, compute the
    GEMM read as loops, keep those lengths under mutation, and render TF32 wgmma products of
    tiles swizzled for 4-byte elements."""
    task = gpu_task(dense_tensors(64, 16, 64, "float32"), target=SM90_TF32)
    rng = np.random.default_rng(8)
    a = rng.uniform(-1, 1, (64, 64)).astype(np.float32)
    b = rng.uniform(-1, 1, (16, 64)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    states = warpgroup_states(task, 2, seed=1)
    assert states
    for k, state in enumerate(states):
        assert gpu_state_errors(task, state) == []
        prog = lower(state)
        ((plan, why),) = fragment_plans(prog)
        assert why == "" and plan.warpgroup and plan.dtype == "float32"
        assert all(not isinstance(warpgroup_tile(plan, key), str) for key in plan.mma)
        if k == 0:  # read as loops (each of 128 lanes computing the tile: slow, so once)
            out = np.full((64, 16), np.nan, np.float32)
            run_program(prog, [a, b, out], simt=True)
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    state = states[0]
    fixed = sorted(s.lengths for k, s in enumerate(state.steps)
                   if isinstance(s, SplitStep) and tensor_core_fixed_split(state, k))  # fmt: skip
    # i by 64 then 16, j by 16, k by 32 then 8; each shared copy by 4 floats and 128 lanes
    assert fixed.count((64,)) == 1 and fixed.count((32,)) == 1 and fixed.count((16,)) == 2
    assert fixed.count((8,)) == 1 and fixed.count((4,)) == 2
    assert fixed.count((WARPGROUP_LANES,)) == 2
    code = build_cuda(lower(state), arch="sm_90", allow_tf32=True).code
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k8\.f32\.tf32\.tf32", code)
    assert "p, 1, 1;" in code and "wmma::" not in code
    assert re.search(r"\^ \(\(\(\(.*\) >> 5\) & 7\) << 2\)\)", code)  # 32-float rows


def test_the_tf32_operands_are_what_the_gpu_rounds():
    """The float32 reference with TF32-truncated operands is within float32 rounding of the
    plain one at K = 96 scale: tests/gpu compare the wgmma kernel against it."""
    rng = np.random.default_rng(9)
    a = rng.uniform(-1, 1, (64, 96)).astype(np.float32)
    assert np.all(np.abs(truncate_to_tf32(a) - a) <= np.abs(a) * 2.0**-10)
    assert np.any(truncate_to_tf32(a) != a)


@needs_nvcc
def test_nvcc_compiles_the_tf32_kernel_for_sm_90a(tmp_path):
    task = gpu_task(dense_tensors(128, 64, 96, "float32"), target=SM90_TF32)
    (state,) = warpgroup_states(task, 1, seed=2)
    ptx = nvcc_ptx(build_cuda(lower(state), arch="sm_90", allow_tf32=True).code, "sm_90a", tmp_path)
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k8\.f32\.tf32\.tf32", ptx)
