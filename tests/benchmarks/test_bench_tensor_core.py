"""benchmarks/bench_tensor_core.py's ``--ab`` states without a GPU: the fixed tiles it asks for,
the same schedule single- and double-buffered, and the doubled staging refused where it does not
fit the shared memory."""

from __future__ import annotations

import autosched as ansor
from autosched.search.annotate_gpu import gpu_state_errors
from autosched.search.state_utils import single_buffered
from tensorir.dag import ComputeDAG
from tensorir.loops import Allocate, walk_stmts
from tensorir.lower import lower
from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_tensor_core")


def _shared(state) -> dict:
    return {s.buffer.name: s.buffer.shape for s in walk_stmts(lower(state).body)
            if isinstance(s, Allocate) and s.buffer.scope == "shared"}  # fmt: skip


def test_ab_states_have_the_asked_tiles_with_and_without_the_pipeline():
    hw = ansor.HardwareParams(num_cores=132, max_shared_memory_per_block=49152)
    task = ansor.SearchTask(ComputeDAG(bench.workload(512)), target="cuda", hardware_params=hw)
    double = bench.fixed_state(task, 128, 64, 32)
    single = single_buffered(double)
    # Rows padded by 8 halves: a 128x32 tile of A, a 64x32 tile of B, twice over when pipelined.
    assert _shared(single) == {"A_shared": (128, 40), "B_shared": (64, 40)}
    assert _shared(double) == {"A_shared": (2, 128, 40), "B_shared": (2, 64, 40)}
    assert gpu_state_errors(task, single) == [] and gpu_state_errors(task, double) == []
    big = bench.fixed_state(task, 128, 128, 64)  # 36 KiB staged: fits once, not twice
    assert gpu_state_errors(task, single_buffered(big)) == []
    assert any("shared memory" in e for e in gpu_state_errors(task, big))


def test_ab_states_with_deeper_pipelines_have_n_copies_and_the_check_refuses_what_does_not_fit():
    hw = ansor.HardwareParams(num_cores=132, max_shared_memory_per_block=49152)
    task = ansor.SearchTask(ComputeDAG(bench.workload(512)), target="cuda", hardware_params=hw)
    states = dict(bench.ab_states(bench.fixed_state(task, 64, 64, 32), (1, 2, 3, 4)))
    for n, state in states.items():
        want = (64, 40) if n == 1 else (n, 64, 40)
        assert _shared(state) == {"A_shared": want, "B_shared": want}
        assert gpu_state_errors(task, state) == []  # 4 x 10 KiB staged: fits
    big = dict(bench.ab_states(bench.fixed_state(task, 128, 64, 32), (3,)))[3]  # 3 x 15 KiB + 4 KiB
    assert any("shared memory" in e for e in gpu_state_errors(task, big))
