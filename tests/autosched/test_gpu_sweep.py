"""Seeded sweep over sampled + mutated GPU states: every one generates CUDA that nvcc compiles
(skipped without nvcc), and a subset runs correctly on OpenCL (PoCL on the CPU here) against
the reference interpreter, on random uniform(-1, 1) inputs."""

import functools
import random
import shutil
import subprocess

import numpy as np
import pytest

import autosched as ansor
from autosched import workloads as W
from autosched.kernel import generate_source
from autosched.search.annotate import sample_init_population
from autosched.search.annotate_gpu import gpu_state_errors
from autosched.search.mutation import mutate
from autosched.search.sketch import generate_sketches
from autosched.search.sketch_rules_gpu import has_cross_thread_reduction
from autosched.task import SearchTask
from tensorir.dag import ComputeDAG
from tensorir.interp import eval_dag

WORKLOADS = {
    "matmul": lambda: W.matmul(64, 48, 40),
    "conv2d_bias_relu": lambda: W.conv2d_nhwc_bias_relu(1, 8, 8, 16, 16, 3, 3, 1, 1),
    "depthwise": lambda: W.depthwise_conv2d_nhwc(1, 10, 10, 16, 3, 3, 1, 1),
    "softmax": lambda: W.softmax(4, 100),
    "dense": lambda: W.dense_bias(2, 256, 40),  # little spatial work: cross-thread too
}
N_SAMPLED, N_MUTATED = 12, 8  # per workload: 100 states in all


@functools.cache
def sweep_states(name: str, target: str = "cuda"):
    """Sampled then mutated states of one workload (seeded), all passing the verifier."""
    task = SearchTask(ComputeDAG(WORKLOADS[name]()), target=target)
    sampled = sample_init_population(task, generate_sketches(task), N_SAMPLED, 17)
    rng = random.Random(23)
    mutated, tries = [], 0
    while len(mutated) < N_MUTATED and tries < 200:
        tries += 1
        child = mutate(task, sampled[tries % len(sampled)], rng)
        if child is not None:
            mutated.append(child)
    return task, sampled, mutated


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_sweep_states_are_valid(name):
    task, sampled, mutated = sweep_states(name)
    assert len(sampled) == N_SAMPLED and len(mutated) == N_MUTATED
    keys = {s.steps for s in sampled}
    assert len(keys) == N_SAMPLED
    for s in sampled + mutated:
        assert gpu_state_errors(task, s) == []


TIGHT_LIMITS = [
    {"max_threads_per_block": 64},
    {"max_shared_memory_per_block": 1024, "max_vthread_extent": 2},
    {"max_local_memory_per_block": 32, "warp_size": 32, "enforce_warp_multiple": True},
]


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_verifier_verdicts_do_not_need_the_simplified_program(name):
    """gpu_state_errors lowers without simplification: the same errors, under tight limits
    too, as the fully lowered program gives."""
    from tensorir.lower import lower
    from tensorir.passes.verify_gpu import gpu_program_errors

    _, sampled, mutated = sweep_states(name)
    rejected = 0
    for s in sampled + mutated:
        full, quick = lower(s), lower(s, simplify=False)
        for limits in TIGHT_LIMITS:
            errors = gpu_program_errors(full, limits)
            assert gpu_program_errors(quick, limits) == errors
            rejected += bool(errors)
    assert rejected > 0  # the tight limits do reject some states


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_sweep_cuda_compiles_with_nvcc(tmp_path):
    parts, count = [], 0
    for name in WORKLOADS:
        _, sampled, mutated = sweep_states(name)
        for k, s in enumerate(sampled + mutated):
            parts.append(generate_source(s, "cuda", name=f"{name}_{k}").code)
            count += 1
    assert count >= 100
    src = tmp_path / "sweep.cu"
    src.write_text("\n".join(parts))
    proc = subprocess.run(
        ["nvcc", "--cubin", "-arch=sm_90", "-o", str(tmp_path / "sweep.cubin"), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "sweep.cubin").stat().st_size > 0


def _opencl_available() -> bool:
    try:
        import pyopencl as cl

        return bool(cl.get_platforms())
    except Exception:  # noqa: BLE001 - no ICD / no platform
        return False


@pytest.mark.skipif(not _opencl_available(), reason="no OpenCL platform")
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_sweep_subset_runs_correctly_on_opencl(name):
    task, sampled, mutated = sweep_states(name)
    dag = task.compute_dag
    rng = np.random.default_rng(5)
    args = [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]
    refs = eval_dag(dag, args)
    picked = sampled[:4] + mutated[:2]  # 6 per workload, 30 in all
    if name in ("softmax", "dense"):  # the cross-thread reduction lowering runs too
        assert any(has_cross_thread_reduction(s, k) for s in picked for k in range(len(s.stages)))
    for s in picked:  # states of the CUDA task, built for OpenCL
        outs = [np.full(t.shape, np.nan, t.dtype) for t in dag.output_tensors]
        ansor.build(s, "opencl")(*args, *outs)
        for out, ref in zip(outs, refs, strict=True):
            np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4, err_msg=str(s))
