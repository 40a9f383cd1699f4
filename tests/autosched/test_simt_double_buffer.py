"""``SearchParams.gpu_simt_double_buffer``: the scalar (SIMT) GPU sketch's shared staging
double buffered on request, without a GPU. Off, the sketch is TVM's; on, the k-tile loop
carries one ``double_buffer`` pragma, lowering doubles both shared buffers, the kernels
computed as scalar SIMT loops match numpy on random inputs, and nvcc compiles them."""

import numpy as np
import pytest

from autosched.search import state_utils as su
from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from codegen.cuda import build_cuda
from tensorir.loop_interp import run_program
from tensorir.loops import walk_stmts
from tensorir.lower import lower
from tensorir.passes.double_buffer import PIPELINE_PRAGMAS, is_double_buffered
from tests.autosched.tensor_core_helpers import (
    first_states,
    float32_dense,
    needs_nvcc,
    nvcc_ptx,
    sampled_states,
    shared_allocations,
)

ON = SearchParams(gpu_simt_double_buffer=True, gpu_tensor_core_pipeline=2)


def pipeline_pragmas(state) -> list:
    return [(s.name, it) for s in state.stages for it, p in s.pragmas if p in PIPELINE_PRAGMAS]


def pipelined_states(task, n, seed=0):
    (sketch,) = generate_sketches(task, params=ON)
    states = sampled_states(task, sketch, seed, tries=300, params=ON)
    return first_states(
        (s for s in states if any(is_double_buffered(x) for x in walk_stmts(lower(s).body))),
        n,
        "double-buffered states with a k-tile loop of extent >= 2",
    )


def test_off_by_default_and_one_pragma_on_the_k_tile_loop_when_asked():
    task = float32_dense()
    assert not any(pipeline_pragmas(s) for s in generate_sketches(task))
    (sketch,) = generate_sketches(task, params=ON)
    ((stage, loop),) = pipeline_pragmas(sketch)  # A's and B's copies share one loop
    assert stage.endswith(".local") and loop.startswith("k")  # the cache-write stage


def test_double_buffered_kernels_compute_the_dense():
    task = float32_dense()
    rng = np.random.default_rng(7)
    a = rng.standard_normal((32, 64)).astype(np.float32)
    b = rng.standard_normal((48, 64)).astype(np.float32)
    for state in pipelined_states(task, 3):
        prog = lower(state)
        two, one = shared_allocations(prog), shared_allocations(lower(su.single_buffered(state)))
        assert sorted(two) == sorted(one) and len(two) == 2  # A's and B's copies
        for name, buf in two.items():
            assert buf.shape == (2, *one[name].shape)
        out = np.zeros((32, 48), np.float32)
        run_program(prog, [a, b, out], simt=True)
        np.testing.assert_allclose(out, a @ b.T, rtol=1e-4, atol=1e-4)


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_nvcc_compiles_the_double_buffered_simt_kernel(arch, tmp_path):
    (state,) = pipelined_states(float32_dense(64, 64, 128), 1, seed=3)
    code = build_cuda(lower(state), arch=arch).code
    ptx = nvcc_ptx(code, arch, tmp_path, f"simt_{arch}")
    assert "fma.rn.f32" in ptx
