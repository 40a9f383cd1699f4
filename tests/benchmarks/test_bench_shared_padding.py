"""benchmarks/bench_shared_padding.py's rewrite (no GPU needed): a state tuned without padded
shared rows, given the ``storage_align`` steps the padded sketch records, pads both copies and
still computes the dense."""

from __future__ import annotations

import numpy as np

from autosched.search.params import SearchParams
from autosched.search.sketch import generate_sketches
from tensorir.loop_interp import run_program
from tensorir.lower import lower
from tensorir.schedule import replay
from tests.autosched.tensor_core_helpers import (
    dense_tensors,
    first_states,
    gpu_task,
    sampled_states,
)
from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_shared_padding")


def test_unpadded_states_get_both_copies_padded_and_compute_the_same():
    task = gpu_task(dense_tensors(32, 48, 64, dtype="float32", out_dtype="float32"))
    off = SearchParams(gpu_shared_padding=False)
    (sketch,) = generate_sketches(task, params=off)
    states = first_states(sampled_states(task, sketch, seed=2, tries=300, params=off), 3)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((32, 64)).astype(np.float32)
    b = rng.standard_normal((48, 64)).astype(np.float32)
    for state in states:
        assert not any(s.storage_align for s in state.stages)
        padded = replay(task.compute_dag, bench.with_padded_rows(task.compute_dag, state.steps))
        aligns = {s.name: s.storage_align for s in padded.stages if s.storage_align}
        assert sorted(aligns) == ["A.shared", "B.shared"]
        assert bench.accumulators(padded) == bench.accumulators(state) >= 1
        out = np.zeros((32, 48), np.float32)
        run_program(lower(padded), [a, b, out], simt=True)
        np.testing.assert_allclose(out, a @ b.T, rtol=1e-4, atol=1e-4)
