"""uint8 x int8 -> int32 dot-product loops use x86's vpdpbusd (AVX-512 VNNI / AVX-VNNI) where
the CPU has it, bit-exact with the scalar loop and numpy's integer reference."""

import numpy as np
import pytest

import autosched as ansor
import runtime
from codegen.llvm import build_llvm
from codegen.llvm_dot import REQUIRES_HEADER, dot_product_width
from runtime.cpu import compile_assembly, host_cpu_features
from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.lower import lower
from tensorir.ops.quantized import dense_int8_ref
from tensorir.schedule import State

HOST_WIDTH = dot_product_width(host_cpu_features())
needs_vnni = pytest.mark.skipif(
    HOST_WIDTH is None, reason="this CPU has neither AVX-512 VNNI nor AVX-VNNI (no vpdpbusd)"
)
AVX512 = {"avx512vnni", "avx512bw", "avx512f"}


def dense_dag(k: int, data_dtype: str = "uint8"):
    a = te.placeholder((3, k), data_dtype, name="A")
    w = te.placeholder((5, k), "int8", name="W")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute(
        (3, 5),
        lambda i, j: te.sum(a[i, r].astype("int32") * w[j, r].astype("int32"), axis=r),
        name="C",
    )
    return ComputeDAG([a, w, c])


def inputs(k: int, data_dtype: str = "uint8"):
    rng = np.random.default_rng(k)
    lo = 0 if data_dtype == "uint8" else -128
    a = rng.integers(lo, lo + 256, (3, k)).astype(data_dtype)
    w = rng.integers(-128, 128, (5, k)).astype("int8")
    return a, w


def run(src, a, w):
    out = np.full((3, 5), 7, "int32")
    runtime.load_module(**src.as_dict(), device=runtime.device("cpu"))(a, w, out)
    return out


def test_width_follows_the_cpu_features():
    assert dot_product_width(AVX512) == 512
    assert dot_product_width({"avxvnni", "avx2"}) == 256
    assert dot_product_width({"avx512vnni", "avx512vl"}) == 256
    assert dot_product_width({"avx2", "fma"}) is None


@needs_vnni
@pytest.mark.parametrize("features", [AVX512, {"avxvnni"}], ids=["avx512_vnni", "avx_vnni"])
@pytest.mark.parametrize("k", [256, 200, 1000])  # whole vectors, and a scalar tail
def test_vpdpbusd_is_emitted_and_bit_exact(features, k):
    if dot_product_width(features) > HOST_WIDTH:
        pytest.skip("the host's vpdpbusd is narrower")
    src = build_llvm(lower(State(dense_dag(k))), features)
    width = dot_product_width(features)
    assert f"llvm.x86.avx512.vpdpbusd.{width}" in src.code
    assert "vpdpbusd" in compile_assembly(src.code)
    a, w = inputs(k)
    np.testing.assert_array_equal(run(src, a, w), dense_int8_ref(a, w))


def test_without_the_feature_the_loop_stays_scalar_and_exact():
    src = build_llvm(lower(State(dense_dag(200))), {"avx2"})
    assert "vpdpbusd" not in src.code
    a, w = inputs(200)
    np.testing.assert_array_equal(run(src, a, w), dense_int8_ref(a, w))


def test_signed_data_is_not_a_vpdpbusd_pattern():
    # vpdpbusd multiplies unsigned by signed bytes: int8 x int8 keeps the scalar loop.
    src = build_llvm(lower(State(dense_dag(256, "int8"))), AVX512)
    assert "vpdpbusd" not in src.code
    a, w = inputs(256, "int8")
    np.testing.assert_array_equal(run(src, a, w), dense_int8_ref(a, w))


@needs_vnni
def test_build_uses_the_host_features():
    dag = dense_dag(512)
    src = ansor.generate_source(dag.get_init_state(), target="llvm")
    assert "vpdpbusd" in src.code
    a, w = inputs(512)
    out = np.zeros((3, 5), "int32")
    ansor.build(dag.get_init_state(), target="llvm")(a, w, out)
    np.testing.assert_array_equal(out, dense_int8_ref(a, w))


def test_another_machines_code_uses_its_own_features():
    from autosched.kernel import cpu_features

    assert cpu_features("llvm") == host_cpu_features()
    assert cpu_features("llvm -mtriple=aarch64-linux-gnu") == frozenset()
    cross = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod"
    assert cpu_features(cross) == {"neon", "dotprod"}
    src = ansor.generate_source(dense_dag(512).get_init_state(), target=cross)
    assert "vpdpbusd" not in src.code  # x86 instructions never go into aarch64 code


def test_code_names_the_features_it_needs_and_a_host_without_them_refuses_it():
    import dataclasses

    from codegen.llvm_dot import REQUIRES_HEADER
    from runtime.errors import CompileError

    src = build_llvm(lower(State(dense_dag(256))), AVX512)
    assert src.code.startswith(REQUIRES_HEADER + "avx512bw+avx512vnni\n")
    narrow = build_llvm(lower(State(dense_dag(256))), {"avxvnni"})
    assert narrow.code.startswith(REQUIRES_HEADER + "avxvnni|avx512vl+avx512vnni\n")
    scalar = build_llvm(lower(State(dense_dag(256))), {"avx2"})
    assert not scalar.code.startswith(REQUIRES_HEADER)
    # The same code claiming a feature no CPU has: refused by name before LLVM sees it.
    alien = dataclasses.replace(
        src, code=src.code.replace("avx512bw+", "avx512bw+made-up-feature+", 1)
    )
    with pytest.raises(CompileError, match=r"made-up-feature.*this host lacks.*rebuild it here"):
        runtime.load_module(**alien.as_dict(), device=runtime.device("cpu"))


# --- the vertical form: a vectorized loop of outputs around a reduction loop of 4 ----------


def conv_dag(ci: int = 32, co: int = 32, data_dtype: str = "uint8", layout_free=()):
    from tensorir.ops.quantized import conv2d_int8

    d = te.placeholder((1, 6, 6, ci), data_dtype, name="data")
    w = te.placeholder((3, 3, ci, co), "int8", name="weight")
    out = conv2d_int8(d, w, (1, 1), (1, 1, 1, 1), data_layout="NHWC")
    return ComputeDAG([d, w, out], layout_free_placeholders=layout_free)


def vertical_state(dag, lanes: int, k_inner: int = 4):
    """Padding inlined (a guarded read), ``ff`` split by ``lanes`` and ``rc`` by ``k_inner``,
    both innermost in that order, the output-channel loop vectorized."""
    s = dag.get_init_state()
    conv = s.stage_id("Conv2dOutput")
    s.compute_inline(s.stage_id("PaddedInput"))
    _, lane = s.split(conv, "ff", [lanes])
    _, k = s.split(conv, "rc", [k_inner])
    rest = [it.name for it in s.stages[conv].iters if it.name not in (lane.name, k.name)]
    s.reorder(conv, [*rest, lane.name, k.name])
    s.vectorize(conv, lane.name)
    return s


def conv_inputs(ci: int = 32, co: int = 32, data_dtype: str = "uint8"):
    rng = np.random.default_rng(ci + co)
    lo = 0 if data_dtype == "uint8" else -128
    return (
        rng.integers(lo, lo + 256, (1, 6, 6, ci)).astype(data_dtype),
        rng.integers(-128, 128, (3, 3, ci, co)).astype("int8"),
    )


def run_conv(src, data, weight, layouts=()):
    for lay in layouts:
        weight = lay.transform(weight)
    out = np.full((1, 6, 6, 32), 7, "int32")
    runtime.load_module(**src.as_dict(), device=runtime.device("cpu"))(data, weight, out)
    return out


def conv_ref(data, weight):
    from tensorir.ops.quantized import conv2d_int8_ref

    return conv2d_int8_ref(data, weight, (1, 1), (1, 1, 1, 1), data_layout="NHWC")


@needs_vnni
@pytest.mark.parametrize("features", [AVX512, {"avxvnni"}], ids=["avx512_vnni", "avx_vnni"])
@pytest.mark.parametrize("layout_rewrite", [False, True], ids=["hwio", "rewritten"])
def test_vertical_form_is_emitted_and_bit_exact(features, layout_rewrite):
    width = dot_product_width(features)
    if width > HOST_WIDTH:
        pytest.skip("the host's vpdpbusd is narrower")
    dag = conv_dag(layout_free=("weight",) if layout_rewrite else ())
    program = lower(vertical_state(dag, width // 32), layout_rewrite=layout_rewrite)
    src = build_llvm(program, features)
    assert f"llvm.x86.avx512.vpdpbusd.{width}" in src.code
    assert src.code.startswith(REQUIRES_HEADER)
    asm = compile_assembly(src.code)
    assert "vpdpbusd" in asm
    if layout_rewrite:
        # the weight is stored [.., oc lanes][4]: one plain vector load per vpdpbusd, no shuffles
        (layout,) = program.param_layouts
        assert layout.shape[-2:] == (width // 32, 4)
        assert not any(op in asm for op in ("vpshufb", "vpermb", "vpermt2b"))
    data, weight = conv_inputs()
    out = run_conv(src, data, weight, program.param_layouts)
    np.testing.assert_array_equal(out, conv_ref(data, weight))


@needs_vnni
def test_vertical_form_with_a_reduction_of_8_chains_two_vpdpbusd():
    src = build_llvm(lower(vertical_state(conv_dag(), HOST_WIDTH // 32, 8)), host_cpu_features())
    assert src.code.count(f'call <{HOST_WIDTH // 32} x i32> @"llvm.x86.avx512.vpdpbusd') == 2
    data, weight = conv_inputs()
    np.testing.assert_array_equal(run_conv(src, data, weight), conv_ref(data, weight))


@pytest.mark.parametrize(
    "data_dtype, k_inner, features",
    [("int8", 4, AVX512), ("uint8", 2, AVX512), ("uint8", 4, {"avx2"})],
    ids=["signed_data", "reduction_of_2", "no_vnni"],
)
def test_no_vertical_form_keeps_the_vector_loop_exact(data_dtype, k_inner, features):
    # vpdpbusd needs uint8 x int8 and 4 reduction steps per lane; without them (or without the
    # instruction) the loop stays what it was, with the same result.
    dag = conv_dag(data_dtype=data_dtype)
    src = build_llvm(lower(vertical_state(dag, 16, k_inner)), features)
    assert "vpdpbusd" not in src.code
    data, weight = conv_inputs(data_dtype=data_dtype)
    np.testing.assert_array_equal(run_conv(src, data, weight), conv_ref(data, weight))
