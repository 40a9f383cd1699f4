"""``SearchParams.gpu_shared_padding``: the scalar (SIMT) GPU sketch pads each row of its
``.shared`` copies to an odd number of 4-byte banks, without a GPU. On by default; the padded
kernels, run as scalar SIMT loops, match numpy on random inputs, and nvcc compiles them."""

import numpy as np
import pytest

from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from autosched.search.sketch_rules_gpu import shared_row_align
from codegen.cuda import build_cuda
from tensorir import steps as st
from tensorir.dtype import itemsize
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tests.autosched.tensor_core_helpers import (
    first_states,
    float32_dense,
    needs_nvcc,
    nvcc_ptx,
    sampled_states,
    shared_allocations,
)

OFF = SearchParams(gpu_shared_padding=False)


def align_steps(state) -> list:
    return [s for s in state.steps if isinstance(s, st.StorageAlignStep)]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8"])
def test_row_align_gives_rows_an_odd_number_of_bank_words(dtype):
    factor, offset = shared_row_align(dtype)
    per_word = 4 // itemsize(dtype)
    for extent in range(1, 70):
        stride = extent  # what storage_align allocates (tensorir.lower.aligned_strides)
        while stride % factor != offset:
            stride += 1
        assert stride - extent < factor  # less than a word of two wasted
        assert stride % per_word == 0 and (stride // per_word) % 2 == 1, (extent, stride)


def test_eight_byte_elements_are_not_padded():
    assert shared_row_align("float64") is None


def test_sketch_pads_both_copies_by_default_and_not_when_off():
    task = float32_dense()
    (sketch,) = generate_sketches(task)
    padded = {s.name: s.storage_align for s in sketch.stages if s.storage_align}
    assert sorted(padded) == ["A.shared", "B.shared"]
    assert all(align == ((0, 2, 1),) for align in padded.values())  # rows: axis 0 of (n, k)
    (plain,) = generate_sketches(task, params=OFF)
    assert not align_steps(plain)


def test_padded_kernels_compute_the_dense_with_odd_rows():
    task = float32_dense()
    (sketch,) = generate_sketches(task)
    states = first_states(sampled_states(task, sketch, seed=5, tries=300), 4)
    rng = np.random.default_rng(11)
    a = rng.standard_normal((32, 64)).astype(np.float32)
    b = rng.standard_normal((48, 64)).astype(np.float32)
    padded_rows = 0
    for state in states:
        prog = lower(state)
        bufs = shared_allocations(prog)
        assert len(bufs) == 2
        for buf in bufs.values():
            # rows of one element stay unpadded (1 is odd); longer ones are padded to odd
            assert buf.shape[-1] % 2 == 1 or len(buf.shape) == 1
            padded_rows += len(buf.shape) > 1 and buf.shape[-1] > 1
        out = np.zeros((32, 48), np.float32)
        run_program(prog, [a, b, out], simt=True)
        np.testing.assert_allclose(out, a @ b.T, rtol=1e-4, atol=1e-4)
    assert padded_rows, "no sampled state had a row longer than one element"


@needs_nvcc
def test_nvcc_compiles_the_padded_simt_kernel(tmp_path):
    task = float32_dense(64, 64, 128)
    (sketch,) = generate_sketches(task)
    (state,) = first_states(sampled_states(task, sketch, seed=3, tries=300), 1)
    code = build_cuda(lower(state), arch="sm_90").code
    ptx = nvcc_ptx(code, "sm_90", tmp_path, "padded")
    assert "fma.rn.f32" in ptx
