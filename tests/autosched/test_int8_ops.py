"""int8 conv2d (NCHW, NHWC) and dense with int32 accumulation and a fused requantize:
schedules the auto-scheduler samples from its sketches, built for LLVM and OpenCL (PoCL),
equal bit for bit to the integer numpy references of tensorir.ops.quantized."""

import random

import numpy as np
import pytest

import autosched as ansor
import runtime
from autosched.hardware import HardwareParams
from autosched.search.annotate import sample_init_population
from autosched.search.sketch import generate_sketches
from autosched.task import SearchTask
from tensorir import ops
from tensorir.ops import quantized as q
from tensorir.tensor import TensorError

SHIFT = 7


def conv_case(layout: str):
    scope = ops.NameScope()
    if layout == "NCHW":
        x, w = scope.placeholder((1, 16, 9, 9), "int8"), scope.placeholder((8, 16, 3, 3), "int8")
    else:
        x, w = scope.placeholder((1, 9, 9, 16), "int8"), scope.placeholder((3, 3, 16, 8), "int8")
    with scope:
        acc = q.conv2d_int8(x, w, (2, 2), (1, 1, 1, 1), data_layout=layout)
        out = q.requantize(acc, SHIFT)

    def reference(xa, wa):
        r = q.conv2d_int8_ref(xa, wa, (2, 2), (1, 1, 1, 1), data_layout=layout)
        return r, q.requantize_ref(r, SHIFT)

    return [x, w, acc, out], reference


def dense_case():
    scope = ops.NameScope()
    x, w = scope.placeholder((4, 64), "int8"), scope.placeholder((24, 64), "int8")
    with scope:
        acc = q.dense_int8(x, w)
        out = q.requantize(acc, SHIFT)
    return [x, w, acc, out], lambda xa, wa: (
        q.dense_int8_ref(xa, wa),
        q.requantize_ref(q.dense_int8_ref(xa, wa), SHIFT),
    )


CASES = {"conv2d_nchw": lambda: conv_case("NCHW"), "conv2d_nhwc": lambda: conv_case("NHWC")}
CASES["dense"] = dense_case


def int8(shape, seed):
    return np.random.default_rng(seed).integers(-127, 128, shape).astype("int8")


def sampled_states(tensors, target, n):
    dag = ansor.ComputeDAG([tensors[0], tensors[1], tensors[3]])
    task = SearchTask(dag, target=target, hardware_params=HardwareParams(num_cores=2))
    sketches = generate_sketches(task)
    assert sketches, "no sketch for the int8 workload"
    states = sample_init_population(task, sketches, 8, random.Random(0))
    assert states, "the sketches gave no valid state"
    return states[:n]


def check(tensors, reference, target, n):
    xa, wa = int8(tensors[0].shape, 1), int8(tensors[1].shape, 2)
    acc, want = reference(xa, wa)
    assert (np.abs(acc) >> SHIFT > 127).any()  # the saturation is exercised
    for state in sampled_states(tensors, target, n):
        got = np.full(tensors[3].shape, 99, "int8")
        ansor.build(state, target=target)(xa, wa, got)
        np.testing.assert_array_equal(got, want, err_msg=str(state))


@pytest.mark.parametrize("case", sorted(CASES))
def test_sampled_llvm_schedules_are_bit_exact(case):
    tensors, reference = CASES[case]()
    check(tensors, reference, "llvm", 2)


@pytest.mark.parametrize("case", sorted(CASES))
def test_sampled_opencl_schedules_are_bit_exact(case):
    if not runtime.device("opencl").exist:
        pytest.skip("no OpenCL device")
    tensors, reference = CASES[case]()
    check(tensors, reference, "opencl", 1)


def test_int32_accumulator_is_exact_where_int8_would_wrap():
    tensors, reference = CASES["dense"]()
    xa, wa = int8(tensors[0].shape, 3), int8(tensors[1].shape, 4)
    acc, _ = reference(xa, wa)
    got = np.zeros(tensors[2].shape, "int32")
    dag = ansor.ComputeDAG(tensors[:3])
    ansor.build(dag.get_init_state(), target="llvm")(xa, wa, got)
    np.testing.assert_array_equal(got, acc)
    assert np.abs(acc).max() > 127 * 127


def test_float_input_is_refused_by_name():
    x = ops.NameScope().placeholder((2, 8), "float32")
    w = ops.NameScope().placeholder((4, 8), "int8")
    with pytest.raises(TensorError, match="dense_int8: data has dtype float32"):
        q.dense_int8(x, w)


@pytest.mark.parametrize("out_dtype", ["int8", "uint8", "int16"])
def test_requantize_saturates_for_any_shift_without_int32_overflow(out_dtype):
    # Shifts of 31 bits and more (weights scaled by 1e12 or 1e-9 give them): the result is
    # the exact saturating value clip(round(v * 2**-shift)), computed in Python integers.
    acc = np.random.default_rng(5).integers(-(2**31) + 1, 2**31 - 1, 200, dtype=np.int64)
    acc = np.concatenate([acc, [0, 1, -1, 2**30, 2**31 - 1, -(2**31) + 1]]).astype(np.int32)
    lo, hi = q.quantized_range(out_dtype)
    shifts = (-40, -33, -31, -9, -1, 0, 3, 30, 31, 32, 40)
    scope = ops.NameScope()
    x = scope.placeholder(acc.shape, "int32")
    with scope:
        outs = [q.requantize(x, s, out_dtype) for s in shifts]
    got = [np.zeros(acc.shape, out_dtype) for _ in shifts]
    ansor.build(ansor.ComputeDAG([x, *outs]).get_init_state(), target="llvm")(acc, *got)
    for shift, compiled in zip(shifts, got):
        exact = [v << -shift if shift <= 0 else (v + (1 << (shift - 1))) >> shift
                 for v in acc.tolist()]  # fmt: skip
        want = np.clip(exact, lo, hi)
        np.testing.assert_array_equal(q.requantize_ref(acc, shift, out_dtype), want, f"{shift}")
        np.testing.assert_array_equal(compiled, want, err_msg=f"shift {shift}")
