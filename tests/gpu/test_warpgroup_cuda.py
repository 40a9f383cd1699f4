"""Warpgroup (wgmma) tensor-core kernels on an sm_90 GPU: states sampled from the warpgroup
sketch build to ``wgmma.mma_async`` kernels whose outputs equal a float32 numpy reference
within fp16 / bf16 tolerance (skipped on other GPUs)."""

from itertools import islice

import numpy as np
import pytest

import autosched as ansor
from autosched.hardware import known_cuda_arch
from autosched.search.sketch import generate_sketches
from autosched.search.sketch_rules_warpgroup import is_warpgroup_state
from tensorir.dag import ComputeDAG
from tensorir.dtype import to_numpy, truncate_to_tf32
from tests.autosched.tensor_core_helpers import dense_tensors, gemm_reference, sampled_states

CASES = {
    "dense_f16_out": lambda: dense_tensors(256, 256, 256, cast="float16"),
    "dense_f32_out": lambda: dense_tensors(128, 192, 128),
    "dense_n16": lambda: dense_tensors(64, 16, 64),
    "dense_bf16": lambda: dense_tensors(128, 128, 192, "bfloat16"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sampled_warpgroup_states_match_numpy(cuda_backend, name):
    from runtime import device

    if known_cuda_arch("cuda") not in ("sm_90", "sm_90a"):
        pytest.skip("wgmma needs an sm_90 GPU")
    if name == "dense_bf16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 host arrays need ml_dtypes")
    task = ansor.SearchTask(ComputeDAG(CASES[name]()), target="cuda")
    (sketch,) = [s for s in generate_sketches(task) if is_warpgroup_state(s)]
    dag = task.compute_dag
    data = np.random.default_rng(3)
    args = [data.uniform(-1, 1, t.shape).astype(to_numpy(t.dtype)) for t in dag.input_tensors]
    want = gemm_reference(args)
    out_t = dag.output_tensors[0]
    checked = 0
    for s in islice(sampled_states(task, sketch, seed=11), 4):
        func = ansor.build(s, "cuda", device=device("cuda"))
        assert "wgmma.mma_async" in func.get_source()
        out = np.full(out_t.shape, np.nan, to_numpy(out_t.dtype))
        func(*args, out)
        np.testing.assert_allclose(out.astype(np.float32), want, rtol=1e-2, atol=2e-2,
                                   err_msg=str(s))  # fmt: skip
        checked += 1
    assert checked == 4


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_lagging_pipelines_match_numpy(cuda_backend, stages):
    """3 and 4 stages leave one tile of products running past each barrier (the pipeline
    copies a tile later, tensorir.passes.double_buffer): the results must not change."""
    from autosched.search.state_utils import with_pipeline_stages
    from runtime import device

    if known_cuda_arch("cuda") not in ("sm_90", "sm_90a"):
        pytest.skip("wgmma needs an sm_90 GPU")
    task = ansor.SearchTask(
        ComputeDAG(dense_tensors(256, 128, 1024, cast="float16")), target="cuda"
    )
    (sketch,) = [s for s in generate_sketches(task) if is_warpgroup_state(s)]
    args = [np.random.default_rng(9).uniform(-1, 1, t.shape).astype(np.float16)
            for t in task.compute_dag.input_tensors]  # fmt: skip
    want = gemm_reference(args)
    for s in islice(sampled_states(task, sketch, seed=5), 3):
        func = ansor.build(with_pipeline_stages(s, stages), "cuda", device=device("cuda"))
        out = np.full((256, 128), np.nan, np.float16)
        func(*args, out)
        np.testing.assert_allclose(out.astype(np.float32), want, rtol=1e-2, atol=3e-2)


CONV_CASES = {
    # NHWC with the K-major OHWI weight networks store: 3x3 with its bias + relu epilogue,
    # resnet-50's 7x7 maps at batch 16 (784 rows padded to 832 for 64-row tiles), and a
    # bottleneck's last 1x1 conv with bias + residual + relu (its epilogue in 16-byte words,
    # codegen.warpgroup_epilogue), also on padded rows.
    "nhwc_3x3_relu": (("NHWC:OHWI", 4, 64, 8, 128, 3, 1, 1, 1, True), {}),
    "nhwc_7x7_batch16_padded_rows": (("NHWC:OHWI", 16, 64, 7, 64, 3, 1, 1, 1, False), {}),
    "nhwc_1x1_residual": (("NHWC:OHWI", 4, 64, 8, 256, 1, 1, 0, 1, True), {"residual": True}),
    "nhwc_1x1_residual_padded_rows": (
        ("NHWC:OHWI", 16, 64, 7, 128, 1, 1, 0, 1, True),
        {"residual": True},
    ),
}


@pytest.mark.parametrize("name", list(CONV_CASES))
def test_sampled_warpgroup_convs_match_numpy(cuda_backend, name):
    from runtime import device
    from tensorir.dtype import tolerance
    from tensorir.interp import eval_dag
    from tests.autosched.tensor_core_helpers import conv_dag, random_args

    if known_cuda_arch("cuda") not in ("sm_90", "sm_90a"):
        pytest.skip("wgmma needs an sm_90 GPU")
    args, kwargs = CONV_CASES[name]
    dag = conv_dag(*args, **kwargs, warpgroup=True)
    task = ansor.SearchTask(dag, target="cuda")
    (sketch,) = [s for s in generate_sketches(task) if is_warpgroup_state(s)]
    inputs = random_args(dag, seed=7)
    want = eval_dag(dag, inputs)[0].astype(np.float32)
    out_t = dag.output_tensors[0]
    for s in islice(sampled_states(task, sketch, seed=2), 3):
        func = ansor.build(s, "cuda", device=device("cuda"))
        assert "wgmma.mma_async" in func.get_source()
        if kwargs.get("residual"):
            assert "__shfl_xor_sync" in func.get_source()  # the word epilogue
        out = np.full(out_t.shape, np.nan, to_numpy(out_t.dtype))
        func(*inputs, out)
        np.testing.assert_allclose(out.astype(np.float32), want, *tolerance("float16"),
                                   err_msg=str(s))  # fmt: skip


def test_tf32_warpgroup_states_match_numpy(cuda_backend):
    """float32 on a -allow_tf32=1 target: TF32 wgmma (k8) kernels of 32-float swizzled rows.
    The GPU reads each operand's top 19 bits, so the reference is the float64 product of
    operands truncated to TF32, and the tolerance TF32's."""
    from runtime import device

    if known_cuda_arch("cuda") not in ("sm_90", "sm_90a"):
        pytest.skip("wgmma needs an sm_90 GPU")
    target = "cuda -allow_tf32=1"
    task = ansor.SearchTask(ComputeDAG(dense_tensors(128, 96, 160, "float32")), target=target)
    (sketch,) = [s for s in generate_sketches(task) if is_warpgroup_state(s)]
    rng = np.random.default_rng(12)
    a, b = (rng.uniform(-1, 1, t.shape).astype(np.float32) for t in task.compute_dag.input_tensors)

    want = truncate_to_tf32(a).astype(np.float64) @ truncate_to_tf32(b).astype(np.float64).T
    checked = 0
    for s in islice(sampled_states(task, sketch, seed=4), 3):
        func = ansor.build(s, target, device=device("cuda"))
        assert "tf32.tf32" in func.get_source()
        out = np.full((128, 96), np.nan, np.float32)
        func(a, b, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(s))
        checked += 1
    assert checked == 3
