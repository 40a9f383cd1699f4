"""float32 conv2d on TF32 tensor cores, without a GPU: under ``cuda -allow_tf32=1`` (sm_80+ or no
``-arch``) the network partition builds float32 convs as implicit GEMMs (K padded to TF32's
fragment K, 8), the tensor-core sketch tiles them on 16x16x8 fragments with 4-float im2col
words, the untuned default covers them, and the CUDA code compiles to TF32 ``wmma`` PTX; without
the option, before sm_80 and on the CPU nothing changes."""

import numpy as np
import pytest

import autosched as ansor
from autosched.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.measure.records import load_records, save_records
from autosched.network.default_schedules import default_gpu_state
from autosched.network.partition import implicit_gemm_dtypes, partition
from autosched.search.annotate_gpu import gpu_state_errors
from autosched.search.sketch import generate_sketches
from autosched.search.tensor_core_default import default_tensor_core_state
from codegen.target import Target
from tensorir.interp import eval_dag
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.ops.conv2d_gemm import conv2d_gemm_shape, gemm_k_align, use_implicit_gemm
from tensorir.passes.tensor_core import FRAGMENT_SHAPES, TF32_TENSOR_CORES, fragment_plan
from tensorir.passes.verify_gpu import kernels
from tests.autosched.tensor_core_helpers import NVCC, fetches_data_in_words
from tests.autosched.test_tensor_core_conv import (
    _as_word_copies,
    _igemm_groups,
    conv_dag,
    conv_ref,
    gpu_task,
    random_args,
    small_resnet_block,
    valid_states,
)
from tests.autosched.test_tensor_core_sketch import has_tc

TF32 = "cuda -arch=sm_80 -allow_tf32=1"
pytestmark = pytest.mark.skipif(
    not TF32_TENSOR_CORES, reason="TF32 tensor cores are switched off (TF32_TENSOR_CORES)"
)
NHWC = ("NHWC", "HWIO")
F32 = ("float16", "bfloat16", "float32")  # the dtypes a TF32 target builds as implicit GEMMs


def f32_conv(layout, n, ci, h, co, k, s, p, d=1, epilogue=False):
    return conv_dag(layout, n, ci, h, co, k, s, p, d, epilogue, dtype="float32")


def test_k_is_padded_to_the_fragments_k():
    assert gemm_k_align("float32") == FRAGMENT_SHAPES["float32"].k == 8
    assert gemm_k_align("float16") == gemm_k_align("bfloat16") == 16
    # 24 channels, 3x3: K = 216 is 27 TF32 fragments, 13.5 fp16 ones (padded to 224).
    args = ((1, 8, 8, 24), (3, 3, 24, 32), 1, 1, 1, "NHWC")
    assert conv2d_gemm_shape(*args, "float32").padded == (64, 216, 32)
    assert conv2d_gemm_shape(*args, "float16").padded == (64, 224, 32)
    dag = f32_conv("NHWC", 1, 24, 8, 32, 3, 1, 1)
    gemm = next(op for op in dag.ops if op.name == "conv2d_gemm")
    assert [ax.extent for ax in gemm.reduce_axes] == [216]


def test_the_rule_for_using_it_takes_float32_only_when_asked():
    conv = ((1, 56, 56, 64), (3, 3, 64, 64), 1, 1, 1, 1, *NHWC, "float32")
    assert not use_implicit_gemm(*conv)  # the default dtypes: 16-bit only
    assert use_implicit_gemm(*conv, F32)
    stem = ((1, 224, 224, 3), (7, 7, 3, 64), 2, 3, 1, 1, *NHWC, "float32")
    assert use_implicit_gemm(*stem, F32)  # the RGB stem: K = 147 padded to 152
    assert not use_implicit_gemm(*conv[:-1], "float64", ("float64",))  # no fragment for it


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", [
    (1, 16, 6, 16, 3, 1, 1, 1),  # P = 36 padded to 48
    (2, 24, 7, 24, 3, 2, 1, 1),  # batch 2, stride 2, K = 216 (27 fragments of 8), CO 24 -> 32
    (1, 12, 7, 16, 3, 1, 2, 2),  # dilation 2, K = 108 padded to 112 (not 112 -> 128)
])  # fmt: skip
def test_float32_implicit_gemm_equals_conv2d_built_for_llvm(layout, case):
    n, ci, h, co, k, s, p, d = case
    dag = f32_conv(layout, n, ci, h, co, k, s, p, d)
    args = random_args(dag, seed=ci + k)
    out = np.zeros(dag.output_tensors[0].shape, np.float32)
    ansor.build(ansor.network.default_schedules.default_schedule(dag, "llvm"), target="llvm")(
        *args, out
    )
    np.testing.assert_allclose(out, conv_ref(*args, s, p, d, layout), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "target,tf32",
    [
        (TF32, True),
        ("cuda -allow_tf32=1", True),  # no -arch: nvcc decides through __CUDA_ARCH__
        ("cuda -arch=sm_90 -allow_tf32=1", True),
        ("cuda -arch=sm_80", False),  # the default: float32 convs stay exact
        ("cuda -arch=sm_75 -allow_tf32=1", False),  # no TF32 before sm_80
        ("llvm", False),
    ],
)
def test_partition_picks_the_implicit_gemm_for_float32_convs_only_with_tf32(target, tf32):
    rng = np.random.default_rng(0)
    mod, params = small_resnet_block(rng)
    assert ("float32" in implicit_gemm_dtypes(target)) == tf32
    _, groups = partition(mod, params, target)
    picked = _igemm_groups(groups)
    assert len(picked) == (2 if tf32 else 0)
    names = " ".join(gd.name for gd in groups)
    # TF32 keeps its 3x3 conv off winograd (scalar float32) so that it runs on tensor cores;
    # plain cuda keeps the winograd conv it had.
    assert ("winograd" in names) == (not tf32 and target != "llvm")
    if tf32:
        assert all(gd.dag.output_tensors[0].dtype == "float32" for gd in picked)
        # Asked for explicitly, winograd still takes the 3x3 conv.
        _, wg = partition(mod, params, target, use_winograd=True)
        assert len(_igemm_groups(wg)) == 1 and any("winograd" in gd.name for gd in wg)


def test_the_rgb_stem_runs_on_tf32_tensor_cores_too():
    """3 input channels (K = 3*7*7 = 147, padded to 152): the partition builds the GEMM, its one
    sketch tiles it on TF32 fragments, and a sampled state computes the conv (exact float32 in
    the scalar reading) though its gather fetches one float at a time."""
    from tensorir.graph import ir as gir
    from tensorir.graph import nn, op

    rng = np.random.default_rng(3)
    data = op.var("data", (1, 32, 32, 3))
    w = op.var("w", (7, 7, 3, 16))
    out = nn.conv2d(data, w, strides=2, padding=3, data_layout="NHWC", kernel_layout="HWIO")
    mod = gir.Module({"main": gir.Function((data, w), out)})
    params = {"w": rng.normal(0, 0.2, (7, 7, 3, 16)).astype("float32")}
    stem = conv2d_gemm_shape((1, 32, 32, 3), (7, 7, 3, 16), 2, 3, 1, "NHWC", "float32")
    assert stem.padded[1] == 152
    assert len(_igemm_groups(partition(mod, params, TF32)[1])) == 1
    dag = f32_conv("NHWC", 1, 3, 32, 16, 7, 2, 3)
    (st,) = valid_states(gpu_task(dag, TF32), 1, seed=1)
    assert has_tc(st)
    args = random_args(dag, seed=5)
    got = np.zeros(dag.output_tensors[0].shape, np.float32)
    run_program(lower(st), [*args, got], simt=True)
    np.testing.assert_allclose(got, conv_ref(*args, 2, 3, 1, "NHWC"), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [
    # (layout, n, ci, h, co, k, stride, pad, epilogue)
    ("NHWC", 1, 16, 6, 32, 3, 1, 1, True),  # P = 36 in 48 rows
    ("NHWC", 1, 24, 7, 16, 3, 1, 1, True),  # P = 49 in 64 rows, K = 216: 27 fragments of 8
    ("NCHW", 1, 16, 8, 16, 1, 1, 0, True),
    ("NHWC", 2, 16, 8, 16, 3, 2, 1, False),
])  # fmt: skip
def test_tf32_conv_states_replay_lower_validate_and_compute_the_conv(case, tmp_path):
    layout, n, ci, h, co, k, s, p, epilogue = case
    dag = f32_conv(layout, n, ci, h, co, k, s, p, 1, epilogue)
    task = gpu_task(dag, TF32)
    states = valid_states(task, 1)
    path = tmp_path / "tf32conv.json"
    save_records(
        path,
        [MeasureInput(task, st) for st in states],
        [MeasureResult((1.0,), MeasureErrorNo.NO_ERROR, "", 0.1, 1.0)] * len(states),
    )
    back = list(load_records(path))
    args = random_args(dag, seed=2)
    want = eval_dag(dag, args)[0]
    for st, (inp, _) in zip(states, back, strict=True):
        assert Target(inp.task.target).allow_tf32  # tuned with TF32, and the record says so
        r = inp.state.to_state(dag)
        assert str(r) == str(st) and has_tc(r)
        assert not gpu_state_errors(task, r)
        prog = lower(r)
        ks = kernels(prog)
        assert len(ks) == 1  # the epilogue runs in the fragment store
        plan, why = fragment_plan(ks[0].stmt, ks[0].extents)
        assert plan is not None and plan.dtype == "float32" and plan.shape.k == 8, why
        out = np.zeros(dag.output_tensors[0].shape, np.float32)
        run_program(prog, [*args, out], simt=True)  # the scalar reading: exact float32
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_without_tf32_the_float32_gemm_keeps_the_scalar_sketches():
    dag = f32_conv("NHWC", 1, 16, 8, 16, 3, 1, 1)
    for target in ("cuda -arch=sm_80", "cuda -arch=sm_75 -allow_tf32=1"):
        task = gpu_task(dag, target)
        assert not any(has_tc(s) for s in generate_sketches(task))
        assert default_tensor_core_state(task) is None


@pytest.mark.parametrize("ci", [16, 20])  # 20: whole words of 4 floats, not of 8 halves
def test_im2col_fetch_in_words_of_four_floats_equals_the_gather(ci):
    from dataclasses import replace

    from codegen.cuda import build_cuda

    dag = f32_conv("NHWC", 1, ci, 8, 16, 3, 1, 1)
    (st,) = valid_states(gpu_task(dag, TF32), 1, seed=2)
    prog = lower(st)
    body, visit = _as_word_copies(prog.body)
    assert visit.count >= 1
    args = random_args(dag, seed=4)
    out = np.zeros(dag.output_tensors[0].shape, np.float32)
    run_program(replace(prog, body=body), [*args, out], simt=True)
    np.testing.assert_allclose(out, conv_ref(*args, 1, 1, 1, "NHWC"), rtol=1e-5, atol=1e-5)
    code = build_cuda(prog, arch="sm_80", allow_tf32=True).code
    assert fetches_data_in_words(code)  # 4 floats of a pixel, 16 bytes at a time


def test_the_untuned_default_runs_tf32_conv_on_tensor_cores():
    dag = f32_conv("NHWC", 1, 16, 6, 16, 3, 1, 1, 1, epilogue=True)
    task = gpu_task(dag, TF32)
    state = default_gpu_state(dag, 1024, 32, lambda s: None, task)
    assert has_tc(state) and not gpu_state_errors(task, state)
    prog = lower(state)
    (k,) = kernels(prog)
    plan, why = fragment_plan(k.stmt, k.extents)
    assert plan is not None and plan.dtype == "float32", why
    args = random_args(dag, seed=6)
    out = np.zeros(dag.output_tensors[0].shape, np.float32)
    run_program(prog, [*args, out], simt=True)
    np.testing.assert_allclose(out, eval_dag(dag, args)[0], rtol=1e-5, atol=1e-5)


def test_a_float32_network_with_tf32_convs_matches_the_reference():
    """The untuned TF32 build's groups (tensor-core defaults for the convs) run as scalar
    loops on the CPU equal the float32 graph reference (the scalar reading is exact)."""
    from tensorir.graph.reference import evaluate

    rng = np.random.default_rng(2)
    mod, params = small_resnet_block(rng)
    func, groups = partition(mod, params, TF32)
    assert len(_igemm_groups(groups)) == 2
    x = rng.normal(0, 1, (1, 8, 8, 16)).astype("float32")
    values = {id(func.params[0]): x}
    for gd in groups:
        args = [np.asarray(values[id(i)] if id(i) in values else i.value)  # noqa: SIM401
                for i in gd.inputs]  # fmt: skip
        task = gpu_task(gd.dag, TF32)
        state = default_gpu_state(gd.dag, 1024, 32, lambda s: None, task)
        assert has_tc(state) == ("conv2d_gemm" in [op.name for op in gd.dag.ops])
        out = np.zeros(gd.dag.output_tensors[0].shape, gd.dag.output_tensors[0].dtype)
        run_program(lower(state), [*args, out], simt=True)
        values[id(gd.group.output)] = out
    got = values[id(groups[-1].group.output)]
    want = np.asarray(evaluate(mod["main"], {"data": x}, params), np.float32)
    assert got.shape == (1, 4, 4, 16) and np.abs(want).max() > 0.1
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tf32_conv_cuda_compiles_to_tf32_mma_ptx(arch, tmp_path):
    import subprocess

    from autosched.kernel import generate_source

    dag = f32_conv("NHWC", 1, 16, 7, 32, 3, 1, 1, 1, epilogue=True)
    (st,) = valid_states(gpu_task(dag, TF32), 1, seed=3)
    code = generate_source(st, f"cuda -arch={arch} -allow_tf32=1").code
    assert "precision::tf32" in code and "__float_to_tf32" in code
    assert code.count("__global__") == 1  # conv, bias and relu in one kernel
    src, ptx = tmp_path / "k.cu", tmp_path / "k.ptx"
    src.write_text(code)
    subprocess.run([NVCC, "-ptx", f"-arch={arch}", str(src), "-o", str(ptx)],
                   check=True, capture_output=True)  # fmt: skip
    text = ptx.read_text()
    mma = [ln for ln in text.splitlines() if "wmma.mma.sync" in ln]
    assert mma and all("m16n16k8.f32.tf32.tf32.f32" in ln for ln in mma), mma[:2]
    assert "cvt.rna.tf32.f32" in text


def test_resnet18_float32_with_tf32_runs_every_conv_on_tensor_cores():
    hw = ansor.HardwareParams(num_cores=1, max_shared_memory_per_block=49152)
    mod, params, _, _ = ansor.networks.get_network("resnet-18", 1, "NHWC")
    tasks, _ = ansor.extract_tasks(mod, params, TF32, hardware_params=hw)
    convs = [t for t in tasks if "conv2d" in t.desc]
    igemm = [t for t in convs if "conv2d_gemm" in [op.name for op in t.compute_dag.ops]]
    assert len(igemm) == len(convs) >= 16  # 20 today, the RGB stem among them
    assert not any("winograd" in t.desc for t in tasks)
    for task in igemm:
        (sketch,) = generate_sketches(task)
        assert has_tc(sketch), task.desc


def test_the_gpu_tests_conv_cases_sample_valid_tensor_core_states():
    # tests/gpu/test_tensor_core_conv_tf32_cuda.py samples two valid states of each case on the
    # device; a shape whose tilings all break the fragment rules fails there, not here, unless
    # this checks it (a batch-2 14x14 stride-2 case did, on the H100).
    from tests.autosched.tensor_core_helpers import valid_states as draw
    from tests.gpu.test_tensor_core_conv_tf32_cuda import CASES

    for layout, n, ci, h, co, k, s, p in CASES:
        dag = conv_dag(layout, n, ci, h, co, k, s, p, 1, epilogue=True, dtype="float32")
        task = gpu_task(dag, "cuda -allow_tf32=1")
        assert len(draw(task, 2, 7, tries=300)) == 2
