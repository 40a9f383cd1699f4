"""Split-K implicit-GEMM conv2d (tensorir.ops.conv2d_gemm) without a GPU: the rule that picks
the number of slices, the sliced compute against a numpy convolution, the tensor-core sketch on
it (a batched GEMM over the slices, then the sum and the epilogue in a second kernel), its CUDA
through nvcc, and the network partition that applies it unless AUTOSCHED_CONV_SPLIT_K is off."""

import numpy as np
import pytest

import autosched as ansor
from autosched.network.default_schedules import default_schedule
from autosched.network.partition import partition
from autosched.search.annotate_gpu import gpu_state_errors
from autosched.search.tensor_core_default import default_tensor_core_state
from codegen.cuda import build_cuda
from tensorir.dtype import tolerance
from tensorir.graph import ir as gir
from tensorir.graph import nn, op
from tensorir.interp import eval_dag
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.ops import NameScope
from tensorir.ops.conv2d_gemm import (
    ConvGemmShape,
    conv2d_gemm_shape,
    conv2d_implicit_gemm,
    split_k_slices,
)
from tensorir.passes.verify_gpu import kernels
from tensorir.tensor import TensorError
from tests.autosched import tensor_core_helpers as helpers
from tests.autosched.tensor_core_helpers import (
    conv_dag,
    conv_ref,
    gpu_task,
    has_tc,
    needs_nvcc,
    nvcc_ptx,
    random_args,
)


def test_the_rule_splits_few_tiles_with_a_long_k_only():
    nhwc = "NHWC"

    def slices(h, ci, co, k=3, stride=1, n=1):
        pad = k // 2
        shape = conv2d_gemm_shape((n, h, h, ci), (k, k, ci, co), stride, pad, 1, nhwc)
        return split_k_slices(shape)

    # resnet-18 at batch 1 (H100: 132 SMs): 7x7 maps have 128 tiles of 16x16 and K = 4608,
    # cut into 16 slices for 2048 tiles (SPLIT_K_MIN_TILES).
    assert slices(7, 512, 512) == 16
    assert slices(14, 256, 512, stride=2) == 9  # 7x7 output, K = 2304: 9 slices of 256
    assert slices(14, 256, 256) == 9  # 208 rows -> 208 tiles; 9 slices of 256
    assert slices(28, 128, 128) == 4  # 392 tiles, K = 1152
    assert slices(56, 64, 64) == 2  # 784 tiles, K = 576
    assert slices(14, 256, 512, k=1, stride=2) == 1  # 1x1: K = 256 is one slice's minimum
    assert slices(7, 512, 512, n=16) == 2  # batch 16: 784 rows, 1568 tiles
    assert slices(14, 256, 256, n=16) == 1  # batch 16: 3136 tiles already
    # Slices are whole fragment steps (16 for fp16, 8 for TF32) of at least 256.
    for shape in (ConvGemmShape(64, 4608, 512), ConvGemmShape(16, 2304, 16, 8)):
        s = split_k_slices(shape)
        kp = shape.padded[1]
        assert kp % (s * shape.k_align) == 0 and kp // s >= 256
    # Nothing to gain from more slices than K allows: the largest that keeps 256.
    assert split_k_slices(ConvGemmShape(16, 2304, 16)) == 9


SPLIT_CASES = [
    # (layout, n, ci, h, co, k, stride, pad, split): K = 288 (18 steps of 16) or 576
    ("NHWC", 1, 32, 6, 16, 3, 1, 1, 3),
    ("NCHW", 1, 32, 6, 16, 3, 1, 1, 2),
    ("NHWC", 2, 64, 7, 24, 3, 2, 1, 4),  # batch 2, strided, CO padded 24 -> 32
    ("NCHW", 1, 64, 7, 16, 3, 1, 1, 6),  # 49 rows padded to 64
]


@pytest.mark.parametrize("case", SPLIT_CASES)
def test_split_gemm_equals_conv2d_built_for_llvm(case):
    layout, n, ci, h, co, k, s, p, split = case
    dag = conv_dag(layout, n, ci, h, co, k, s, p, split_k=split)
    gemm = dag.ops[dag.op_index("conv2d_gemm")]
    assert gemm.shape[0] == split
    args = random_args(dag, seed=split + ci)
    out = np.zeros(dag.output_tensors[0].shape, np.float32)
    ansor.build(default_schedule(dag, "llvm"), target="llvm")(*args, out)
    np.testing.assert_allclose(out, conv_ref(*args, s, p, 1, layout), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", SPLIT_CASES[:2])
def test_tensor_core_states_of_a_split_conv_run_in_two_kernels_and_compute_it(case):
    """The GEMM over the slices is the first kernel (its wmma store writes the partial sums);
    the second adds them and runs the epilogue (cast, bias, relu)."""
    layout, n, ci, h, co, k, s, p, split = case
    dag = conv_dag(layout, n, ci, h, co, k, s, p, epilogue=True, split_k=split)
    task = gpu_task(dag)
    states = [*helpers.valid_states(task, 2, 0, tries=100), default_tensor_core_state(task)]
    args = random_args(dag, seed=7)
    want = eval_dag(dag, args)[0].astype(np.float32)
    assert np.abs(want).max() > 1.0
    for st in states:
        assert has_tc(st) and not gpu_state_errors(task, st)
        prog = lower(st)
        assert len(kernels(prog)) == 2
        assert "data_im2col[" not in str(prog)  # gathered into shared memory, as unsplit
        out = np.zeros(dag.output_tensors[0].shape, np.float16)
        run_program(prog, [*args, out], simt=True)
        np.testing.assert_allclose(out.astype(np.float32), want, *tolerance("float16"))


@needs_nvcc
def test_split_conv_cuda_compiles_to_wmma_ptx_and_16_byte_gathers(tmp_path):
    dag = conv_dag("NHWC", 1, 64, 7, 32, 3, 1, 1, epilogue=True, split_k=4)
    (st,) = helpers.valid_states(gpu_task(dag), 1, seed=3, tries=100)
    code = build_cuda(lower(st), arch="sm_90").code
    assert code.count("__global__") == 2
    # Slice boundaries (K/4 = 144 taps) fall on 8-channel words: the gather stays 16 bytes.
    assert "*(const uint4*)&placeholder[" in code
    text = nvcc_ptx(code, "sm_90", tmp_path)
    assert "wmma.mma.sync" in text and "wmma.store.d" in text


def test_a_split_that_cuts_a_fragment_step_names_the_op_and_what_to_do():
    scope = NameScope()
    x = scope.placeholder((1, 6, 6, 32), "float16")
    w = scope.placeholder((3, 3, 32, 16), "float16")
    with pytest.raises(TensorError, match=r"conv2d_gemm: split_k=4 .* divisor of 18"):
        conv2d_implicit_gemm(x, w, padding=1, split_k=4)


def _long_k_block(rng):
    """conv 3x3 on a 4x4 map, 256 -> 16 channels, + bias + relu: one 16x16 output tile and
    K = 2304, which the rule cuts into 9 slices of 256."""
    data = op.var("data", (1, 4, 4, 256))
    params = {
        "w": rng.normal(0, 0.05, (3, 3, 256, 16)).astype("float32"),
        "b": rng.normal(0, 0.2, (16,)).astype("float32"),
    }
    w, b = (op.var(k, v.shape) for k, v in params.items())
    conv = nn.conv2d(data, w, padding=1, data_layout="NHWC", kernel_layout="HWIO")
    x = nn.relu(nn.bias_add(conv, b, axis=3))
    return gir.Module({"main": gir.Function((data, w, b), x)}), params


def _gemm_shapes(mod):
    _, groups = partition(mod, None, "cuda")
    return [gd.dag.ops[gd.dag.op_index("conv2d_gemm")].shape for gd in groups
            if "conv2d_gemm" in [o.name for o in gd.dag.ops]]  # fmt: skip


def test_partition_splits_by_the_rule_unless_switched_off(monkeypatch):
    mod, params = _long_k_block(np.random.default_rng(0))
    mixed = ansor.to_mixed_precision(mod, "float16", params)
    assert _gemm_shapes(mixed) == [(9, 16, 16)]
    monkeypatch.setenv("AUTOSCHED_CONV_SPLIT_K", "0")
    assert _gemm_shapes(mixed) == [(16, 16)]


def test_a_network_with_a_split_conv_matches_the_reference():
    """The CUDA partition's split conv group run as scalar loops (its default tensor-core
    state) equals the graph reference of the float16 network."""
    from autosched.network.default_schedules import default_gpu_state
    from tensorir.graph.reference import evaluate

    rng = np.random.default_rng(3)
    mod, params = _long_k_block(rng)
    mixed = ansor.to_mixed_precision(mod, "float16", params)
    func, groups = partition(mixed, None, "cuda")
    (gd,) = [g for g in groups if "conv2d_gemm" in [o.name for o in g.dag.ops]]
    x = rng.uniform(-1, 1, (1, 4, 4, 256)).astype("float32")

    def state_of(g):
        if g is gd:
            state = default_tensor_core_state(gpu_task(g.dag))
            assert state is not None and len(kernels(lower(state))) == 2
            return state
        return default_gpu_state(g.dag, 256, 32, lambda s: None)

    got = helpers.run_groups_as_scalar_loops(func, groups, x, state_of).astype(np.float32)
    want = np.asarray(evaluate(mixed["main"], {"data": x})).astype(np.float32)
    assert np.abs(want).max() > 0.1
    np.testing.assert_allclose(got, want, *tolerance("float16"))


def test_a_tf32_conv_splits_on_its_own_fragment_steps():
    """float32 under ``-allow_tf32=1``: K steps of 8; the split GEMM's TF32 states compute the
    conv (scalar reading) in two kernels."""
    from tensorir.passes.tensor_core import TF32_TENSOR_CORES

    if not TF32_TENSOR_CORES:
        pytest.skip("TF32 tensor cores are switched off (TF32_TENSOR_CORES)")
    # K = 2304 is 288 TF32 steps; one 16x16 tile: 9 slices of 256, as for float16.
    shape = conv2d_gemm_shape((1, 4, 4, 256), (3, 3, 256, 16), 1, 1, 1, "NHWC", "float32")
    assert shape.k_align == 8 and split_k_slices(shape) == 9
    dag = conv_dag("NHWC", 1, 32, 6, 16, 3, 1, 1, epilogue=True, dtype="float32", split_k=3)
    task = gpu_task(dag, target="cuda -arch=sm_80 -allow_tf32=1")
    (st,) = helpers.valid_states(task, 1, 0, tries=100)
    prog = lower(st)
    assert has_tc(st) and len(kernels(prog)) == 2
    args = random_args(dag, seed=9)
    out = np.zeros(dag.output_tensors[0].shape, np.float32)
    run_program(prog, [*args, out], simt=True)
    np.testing.assert_allclose(out, eval_dag(dag, args)[0], rtol=1e-4, atol=1e-4)
