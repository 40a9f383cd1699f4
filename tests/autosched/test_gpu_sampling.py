"""GPU sampling speed (issue 29): the block-level shared-memory check before binding and
lowering, and sampling in seeded chunks (the same states in-process and in worker processes).
Runs without a GPU."""

import logging
import random

import numpy as np

from autosched import testing as W
from autosched.hardware import HardwareParams
from autosched.search import annotate_gpu as ag
from autosched.search import state_utils as su
from autosched.search.params import SearchParams
from autosched.search.sample_pool import CHUNK, sample_gpu_states
from autosched.search.sketch import generate_sketches
from autosched.task import SearchTask
from tensorir.dag import ComputeDAG


def _task(tensors, **hw):
    return SearchTask(ComputeDAG(tensors), target="cuda", hardware_params=HardwareParams(**hw))


def test_block_shared_bytes_decides_as_the_verifier():
    """The check before binding keeps exactly the tile sizes whose lowered kernel fits the
    shared memory limit (a low limit, so that both verdicts occur)."""
    limit = 6 * 1024
    task = _task(W.conv2d_nhwc_bias_relu(1, 14, 14, 32, 32, 3, 3, 1, 1),
                 max_shared_memory_per_block=limit)  # fmt: skip
    (sketch,) = generate_sketches(task)
    ctx = ag.gpu_context(task, SearchParams())
    rng = random.Random(2)
    verdicts = []
    for _ in range(16):
        s = ag.init_fill_tile_size_gpu(ctx, sketch, rng)
        over = max(ag.block_shared_bytes(ctx, s).values(), default=0) > limit
        bound = ag.init_thread_bind(ctx, s, rng, su.bound_extents(s))
        errors = ag.gpu_state_errors(task, ag.init_unroll_gpu(ctx, bound, rng))
        assert over == any("shared memory" in e for e in errors), errors
        verdicts.append(over)
    assert any(verdicts) and not all(verdicts)


def test_gpu_samples_fit_the_limit_and_are_lowered_once(monkeypatch):
    """Sampled states pass the verifier, and tile sizes over the limit are redrawn before
    lowering: every lowered sample is accepted."""
    limit = 6 * 1024
    task = _task(W.conv2d_nhwc_bias_relu(1, 14, 14, 32, 32, 3, 3, 1, 1),
                 max_shared_memory_per_block=limit)  # fmt: skip
    sketches = generate_sketches(task)
    ctx = ag.gpu_context(task, SearchParams())
    calls = []
    original = ag.gpu_state_errors

    def counting(t, s):
        calls.append(original(t, s))
        return calls[-1]

    monkeypatch.setattr(ag, "gpu_state_errors", counting)
    rng = random.Random(5)
    states = [ag.sample_state_gpu(ctx, sketches[0], rng, task) for _ in range(6)]
    assert all(s is not None for s in states)
    assert len(calls) == 6 and not any(calls)


def test_chunked_sampling_is_the_same_in_process_and_in_workers(caplog):
    task = _task(W.matmul(128, 128, 64))
    sketches = generate_sketches(task)
    n = CHUNK + 8  # two chunks
    here = sample_gpu_states(task, sketches, n, np.random.default_rng(4), SearchParams(), 0)
    with caplog.at_level(logging.DEBUG, logger="autosched.search.pool_chunks"):
        pool = sample_gpu_states(task, sketches, n, np.random.default_rng(4), SearchParams(), 2)
    assert "worker pool failed" not in caplog.text  # the workers sampled, not the fallback
    assert [s.steps for s in here] == [s.steps for s in pool]
    assert len(here) > CHUNK and len({s.steps for s in here}) == len(here)
    assert all(not ag.gpu_state_errors(task, s) for s in here)
    other = sample_gpu_states(task, sketches, n, np.random.default_rng(5), SearchParams(), 0)
    assert [s.steps for s in other] != [s.steps for s in here]
