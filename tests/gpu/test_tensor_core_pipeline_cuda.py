"""Double-buffered tensor-core kernels (cp.async on sm_80+) on a real GPU: a large-tile sampled
state (what tuning keeps) with the pipeline equals a float32 numpy reference and the same
schedule single-buffered, and its PTX issues cp.async; the same for 3 and 4 stage pipelines
(cp.async groups, wait_group N-2)."""

import numpy as np
import pytest

import autosched as ansor
from autosched.hardware import cuda_arch
from autosched.search.annotate_gpu import gpu_state_errors
from autosched.search.params import SearchParams
from autosched.search.state_utils import pipeline_stages, single_buffered, with_pipeline_stages
from codegen.cuda import cp_async_available
from tensorir.dag import ComputeDAG
from tensorir.loops import Allocate, walk_stmts
from tensorir.lower import lower
from tensorir.passes.double_buffer import is_double_buffered
from tests.autosched.tensor_core_helpers import (
    NVCC,
    dense_tensors,
    gemm_reference,
    nvcc_ptx,
    sampled_states,
    wmma_sketches,
)


def _shared_bytes(prog) -> int:
    return sum(s.buffer.nbytes for s in walk_stmts(prog.body)
               if isinstance(s, Allocate) and s.buffer.scope == "shared")  # fmt: skip


def _pipelined(prog) -> bool:
    return any(is_double_buffered(s) for s in walk_stmts(prog.body))


def tuned_style_state(task, tries=40, seed=11, stages=2):
    """Of ``tries`` sampled valid states with a pipelined k loop (up to ``stages`` stages), the
    one staging the most shared memory (the big block tiles tuning ends up with)."""
    (sketch,) = wmma_sketches(task)
    params = SearchParams(gpu_tensor_core_pipeline=stages)
    best, best_bytes, seen = None, -1, 0
    for s in sampled_states(task, sketch, seed, tries * 10, params):
        prog = lower(s)
        if not _pipelined(prog):
            continue
        seen += 1
        if _shared_bytes(prog) > best_bytes:
            best, best_bytes = s, _shared_bytes(prog)
        if seen == tries:
            break
    assert best is not None, "no sampled state is double buffered"
    return best


@pytest.mark.parametrize("m,n,k", [(512, 512, 512), (1024, 768, 256)])
def test_double_buffered_tensor_core_kernel_matches_numpy(cuda_backend, m, n, k, tmp_path):
    from runtime import device

    task = ansor.SearchTask(ComputeDAG(dense_tensors(m, n, k)), target="cuda")
    s = tuned_style_state(task)
    rng = np.random.default_rng(4)
    args = [rng.uniform(-1, 1, t.shape).astype("float16") for t in task.compute_dag.input_tensors]
    want = gemm_reference(args)
    func = ansor.build(s, "cuda", device=device("cuda"))
    code = func.get_source()
    arch = cuda_arch("cuda")
    if cp_async_available(arch):
        assert "cp_async16(&" in code and "cp_async_wait_all();" in code
        if NVCC:
            text = nvcc_ptx(code, arch, tmp_path)
            assert "cp.async.cg.shared.global" in text and "mma.sync" in text
    out = np.full((m, n), np.nan, np.float32)
    func(*args, out)
    np.testing.assert_allclose(out, want, rtol=1e-2, atol=2e-2, err_msg=str(s))
    # The same schedule with one shared buffer computes the same sums in the same order.
    single = ansor.build(single_buffered(s), "cuda", device=device("cuda"))
    assert "cp_async16(&" not in single.get_source()
    ref = np.full((m, n), np.nan, np.float32)
    single(*args, ref)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stages", [3, 4])
def test_deeper_pipelines_match_numpy_and_the_double_buffered_kernel(cuda_backend, stages):
    from runtime import device

    m, n, k = 256, 256, 512
    task = ansor.SearchTask(ComputeDAG(dense_tensors(m, n, k)), target="cuda")
    two = tuned_style_state(task, tries=10, seed=5)
    deep = with_pipeline_stages(two, stages)
    assert pipeline_stages(deep) == stages
    if gpu_state_errors(task, deep):
        pytest.skip(f"{stages} copies of this state's tiles do not fit in shared memory")
    rng = np.random.default_rng(7)
    args = [rng.uniform(-1, 1, t.shape).astype("float16") for t in task.compute_dag.input_tensors]
    func = ansor.build(deep, "cuda", device=device("cuda"))
    code = func.get_source()
    if cp_async_available(cuda_arch("cuda")):
        assert "cp_async_commit();" in code and f"cp_async_wait_group{stages - 2}();" in code
    out = np.full((m, n), np.nan, np.float32)
    func(*args, out)
    np.testing.assert_allclose(out, gemm_reference(args), rtol=1e-2, atol=2e-2, err_msg=str(deep))
    # The same tiles double buffered: the same sums in the same order.
    ref = np.full((m, n), np.nan, np.float32)
    ansor.build(two, "cuda", device=device("cuda"))(*args, ref)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_a_pipeline_past_48k_runs_in_dynamic_shared_memory(cuda_backend, dtype):
    """Four stages of big tiles take more than the 48 KB of static shared memory: the kernel
    opts in to dynamic shared memory (227 KB a block on sm_90), and computes what the same
    tiles double buffered compute, in a plain launch and in a CUDA graph of the module."""
    from runtime import device

    dev = device("cuda")
    if dev.properties.get("max_shared_memory_per_block_optin", 0) <= 48 * 1024:
        pytest.skip("this device has no shared memory to opt in to")
    target = "cuda -allow_tf32=1" if dtype == "float32" else "cuda"
    if dtype == "float32" and not cp_async_available(cuda_arch("cuda")):
        pytest.skip("TF32 fragments need sm_80")
    m, n, k = 256, 256, 1024
    tensors = dense_tensors(m, n, k, dtype=dtype, out_dtype="float32")
    task = ansor.SearchTask(ComputeDAG(tensors), target=target)
    two = tuned_style_state(task, tries=40, seed=3, stages=2)
    deep = with_pipeline_stages(two, 4)
    assert _shared_bytes(lower(deep)) > 48 * 1024, "the biggest sampled tiles are small"
    assert gpu_state_errors(task, deep) == []
    rng = np.random.default_rng(9)
    args = [rng.uniform(-1, 1, t.shape).astype(dtype) for t in task.compute_dag.input_tensors]
    func = ansor.build(deep, target, device=dev)
    assert "extern __shared__ __align__(128) unsigned char" in func.get_source()
    out = np.full((m, n), np.nan, np.float32)
    func(*args, out)
    np.testing.assert_allclose(out, gemm_reference(args), rtol=2e-2, atol=5e-2, err_msg=str(deep))
    ref = np.full((m, n), np.nan, np.float32)
    ansor.build(two, target, device=dev)(*args, ref)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    # Timed as replays of a CUDA graph (runs under 50 us, as networks replay their kernels):
    # a capture that lost the bytes would read past the block's shared memory and fail here.
    assert func.time_evaluator(number=20, repeat=2)(*args, out).mean > 0
