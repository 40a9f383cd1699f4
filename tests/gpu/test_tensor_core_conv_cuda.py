"""conv2d as an implicit GEMM on tensor cores, on a real GPU: sampled states of the wmma sketch
equal a float64 numpy convolution within fp16 tolerance (both layouts, strided, 1x1, padded
GEMM tails, fused epilogue), and resnet-18 in float16 with a wmma kernel for every implicit-GEMM
conv (one sampled state each, written as records) runs and matches the float32 network."""

import random
import warnings

import numpy as np
import pytest

import autosched as ansor
from autosched.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.measure.records import save_records
from autosched.search.annotate_gpu import gpu_context, sample_state_gpu
from autosched.search.params import SearchParams
from tensorir.dtype import tolerance
from tensorir.graph import evaluate
from tests.autosched.tensor_core_helpers import (
    check_sampled_kernels,
    conv_dag,
    conv_ref,
    has_tc,
    random_args,
    wmma_sketches,
)

from .conftest import CUDA_REASON


def _conv_ref(x, w, b, stride, pad, layout, residual=None):
    """float64 conv2d (+ bias, + ``residual``, relu when ``b`` is given) from its definition."""
    out = conv_ref(x, w, stride, pad, 1, layout)
    if b is None:
        return out
    shape = [1] * out.ndim
    shape[layout.index("C")] = -1  # the bias along the channel axis of either layout
    out = out + b.astype(np.float64).reshape(shape)
    if residual is not None:
        out = out + residual.astype(np.float64)
    return np.maximum(out, 0)


CASES = {
    # resnet-like shapes: whole fragments (epilogue in the fragment store), strided, 1x1,
    # and 14x14 / 7x7 maps whose GEMM rows are padded (196 -> 208, 49 -> 64).
    "nhwc_3x3_s1_relu": ("NHWC", 1, 64, 16, 64, 3, 1, 1, True),
    "nhwc_ohwi_3x3_s1_relu": ("NHWC:OHWI", 1, 64, 16, 64, 3, 1, 1, True),  # K-major weight
    "nhwc_ohwi_7x7_split_k_4": ("NHWC:OHWI", 1, 256, 7, 64, 3, 1, 1, True, 4),
    "nchw_3x3_s1_relu": ("NCHW", 1, 32, 16, 64, 3, 1, 1, True),
    "nhwc_3x3_s2_batch2": ("NHWC", 2, 32, 16, 64, 3, 2, 1, False),
    "nhwc_1x1_s2": ("NHWC", 1, 64, 16, 128, 1, 2, 0, True),
    "nhwc_14x14_padded_rows": ("NHWC", 1, 64, 14, 64, 3, 1, 1, True),
    "nhwc_7x7_padded_rows": ("NHWC", 1, 128, 7, 128, 3, 1, 1, False),
    # split-K (conv2d_gemm.split_k_slices): K = 2304 in 3 and 4 slices, the sum and the
    # epilogue in a second kernel.
    "nhwc_7x7_split_k_4": ("NHWC", 1, 256, 7, 64, 3, 1, 1, True, 4),
    "nchw_14x14_split_k_3": ("NCHW", 1, 256, 14, 32, 3, 1, 1, True, 3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_implicit_gemm_conv_states_match_numpy(cuda_backend, name):
    layout, n, ci, h, co, k, s, p, epilogue, *split = CASES[name]
    dag = conv_dag(layout, n, ci, h, co, k, s, p, 1, epilogue, split_k=split[0] if split else 1)
    task = ansor.SearchTask(dag, target="cuda")
    (sketch,) = wmma_sketches(task)
    assert has_tc(sketch)
    args = random_args(dag, seed=4)
    want = _conv_ref(args[0], args[1], args[2] if epilogue else None, s, p, layout)
    # K up to 2304 products of fp16 inputs in [-1, 1], accumulated in float32; the epilogue
    # rounds to fp16 (|out| up to ~60: a half ulp of 0.03).
    check_sampled_kernels(task, sketch, args, want, 3, seed=11, rtol=1e-2, atol=8e-2)


@pytest.mark.parametrize("case", [
    ("NHWC", 2, 64, 14, 128, 1, 1, 0),  # a bottleneck's last 1x1 conv: words in, words out
    ("NHWC", 1, 64, 14, 64, 3, 1, 1),  # 196 rows padded to 208: a row guard around the words
    ("NHWC:OHWI", 1, 64, 14, 64, 3, 1, 1),  # the same with the K-major weight networks store
    ("NCHW", 1, 32, 16, 64, 3, 1, 1),  # a column is a pixel: words along the map
])  # fmt: skip
def test_a_residual_epilogue_written_in_words_matches_numpy(cuda_backend, case, monkeypatch):
    """conv + cast + bias + residual + relu, the epilogue 8 halves a lane
    (codegen.wide_epilogue, turned on): the bias and the residual read as words, the output
    written as words."""
    from codegen import wide_epilogue

    monkeypatch.setattr(wide_epilogue, "WIDE_EPILOGUE", True)
    layout, n, ci, h, co, k, s, p = case
    dag = conv_dag(layout, n, ci, h, co, k, s, p, 1, True, residual=True)
    task = ansor.SearchTask(dag, target="cuda")
    (sketch,) = wmma_sketches(task)
    args = random_args(dag, seed=7)
    want = _conv_ref(args[0], args[1], args[2], s, p, layout, residual=args[3])
    words = ("*(const uint4*)wmma_out;",)
    check_sampled_kernels(task, sketch, args, want, 3, 12, 1e-2, 8e-2, source_has=words)


def test_resnet18_fp16_with_wmma_convs_matches_fp32(cuda_backend, tmp_path):
    """Every implicit-GEMM conv task of resnet-18 float16 gets one sampled wmma state (as a
    record); the network built from those records runs and agrees with the float32 network."""
    from autosched.network.build import build_network
    from runtime import device

    if CUDA_REASON:
        pytest.skip(CUDA_REASON)
    mod, params, input_shape, _ = ansor.networks.get_network("resnet-18", 1, "NHWC")
    mixed = ansor.to_mixed_precision(mod, "float16", params)
    tasks, _ = ansor.extract_tasks(mixed, None, "cuda")
    log = tmp_path / "resnet18_fp16_wmma.json"
    inputs, rng = [], random.Random(0)
    for task in tasks:
        if "conv2d_gemm" not in [op.name for op in task.compute_dag.ops]:
            continue
        (sketch,) = wmma_sketches(task)
        ctx = gpu_context(task, SearchParams())
        st = next(x for x in (sample_state_gpu(ctx, sketch, rng, task) for _ in range(200)) if x)
        inputs.append(MeasureInput(task, st))
    assert len(inputs) >= 16  # every conv, the RGB stem among them (20 distinct tasks today)
    ok = MeasureResult((1e-4,), MeasureErrorNo.NO_ERROR, "", 0.1, 1.0)
    save_records(log, inputs, [ok] * len(inputs))
    dev = device("cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the default schedules of the other groups
        with ansor.ApplyHistoryBest(str(log)):
            lib = build_network(mixed, "cuda", device=dev)
    assert lib.get_source().count("wmma::mma_sync") >= len(inputs)
    x = np.random.default_rng(0).uniform(-1, 1, input_shape).astype("float32")
    module = ansor.GraphModule(lib, dev)
    module.set_input("data", x)
    module.run()
    low = module.get_output(0).numpy().astype(np.float64)
    # As the CLI checks a 16-bit build: against the numpy reference of the same 16-bit network.
    own = evaluate(mixed, {"data": x})
    own = np.asarray(own[0] if isinstance(own, list) else own, np.float64)
    # The output is softmax probabilities (~1e-3): the fp16 tolerance relative to its scale.
    rtol, atol = tolerance("float16")
    np.testing.assert_allclose(low, own, rtol=rtol, atol=atol * np.abs(own).max())
    want = evaluate(mod, {"data": x}, params)  # the float32 network's numpy reference
    want = np.asarray(want[0] if isinstance(want, list) else want, np.float64)
    # The accuracy report's measure: error relative to the output's scale; the same top-1.
    err = np.abs(low - want).max()
    assert err / np.abs(want).max() < 2e-2  # 2.3e-3 between the two numpy references
    top2 = np.sort(want.ravel())[-2:]
    if top2[1] - top2[0] > 2 * err:  # the same top-1 where rounding cannot swap it
        assert low.argmax() == want.argmax()


def test_untuned_resnet18_fp16_runs_its_convs_on_tensor_cores(cuda_backend):
    """No records (issue 28): every implicit-GEMM conv group gets the fixed tensor-core tile
    (autosched.search.tensor_core_default) and the network matches the float32 one."""
    from autosched.network.build import build_network
    from runtime import device

    if CUDA_REASON:
        pytest.skip(CUDA_REASON)
    mod, params, input_shape, _ = ansor.networks.get_network("resnet-18", 1, "NHWC")
    mixed = ansor.to_mixed_precision(mod, "float16", params)
    tasks, _ = ansor.extract_tasks(mixed, None, "cuda")
    n_convs = sum("conv2d_gemm" in [op.name for op in t.compute_dag.ops] for t in tasks)
    assert n_convs >= 15
    dev = device("cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every group untuned
        lib = build_network(mixed, "cuda", device=dev)
    assert lib.get_source().count("wmma::mma_sync") >= n_convs
    x = np.random.default_rng(1).uniform(-1, 1, input_shape).astype("float32")
    module = ansor.GraphModule(lib, dev)
    module.set_input("data", x)
    module.run()
    low = module.get_output(0).numpy().astype(np.float64)
    want = evaluate(mod, {"data": x}, params)  # the float32 network's numpy reference
    want = np.asarray(want[0] if isinstance(want, list) else want, np.float64)
    assert np.abs(low - want).max() / np.abs(want).max() < 2e-2  # as the tuned test above
