"""The int8 tiling of the CPU sketches: on a VNNI target, uint8 x int8 reductions are tiled so
that their two innermost loops are the output lanes (vectorized) and 4 reduction steps, which
the code generator runs on vpdpbusd; sampling and mutation keep those two tile lengths."""

import random
import re

import numpy as np
import pytest

import autosched as ansor
import runtime
from autosched.kernel import generate_source
from autosched.search import state_utils as su
from autosched.search.annotate import sample_init_population
from autosched.search.dot_product import dot_lanes, int8_dot_axes
from autosched.search.mutation import mutate_tile_size
from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from autosched.search.tiling import AnnotateContext
from codegen.llvm_dot import dot_product_width
from runtime.cpu import compile_assembly, host_cpu_features
from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.ops.quantized import conv2d_int8, conv2d_int8_ref, dense_int8, dense_int8_ref
from tensorir.passes.layout_rewrite import ParamLayout

HOST_WIDTH = dot_product_width(host_cpu_features())
needs_vnni = pytest.mark.skipif(
    HOST_WIDTH is None, reason="this CPU has neither AVX-512 VNNI nor AVX-VNNI (no vpdpbusd)"
)
# Another machine's x86 code: its features are its -mattr, whatever this host has.
VNNI_512 = "llvm -mtriple=x86_64-pc-windows-msvc -mattr=+avx512f,+avx512bw,+avx512vnni"
VNNI_256 = "llvm -mtriple=x86_64-pc-windows-msvc -mattr=+avx2,+avxvnni"
NO_VNNI = "llvm -mtriple=x86_64-pc-windows-msvc -mattr=+avx2,+fma"


def conv_dag(data_dtype="uint8", weight_dtype="int8", ci=32, co=32, size=8):
    d = te.placeholder((1, size, size, ci), data_dtype, name="data")
    w = te.placeholder((3, 3, ci, co), weight_dtype, name="weight")
    if data_dtype == "float32":
        from tensorir.ops.conv2d import conv2d_nhwc

        out = conv2d_nhwc(d, w, 1, 1, 1)
    else:
        out = conv2d_int8(d, w, (1, 1), (1, 1, 1, 1), data_layout="NHWC")
    relu = te.compute(out.shape, lambda *i: te.max(out[i], te.const(0, out.dtype)), "T_relu")
    return ComputeDAG([d, w, relu], layout_free_placeholders=["weight"])


def dense_dag(n=64, k=128):
    d = te.placeholder((2, k), "uint8", name="data")
    w = te.placeholder((n, k), "int8", name="weight")
    return ComputeDAG([d, w, dense_int8(d, w)], layout_free_placeholders=["weight"])


def tails(state):
    """(stage, lanes, reduction) of every stage whose innermost loops are the vpdpbusd nest."""
    ext = su.bound_extents(state)
    return [
        (s.name, ext[k][tail[0]], ext[k][tail[1]])
        for k, s in enumerate(state.stages)
        if not s.is_placeholder and (tail := su.dot_product_tail(s))
    ]


def test_dot_lanes_follow_the_target_features():
    assert dot_lanes(VNNI_512) == 16
    assert dot_lanes(VNNI_256) == 8
    assert dot_lanes(NO_VNNI) is None
    assert dot_lanes("cuda") is None


def test_the_axes_are_the_output_channels_and_the_contiguous_input_channels():
    conv = conv_dag().ops[-2]  # Conv2dOutput
    assert int8_dot_axes(conv, 16) == ("ff", "rc")
    assert int8_dot_axes(dense_dag().ops[-1], 16) == ("j", "k")
    assert int8_dot_axes(conv_dag(co=24).ops[-2], 16) is None  # 24 channels: not whole lanes
    assert int8_dot_axes(conv_dag(co=24).ops[-2], 8) == ("ff", "rc")
    assert int8_dot_axes(conv_dag(ci=6).ops[-2], 16) is None  # 6 input channels: not 4s
    assert int8_dot_axes(conv_dag("int8").ops[-2], 16) is None  # vpdpbusd: unsigned x signed
    assert int8_dot_axes(conv_dag("float32", "float32").ops[-2], 16) is None


@pytest.mark.parametrize("target, lanes", [(VNNI_512, 16), (VNNI_256, 8)])
@pytest.mark.parametrize("make", [conv_dag, dense_dag], ids=["conv2d", "dense"])
def test_int8_sketches_end_in_the_vpdpbusd_nest_on_a_vnni_target(make, target, lanes):
    task = ansor.SearchTask(compute_dag=make(), target=target)
    sketches = generate_sketches(task)
    assert sketches
    for sketch in sketches:
        tiled = [s for s in sketch.stages if su.dot_product_tail(s)]
        assert len(tiled) == 1, sketch
    for state in sample_init_population(task, sketches, 6, 0):
        ((_, got_lanes, got_k),) = tails(state)
        assert (got_lanes, got_k) == (lanes, 4)


@pytest.mark.parametrize(
    "make, target, params",
    [
        (conv_dag, NO_VNNI, None),
        (lambda: conv_dag("float32", "float32"), VNNI_512, None),
        (conv_dag, VNNI_512, SearchParams(cpu_int8_dot_product_tiling=False)),
    ],
    ids=["no_vnni", "fp32", "switched_off"],
)
def test_other_sketches_are_unchanged(make, target, params):
    task = ansor.SearchTask(compute_dag=make(), target=target)
    sketches = generate_sketches(task, params=params)
    assert sketches and not any(su.dot_product_tail(s) for sk in sketches for s in sk.stages)


def test_mutation_keeps_the_fixed_tile_lengths_and_moves_the_others():
    task = ansor.SearchTask(compute_dag=conv_dag(ci=64, co=64), target=VNNI_512)
    states = sample_init_population(task, generate_sketches(task), 4, 0)
    ctx = AnnotateContext(task.compute_dag, 1, SearchParams())
    rng, changed = random.Random(0), 0
    for k in range(60):
        parent = states[k % len(states)]
        child = mutate_tile_size(ctx, parent, rng)
        if child is None:
            continue
        assert [t[1:] for t in tails(child)] == [(16, 4)]
        changed += child.steps != parent.steps
    assert changed > 20


@needs_vnni
@pytest.mark.parametrize("make", [conv_dag, dense_dag], ids=["conv2d", "dense"])
def test_a_sampled_int8_schedule_runs_on_vpdpbusd_bit_exact(make):
    dag = make()
    task = ansor.SearchTask(compute_dag=dag, target="llvm")
    data_ph, weight_ph = (t for t in dag.tensors if t.op.name in ("data", "weight"))
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, data_ph.shape).astype("uint8")
    weight = rng.integers(-128, 128, weight_ph.shape).astype("int8")
    if make is dense_dag:
        expect = dense_int8_ref(data, weight)
    else:
        expect = np.maximum(
            conv2d_int8_ref(data, weight, (1, 1), (1, 1, 1, 1), data_layout="NHWC"), 0
        )
    for state in sample_init_population(task, generate_sketches(task), 2, 1):
        src = generate_source(state, "llvm", layout_rewrite=True)  # as measured and built
        assert re.search(r"\bvpdpbusd\b", compile_assembly(src.code))
        (layout,) = src.layouts
        out = np.full(expect.shape, 7, "int32")
        w = ParamLayout(*layout).transform(weight)
        runtime.load_module(**src.as_dict(), device=runtime.device("cpu"))(data, w, out)
        np.testing.assert_array_equal(out, expect)
