"""conv2d as an implicit GEMM (tensorir.ops.conv2d_gemm) without a GPU: the compute against a
numpy convolution (built for llvm with the default schedule), the tensor-core sketch on it
(states replay, lower, pass the GPU check, compute the conv as scalar loops, compile with nvcc
to wmma PTX, run the epilogue in the fragment store nest), and the network partition that picks
it for 16-bit CUDA convolutions only."""

import numpy as np
import pytest

import autosched as ansor
from autosched.network.default_schedules import default_schedule
from autosched.network.partition import partition
from autosched.search.annotate_gpu import gpu_state_errors
from autosched.search.sketch import generate_sketches
from codegen.cuda import build_cuda
from tensorir.dag import ComputeDAG
from tensorir.dtype import tolerance
from tensorir.graph import ir as gir
from tensorir.interp import eval_dag
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.ops import NameScope
from tensorir.ops.conv2d_gemm import conv2d_implicit_gemm, use_implicit_gemm
from tensorir.passes.tensor_core import fragment_plan
from tensorir.passes.verify_gpu import kernels
from tests.autosched import tensor_core_helpers as helpers
from tests.autosched.tensor_core_helpers import (
    conv_dag,
    conv_ref,
    gpu_task,
    has_tc,
    needs_nvcc,
    nvcc_ptx,
    random_args,
    records_round_trip,
    small_resnet_block,
)

CASES = [
    # (n, ci, h, co, k, stride, pad, dilation)
    (1, 16, 6, 16, 3, 1, 1, 1),  # 3x3 s1: P = 36 (padded to 48), K = 144
    (2, 16, 7, 24, 3, 2, 1, 1),  # 3x3 s2, batch 2, CO = 24 (padded to 32)
    (1, 32, 6, 16, 1, 2, 0, 1),  # 1x1 s2: a plain gather
    (1, 8, 7, 16, 3, 1, 2, 2),  # dilation 2, K = 72 (padded to 80)
]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW", "NHWC:OHWI"])
@pytest.mark.parametrize("case", CASES)
def test_implicit_gemm_equals_conv2d_built_for_llvm(layout, case):
    n, ci, h, co, k, s, p, d = case
    dag = conv_dag(layout, n, ci, h, co, k, s, p, d)
    args = random_args(dag, seed=n + ci + k)
    out = np.zeros(dag.output_tensors[0].shape, np.float32)
    ansor.build(default_schedule(dag, "llvm"), target="llvm")(*args, out)
    want = conv_ref(*args, s, p, d, layout)
    assert out.shape == want.shape
    # fp16 inputs, float32 products and sums: only the summation order differs.
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_the_rule_for_using_it():
    nhwc = ("NHWC", "HWIO")
    assert use_implicit_gemm((1, 56, 56, 64), (3, 3, 64, 64), 1, 1, 1, 1, *nhwc, "float16")
    assert use_implicit_gemm((1, 64, 7, 7), (512, 64, 1, 1), 1, 0, 1, 1, "NCHW", "", "bfloat16")
    # 7x7 maps at batch 1: P = 49 padded to 64 (23%) still pays.
    assert use_implicit_gemm((1, 7, 7, 512), (3, 3, 512, 512), 1, 1, 1, 1, *nhwc, "float16")
    assert not use_implicit_gemm((1, 56, 56, 64), (3, 3, 64, 64), 1, 1, 1, 1, *nhwc, "float32")
    # RGB stem: 3 input channels, K = 147 padded to 160 (8%).
    assert use_implicit_gemm((1, 224, 224, 3), (7, 7, 3, 64), 2, 3, 1, 1, *nhwc, "float16")
    # One channel, 3x3: K = 9 padded to 16 wastes 44%.
    assert not use_implicit_gemm((1, 28, 28, 1), (3, 3, 1, 8), 1, 1, 1, 1, *nhwc, "float16")
    assert not use_implicit_gemm((1, 8, 8, 32), (3, 3, 16, 32), 1, 1, 1, 2, *nhwc, "float16")
    # 3x3 output: P = 9 padded to 16 wastes 44%.
    assert not use_implicit_gemm((1, 3, 3, 64), (3, 3, 64, 64), 1, 1, 1, 1, *nhwc, "float16")


def valid_states(task, n=2, seed=0):
    return helpers.valid_states(task, n, seed, tries=100)


TC_CASES = [
    # (layout, n, ci, h, co, k, stride, pad, epilogue, kernels): the epilogue runs in the
    # fragment store (one kernel); where P (36, 49) or CO (24) is padded to whole fragments,
    # under a guard on the real rows / columns.
    ("NHWC", 1, 16, 8, 16, 3, 1, 1, True, 1),
    ("NCHW", 1, 16, 8, 16, 3, 1, 1, True, 1),
    ("NHWC:OHWI", 1, 16, 8, 16, 3, 1, 1, True, 1),  # the weight K-major, as networks store it
    ("NHWC", 2, 16, 8, 16, 1, 1, 0, True, 1),
    ("NHWC", 1, 16, 12, 16, 3, 2, 1, False, 1),
    ("NHWC", 1, 16, 7, 16, 3, 1, 1, True, 1),
    ("NCHW", 1, 16, 7, 16, 1, 1, 0, True, 1),
    ("NHWC", 1, 16, 4, 24, 3, 1, 1, True, 1),
    # RGB stems: 3 channels, K = 147 padded to 160 (7x7, stride 2) and 27 to 32 (3x3)
    ("NHWC", 1, 3, 16, 16, 7, 2, 3, True, 1),
    ("NHWC:OHWI", 1, 3, 16, 24, 7, 2, 3, True, 1),
    ("NCHW", 1, 3, 8, 16, 3, 1, 1, True, 1),
]


@pytest.mark.parametrize("case", TC_CASES)
def test_tensor_core_states_replay_lower_validate_and_compute_the_conv(case, tmp_path):
    layout, n, ci, h, co, k, s, p, epilogue, nkernels = case
    dag = conv_dag(layout, n, ci, h, co, k, s, p, 1, epilogue)
    task = gpu_task(dag)
    states = valid_states(task, 1)
    records = records_round_trip(task, states, tmp_path / "tc.json")
    back = [inp.state.to_state(dag) for inp, _ in records]
    args = random_args(dag, seed=1)
    want = eval_dag(dag, args)[0].astype(np.float32)
    for st, r in zip(states, back, strict=True):
        assert str(r) == str(st) and has_tc(r)
        assert not gpu_state_errors(task, r)
        prog = lower(r)
        ks = kernels(prog)
        assert len(ks) == nkernels
        plan, why = fragment_plan(ks[0].stmt, ks[0].extents)
        assert plan is not None and plan.mma, why
        # The epilogue (or the plain store of the GEMM) is the fragment store nest.
        assert plan.store
        # No im2col or reshaped weight buffer in global memory: both are gathered into shared.
        text = str(prog)
        assert "data_im2col_shared" in text and "kernel_gemm_shared" in text
        assert "data_im2col[" not in text and "kernel_gemm[" not in text
        out = np.zeros(dag.output_tensors[0].shape, dag.output_tensors[0].dtype)
        run_program(prog, [*args, out], simt=True)  # the scalar reading of the marked loops
        np.testing.assert_allclose(out.astype(np.float32), want, *tolerance("float16"))


@pytest.mark.parametrize("switch", ["FUSE_PADDED_ROWS", "FUSE_FLAT_CONSUMER"])
def test_the_fusion_switches_give_two_kernels(switch, monkeypatch):
    """Off, a padded conv GEMM (P = 49) is written to global memory and read back with its
    epilogue by a second kernel; still right."""
    import importlib

    rule = importlib.import_module("autosched.search.sketch_rules_tensor_core")
    monkeypatch.setattr(rule, switch, False)
    dag = conv_dag("NHWC", 1, 16, 7, 16, 3, 1, 1, 1, epilogue=True)
    (st,) = valid_states(gpu_task(dag), 1)
    prog = lower(st)
    assert len(kernels(prog)) == 2
    args = random_args(dag, seed=5)
    out = np.zeros(dag.output_tensors[0].shape, np.float16)
    run_program(prog, [*args, out], simt=True)
    want = eval_dag(dag, args)[0].astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), want, *tolerance("float16"))


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("h", [8, 7])
def test_generated_cuda_compiles_to_wmma_ptx(arch, h, tmp_path):
    dag = conv_dag("NHWC", 1, 16, h, 32, 3, 1, 1, 1, epilogue=True)
    (st,) = valid_states(gpu_task(dag), 1, seed=3)
    code = build_cuda(lower(st), arch=arch).code
    assert "nvcuda::wmma::mma_sync" in code and "store_matrix_sync" in code
    assert code.count("__global__") == 1  # conv, cast, bias and relu in one kernel
    if h == 7:  # 49 pixels in 64 GEMM rows: the store writes the real ones only
        store = code[code.index("store_matrix_sync") :]
        assert "< 49)" in store[: store.index("__syncwarp();", store.index("wmma_e"))]
    text = nvcc_ptx(code, arch, tmp_path)
    assert "wmma.mma.sync" in text and "wmma.load.a" in text and "wmma.store.d" in text


@needs_nvcc
def test_an_rgb_stem_compiles_to_wmma_ptx_gathering_single_elements(tmp_path):
    """3 channels: a 16-wide k tile spans several taps, so the im2col copy reads one half at a
    time (the weights still come in 16-byte words); the GEMM is on tensor cores all the same."""
    dag = conv_dag("NHWC", 1, 3, 16, 32, 7, 2, 3, 1, epilogue=True)
    (st,) = valid_states(gpu_task(dag), 1, seed=4)
    code = build_cuda(lower(st), arch="sm_90").code
    assert "nvcuda::wmma::mma_sync" in code and code.count("__global__") == 1
    assert "(const uint4*)&placeholder[" not in code  # the data: no 16-byte words
    assert "(const uint4*)&placeholder_1[" in code or "cp_async16(" in code  # the weights
    text = nvcc_ptx(code, "sm_90", tmp_path)
    assert "wmma.mma.sync" in text and "wmma.load.a" in text


def _igemm_groups(groups):
    return [gd for gd in groups if "conv2d_gemm" in [op.name for op in gd.dag.ops]]


def test_partition_picks_the_implicit_gemm_for_16_bit_cuda_convs_only():
    rng = np.random.default_rng(0)
    mod, params = small_resnet_block(rng)
    mixed = ansor.to_mixed_precision(mod, "float16", params)
    _, groups = partition(mixed, None, "cuda")
    picked = _igemm_groups(groups)
    assert len(picked) == 2 and all("conv2d" in gd.name for gd in picked)
    assert not _igemm_groups(partition(mixed, None, "llvm")[1])
    assert not _igemm_groups(partition(mod, params, "cuda")[1])  # float32
    assert not _igemm_groups(partition(mixed, None, "cuda -arch=sm_61")[1])  # no wmma
    # The tasks of the 16-bit network get the tensor-core sketch, epilogue fused.
    tasks, _ = ansor.extract_tasks(mixed, None, "cuda")
    convs = [t for t in tasks if "conv2d" in t.desc]
    assert len(convs) == 2
    for task in convs:
        (sketch,) = generate_sketches(task)
        assert has_tc(sketch)


def test_the_switch_turns_it_off(monkeypatch):
    import importlib

    part = importlib.import_module("autosched.network.partition")

    rng = np.random.default_rng(1)
    mod, params = small_resnet_block(rng)
    mixed = ansor.to_mixed_precision(mod, "float16", params)
    monkeypatch.setattr(part, "IMPLICIT_GEMM", False)
    assert not _igemm_groups(partition(mixed, None, "cuda")[1])


def test_a_16_bit_network_with_implicit_gemm_convs_matches_the_reference():
    """The untuned CUDA build's groups (default GPU schedule) run as scalar loops on the CPU
    equal the graph reference of the 16-bit network."""
    from autosched.network.default_schedules import default_gpu_state
    from tensorir.graph.reference import evaluate

    rng = np.random.default_rng(2)
    mod, params = small_resnet_block(rng)
    mixed = ansor.to_mixed_precision(mod, "float16", params)
    func, groups = partition(mixed, None, "cuda")
    assert _igemm_groups(groups)
    x = rng.normal(0, 1, (1, 8, 8, 16)).astype("float32")
    got = helpers.run_groups_as_scalar_loops(
        func, groups, x, lambda gd: default_gpu_state(gd.dag, 256, 32, lambda s: None)
    ).astype(np.float32)
    want = np.asarray(evaluate(mixed["main"], {"data": x})).astype(np.float32)
    assert got.shape == (1, 4, 4, 16) and np.abs(want).max() > 0.1
    np.testing.assert_allclose(got, want, *tolerance("float16"))


def _as_word_copies(stmt):
    """``stmt`` with every loop that codegen.cuda fetches as one word (a GatherCopy) replaced
    by what that word copy does, lane by lane: ``dst[dbase + v] = cond ? src[sbase + v] : 0``."""
    from dataclasses import replace

    from codegen.vector_gather import gather_copy
    from tensorir.expr import Binary, Const, IfThenElse
    from tensorir.loops import Allocate, For, If, Load, Seq, Store

    def visit(s):
        if isinstance(s, For):
            g = gather_copy(s, s.extent) if s.kind == "vectorized" else None
            if g is not None:
                visit.count += 1
                dst, src, dbase, sbase, cond = g
                v = s.var
                value = Load(src, Binary("+", sbase, v, "int32"), src.dtype)
                if cond is not None:
                    value = IfThenElse(cond, value, Const(0.0, src.dtype), src.dtype)
                return replace(s, body=Store(dst, Binary("+", dbase, v, "int32"), value))
            return replace(s, body=visit(s.body))
        if isinstance(s, Allocate):
            return replace(s, body=visit(s.body))
        if isinstance(s, Seq):
            return replace(s, stmts=tuple(visit(x) for x in s.stmts))
        if isinstance(s, If):
            return replace(s, then=visit(s.then), else_=None if s.else_ is None else visit(s.else_))
        return s

    visit.count = 0
    return visit(stmt), visit


@pytest.mark.parametrize("case", [
    ("NHWC", 1, 16, 8, 16, 3, 1, 1),  # 3x3, padded image border: words of zeros
    ("NHWC", 2, 32, 8, 16, 3, 2, 1),  # strided, batch 2
    ("NHWC", 1, 16, 8, 16, 1, 2, 0),  # 1x1 s2: no condition
])  # fmt: skip
def test_im2col_fetch_in_words_equals_the_gather(case):
    """The im2col copy to shared runs as 16-byte words in CUDA (codegen.vector_gather); the
    same loops with each word copy spelled out lane by lane compute the conv."""
    from dataclasses import replace

    layout, n, ci, h, co, k, s, p = case
    dag = conv_dag(layout, n, ci, h, co, k, s, p)
    (st,) = valid_states(gpu_task(dag), 1, seed=2)
    prog = lower(st)
    body, visit = _as_word_copies(prog.body)
    assert visit.count >= 1  # the im2col copy (the weight's is a plain vector copy)
    args = random_args(dag, seed=4)
    out = np.zeros(dag.output_tensors[0].shape, np.float32)
    run_program(replace(prog, body=body), [*args, out], simt=True)
    np.testing.assert_allclose(out, conv_ref(*args, s, p, 1, layout), rtol=1e-3, atol=1e-3)
    code = build_cuda(prog, arch="sm_80").code
    assert helpers.fetches_data_in_words(code)


def test_im2col_fetch_stays_scalar_where_a_word_would_cross_a_pixel():
    """8 input channels with a 3x3 kernel: K = 72 is padded to 80 and 8 taps of a 16-wide k
    tile are still one pixel, but the padding condition depends on the lane: no word."""
    from codegen.vector_gather import gather_copy
    from tensorir.loops import For, walk_stmts

    dag = conv_dag("NHWC", 1, 8, 8, 16, 3, 1, 1)
    (st,) = valid_states(gpu_task(dag), 1, seed=2)
    prog = lower(st)
    loops = [x for x in walk_stmts(prog.body) if isinstance(x, For) and x.kind == "vectorized"]
    im2col = [x for x in loops if "im2col" in x.body.buffer.name]
    # Double buffered, the copy appears twice: the prologue's (k tile 0, every tap inside K,
    # so no lane-dependent condition is left: a word is right there) and the loop's, whose
    # ``r < 72`` and image conditions depend on the lane.
    lane_dependent = [x for x in im2col if "<72)" in str(x.body.value)]
    assert lane_dependent and all(gather_copy(x, x.extent) is None for x in lane_dependent)


def test_a_dense_read_back_in_another_shape_keeps_its_sketch():
    """Only the conv GEMM's reader gets its loops fused (dense / batch_matmul unchanged)."""
    from autosched.search.sketch_rules_tensor_core import flat_consumer
    from tensorir import te
    from tensorir.ops.dense import dense

    a = te.placeholder((32, 32), "float16", name="A")
    b = te.placeholder((64, 32), "float16", name="B")
    d = dense(a, b, out_dtype="float32")
    r = te.compute((2, 16, 64), lambda x, y, z: d[x * 16 + y, z], name="R")
    task = gpu_task(ComputeDAG([a, b, r]))
    (sketch,) = generate_sketches(task)
    assert has_tc(sketch) and any(s.name.endswith(".local") for s in sketch.stages)
    init = task.compute_dag.get_init_state()
    assert flat_consumer(init, init.stage_id(d.op.name)) is None


def test_bad_input_names_the_op_and_what_to_do():
    from tensorir.tensor import TensorError

    scope = NameScope()
    x = scope.placeholder((1, 8, 8, 16), "float16")
    with pytest.raises(TensorError, match=r"conv2d_gemm: data_layout 'NCDHW'.*'NHWC' or 'NCHW'"):
        conv2d_implicit_gemm(x, scope.placeholder((3, 3, 16, 16), "float16"), data_layout="NCDHW")
    with pytest.raises(TensorError, match=r"conv2d_gemm: the weight has 8 input channels.*16"):
        conv2d_implicit_gemm(x, scope.placeholder((3, 3, 8, 16), "float16"))


def _calls(func):
    from tensorir.graph.ir import Call, post_order

    return [n for n in post_order(func.body) if isinstance(n, Call)]


def _conv_calls(func):
    return [n for n in _calls(func) if n.op == "nn.conv2d"]


def test_the_network_stores_tensor_core_conv_weights_k_major():
    """On CUDA the constant HWIO weights of 16-bit convs become OHWI (folded: no transpose
    left in the graph); float32 convs on plain CUDA, and convs whose weight is an input, keep
    HWIO."""
    rng = np.random.default_rng(3)
    mod, params = small_resnet_block(rng)
    mixed = ansor.to_mixed_precision(mod, "float16", params)
    func, _ = partition(mixed, None, "cuda")
    convs = _conv_calls(func)
    assert [c.attrs["kernel_layout"] for c in convs] == ["OHWI", "OHWI"]
    w1 = convs[0].args[1]
    assert isinstance(w1, gir.Constant) and w1.shape == (32, 3, 3, 16)
    np.testing.assert_array_equal(
        np.asarray(w1.value), params["w1"].astype(np.float16).transpose(3, 0, 1, 2)
    )
    assert "transpose" not in {n.op for n in _calls(func)}
    f32, _ = partition(mod, params, "cuda")
    assert {c.attrs["kernel_layout"] for c in _conv_calls(f32)} == {"HWIO"}
    unbound = ansor.to_mixed_precision(mod, "float16")  # weights stay function inputs
    f16, _ = partition(unbound, None, "cuda")
    assert {c.attrs["kernel_layout"] for c in _conv_calls(f16)} == {"HWIO"}


def _warpgroup_gemm_shape(data_shape, weight_shape, data_layout, kernel_layout=""):
    """The GEMM stage's shape of a 3x3 float16 conv built for warpgroups (rows in 64s)."""
    scope = NameScope()
    x, w = scope.placeholder(data_shape, "float16"), scope.placeholder(weight_shape, "float16")
    with scope:
        out = conv2d_implicit_gemm(x, w, 1, 1, 1, data_layout, "float32", 1, kernel_layout, True)
    (gemm,) = [t for t in ComputeDAG([x, w, out]).ops if t.name == "conv2d_gemm"]
    return gemm.shape


def test_gemm_rows_pad_to_warpgroup_tiles_where_that_wastes_little():
    from tensorir.ops.conv2d_gemm import gemm_row_align

    assert gemm_row_align(784, True) == 64  # resnet-50 7x7 at batch 16: 832 rows, 6% padding
    assert gemm_row_align(196, True) == 16  # 14x14 at batch 1: 256 would pad 23%
    assert gemm_row_align(3136, True) == 64 and gemm_row_align(784, False) == 16
    nhwc = _warpgroup_gemm_shape((16, 7, 7, 64), (64, 3, 3, 64), "NHWC", "OHWI")
    assert nhwc == (832, 64)
    # NCHW: the pixels are the GEMM's columns, 16s suffice.
    assert _warpgroup_gemm_shape((16, 64, 7, 7), (64, 64, 3, 3), "NCHW") == (64, 784)


def test_an_sm_90_network_pads_its_conv_rows_and_matches_the_reference():
    """For sm_90 the 3x3 conv's 64 rows stay 64 and the 1x1 s2 conv's 16 stay 16 (64 would
    pad 75%); the untuned build equals the graph reference."""
    from autosched.network.default_schedules import default_gpu_state
    from tensorir.graph.reference import evaluate

    rng = np.random.default_rng(4)
    mod, params = small_resnet_block(rng)
    mixed = ansor.to_mixed_precision(mod, "float16", params)
    func, groups = partition(mixed, None, "cuda -arch=sm_90")
    gemms = [op for gd in _igemm_groups(groups) for op in gd.dag.ops if op.name == "conv2d_gemm"]
    assert [op.shape[0] for op in gemms] == [64, 16]
    x = rng.normal(0, 1, (1, 8, 8, 16)).astype("float32")
    got = helpers.run_groups_as_scalar_loops(
        func, groups, x, lambda gd: default_gpu_state(gd.dag, 256, 32, lambda s: None)
    ).astype(np.float32)
    want = np.asarray(evaluate(mixed["main"], {"data": x})).astype(np.float32)
    np.testing.assert_allclose(got, want, *tolerance("float16"))
