"""benchmarks/bench_row_threads.py's variants (no GPU needed): a layer norm state with its row
split into each thread count that divides the row, every one still computing the norm."""

from __future__ import annotations

import random

from autosched.search.annotate import sample_init_population
from tests.autosched.test_gpu_transformer_sketches import _cross_thread_sketch, _op_task, _run_simt
from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_row_threads")


def test_every_thread_count_dividing_the_row_replays_and_computes_the_norm():
    task = _op_task("nn.layer_norm", [(2, 96), (96,), (96,)], {"axis": -1, "epsilon": 1e-5})
    sketch, _ = _cross_thread_sketch(task)
    (state,) = sample_init_population(task, [sketch], 1, random.Random(1))
    assert bench.row_split(state) is not None
    got = bench.variants(task, state)
    counts = [t for t, _ in got]
    assert counts[0] == state.steps[bench.row_split(state)].lengths[0]  # the state's own first
    assert sorted(counts) == [32, 48, 96]  # the divisors of 96 among the bench's counts
    for threads, s in got[1:]:
        assert s.steps[bench.row_split(s)].lengths == (threads,)
        _run_simt(s, task.compute_dag, seed=threads)
    assert len(set(counts)) == len(counts)
