"""benchmarks/tf32_rounding_error.py: the study's swap of conv2d's reference is undone (its TF32
values are tensorir.dtype's: tests/tensorir/test_tf32_values.py)."""

from __future__ import annotations

from tensorir.dtype import round_to_tf32, truncate_to_tf32
from tensorir.graph.shapes import get_op
from tests.benchmarks.bench_loader import load_bench

bench = load_bench("tf32_rounding_error")


def test_the_conv_reference_is_restored():
    entry = get_op("nn.conv2d")
    before = entry.reference
    with bench.conv_operands(round_to_tf32, truncate_to_tf32):
        assert entry.reference is not before
    assert get_op("nn.conv2d").reference is before
