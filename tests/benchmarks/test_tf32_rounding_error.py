"""benchmarks/tf32_rounding_error.py: its TF32 truncation and rounding, and that the study's
swap of conv2d's reference is undone."""

from __future__ import annotations

import numpy as np

from tensorir.graph.shapes import get_op
from tests.benchmarks.bench_loader import load_bench

bench = load_bench("tf32_rounding_error")


def test_truncation_and_rounding_keep_ten_mantissa_bits():
    ulp = 2.0**-10  # TF32's last mantissa bit at 1.0
    x = np.array([1 + ulp / 4, 1 + 3 * ulp / 4, 1 + ulp / 2, 1 + 3 * ulp / 2, -(1 + 3 * ulp / 4)],
                 np.float32)  # fmt: skip
    np.testing.assert_array_equal(bench.truncate_tf32(x), [1, 1, 1, 1 + ulp, -1])
    # To nearest; ties to even: 1 + ulp/2 -> 1, 1 + 3ulp/2 -> 1 + 2ulp.
    np.testing.assert_array_equal(bench.round_tf32(x), [1, 1 + ulp, 1, 1 + 2 * ulp, -(1 + ulp)])
    r = np.random.default_rng(4).normal(0, 3, 1000).astype(np.float32)
    for cut in (bench.truncate_tf32, bench.round_tf32):
        assert not (cut(r).view(np.uint32) & np.uint32(0x1FFF)).any()
    assert np.abs(bench.round_tf32(r) - r).max() <= np.abs(bench.truncate_tf32(r) - r).max()


def test_the_conv_reference_is_restored():
    entry = get_op("nn.conv2d")
    before = entry.reference
    with bench.conv_operands(bench.round_tf32, bench.round_tf32):
        assert entry.reference is not before
    assert get_op("nn.conv2d").reference is before
