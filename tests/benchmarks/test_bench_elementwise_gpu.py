"""benchmarks/bench_elementwise_gpu.py's byte count (no GPU needed): what a group without a
reduction reads and writes once, from which the bench prints the bandwidth it reaches."""

from __future__ import annotations

from tensorir import te
from tensorir.dag import ComputeDAG
from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_elementwise_gpu")


def test_moved_bytes_counts_every_input_and_output_once():
    x = te.placeholder((2, 8, 8, 32), name="x", dtype="float16")
    b = te.placeholder((32,), name="b", dtype="float16")
    y = te.compute(x.shape, lambda n, h, w, c: te.max(x[n, h, w, c] + b[c], 0), name="y")
    # x and y: 2 x 8 x 8 x 32 float16 values each, b: 32 of them
    assert bench.moved_bytes(ComputeDAG([x, b, y])) == 2 * (2 * 8 * 8 * 32) * 2 + 32 * 2
