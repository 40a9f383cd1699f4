"""The untuned schedule of a 16-bit GEMM group on CUDA (issue 28): the tensor-core sketch with a
fixed tile (autosched.search.tensor_core_default), without a GPU: it is a tensor-core state,
passes the GPU check, computes the conv / dense as scalar loops, compiles to wmma PTX; float32
groups keep the scalar default exactly."""

import warnings

import numpy as np
import pytest

import autosched as ansor
from autosched.network.default_schedules import default_gpu_state
from autosched.network.partition import partition
from autosched.search.annotate_gpu import gpu_state_errors
from autosched.search.tensor_core_default import (
    default_tensor_core_state,
    default_tile_candidates,
)
from codegen.cuda import build_cuda
from tensorir.dag import ComputeDAG
from tensorir.dtype import tolerance
from tensorir.interp import eval_dag
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tests.autosched.tensor_core_helpers import (
    conv_dag,
    dense_tensors,
    gpu_task,
    has_tc,
    needs_nvcc,
    nvcc_ptx,
    random_args,
    small_resnet_block,
)


def no_check(state):
    return None


def dense_dag(m, n, k, dtype="float16"):
    """A dense; a 16-bit one cast back to its dtype (as a to_mixed_precision network's)."""
    return ComputeDAG(dense_tensors(m, n, k, dtype, cast=None if dtype == "float32" else dtype))


def default_state(dag, target="cuda"):
    task = gpu_task(dag, target)
    return task, default_gpu_state(dag, 1024, 32, no_check, task=task)


# resnet-18 layer shapes (NHWC, fp16, cast + bias + relu epilogue): 56x56x64 3x3 (P = 3136),
# 7x7x512 3x3 (P = 49 padded to 64), and the 28x28 (P = 784: 49 fragments) and 14x14 (P = 196
# padded to 208: 13 fragments) 1x1 s2 convs: tensor-core states that pass the check. Too big
# to run as scalar loops on the CPU: the small cases below compute.
RESNET = [("NHWC", 1, 64, 56, 64, 3, 1, 1), ("NHWC", 1, 512, 7, 512, 3, 1, 1),
          ("NHWC", 1, 64, 56, 128, 1, 2, 0), ("NHWC", 1, 128, 28, 256, 1, 2, 0)]  # fmt: skip


@pytest.mark.parametrize("case", RESNET)
def test_resnet_convs_default_to_a_valid_tensor_core_state(case):
    dag = conv_dag(*case, 1, epilogue=True)
    task, state = default_state(dag)
    assert has_tc(state)
    assert not gpu_state_errors(task, state)
    assert any(p == "double_buffer" for s in state.stages for _, p in s.pragmas)


# (layout, n, ci, h, co, k, stride, pad): P = 64 whole fragments, P = 49 padded to 64 (guarded
# store); K = 144 (a 16-wide k tile only); P = 144 (9 fragments: 16-row blocks).
SMALL = [("NHWC", 1, 16, 8, 32, 3, 1, 1), ("NHWC", 1, 16, 7, 32, 3, 1, 1),
         ("NHWC", 1, 16, 12, 16, 1, 1, 0)]  # fmt: skip


@pytest.mark.parametrize("case", SMALL)
def test_small_conv_default_computes_the_conv(case):
    dag = conv_dag(*case, 1, epilogue=True)
    task, state = default_state(dag)
    assert has_tc(state) and not gpu_state_errors(task, state)
    args = random_args(dag, seed=3)
    want = eval_dag(dag, args)[0].astype(np.float32)
    out = np.zeros(dag.output_tensors[0].shape, dag.output_tensors[0].dtype)
    run_program(lower(state), [*args, out], simt=True)  # the scalar reading of the wmma nests
    assert np.abs(want).max() > 0.1
    np.testing.assert_allclose(out.astype(np.float32), want, *tolerance("float16"))


def test_dense_default_computes_the_dense():
    dag = dense_dag(32, 64, 48)
    task, state = default_state(dag)
    assert has_tc(state) and not gpu_state_errors(task, state)
    args = random_args(dag, seed=4)
    out = np.zeros((32, 64), np.float16)
    run_program(lower(state), [*args, out], simt=True)
    want = args[0].astype(np.float64) @ args[1].astype(np.float64).T
    np.testing.assert_allclose(out.astype(np.float64), want, *tolerance("float16"))


def test_the_largest_tile_that_divides_is_taken():
    """128 rows divide 256 but not 3136 (56x56 pixels): 128x64 there, 64x64 here."""
    big = default_state(dense_dag(256, 64, 64))[1]
    conv = default_state(conv_dag(*RESNET[0], 1, epilogue=True))[1]

    def block_rows(state):
        return [s.lengths for s in state.steps if type(s).__name__ == "SplitStep"
                and s.lengths and len(s.lengths) == 2][0]  # fmt: skip

    assert block_rows(big) == (2, 4)  # 2 warps of 4 fragments: 128 rows
    assert block_rows(conv) == (2, 2)  # 64 rows


def test_tile_candidates_divide_the_gemm_largest_first():
    assert default_tile_candidates((16, 8, 36))[0] == (128, 64, 32)
    assert default_tile_candidates((196, 4, 36))[0] == (64, 64, 32)
    odd = default_tile_candidates((49, 8, 9))  # resnet's 28x28 map, K = 144
    assert odd[0] == (16, 64, 16) and all(bi == 16 and k == 16 for bi, _, k in odd)
    assert default_tile_candidates((13, 1, 1)) == [(16, 16, 16)]


def test_a_check_refusing_every_tile_falls_back_to_the_scalar_default():
    dag = dense_dag(64, 64, 64)
    task = gpu_task(dag)
    calls = []

    def refuse_tensor_cores(state):
        calls.append(has_tc(state))
        if has_tc(state):
            raise ValueError("too big for this device")

    state = default_gpu_state(dag, 1024, 32, refuse_tensor_cores, task=task)
    assert not has_tc(state) and calls[0] and not calls[-1]
    assert default_tensor_core_state(task, refuse_tensor_cores) is None
    assert str(state) == str(default_gpu_state(dag, 1024, 32, no_check))


def test_no_wmma_arch_and_float32_keep_the_scalar_default():
    dag = dense_dag(64, 64, 64)
    _, state = default_state(dag, "cuda -arch=sm_61")
    assert not has_tc(state)
    dag32 = dense_dag(64, 64, 64, "float32")
    _, state = default_state(dag32)
    assert str(state) == str(default_gpu_state(dag32, 1024, 32, no_check))


def test_float32_network_groups_keep_todays_default_exactly():
    rng = np.random.default_rng(0)
    mod, params = small_resnet_block(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no device: default hardware parameters
        _, groups = partition(mod, params, "cuda")
        for gd in groups:
            task, state = default_state(gd.dag)
            assert str(state) == str(default_gpu_state(gd.dag, 1024, 32, no_check)), gd.name
    mixed = ansor.to_mixed_precision(mod, "float16", params)
    _, groups = partition(mixed, None, "cuda")
    convs = [gd for gd in groups if "conv2d_gemm" in [op.name for op in gd.dag.ops]]
    # The 1x1 s2 conv has 16 GEMM rows: one fragment of rows per block.
    assert len(convs) == 2 and all(has_tc(default_state(gd.dag)[1]) for gd in convs)


@needs_nvcc
def test_default_compiles_to_wmma_ptx(tmp_path):
    dag = conv_dag(*RESNET[1], 1, epilogue=True)
    _, state = default_state(dag)
    code = build_cuda(lower(state), arch="sm_80").code
    assert "nvcuda::wmma::mma_sync" in code and code.count("__global__") == 1
    text = nvcc_ptx(code, "sm_80", tmp_path)
    assert "wmma.mma.sync" in text and "wmma.load.a" in text
