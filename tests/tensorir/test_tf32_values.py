"""tensorir.dtype's TF32 values: truncation (what TF32 ``wgmma`` reads) and rounding to
nearest, ties away from zero (what wmma's ``__float_to_tf32`` does, and what a network build
stores for float32 weights that warpgroups read)."""

from __future__ import annotations

import numpy as np

from tensorir.dtype import round_to_tf32, truncate_to_tf32

ULP = 2.0**-10  # TF32's last mantissa bit at 1.0


def test_truncation_and_rounding_keep_ten_mantissa_bits():
    x = np.array([1 + ULP / 4, 1 + 3 * ULP / 4, 1 + ULP / 2, 1 + 3 * ULP / 2, -(1 + ULP / 2)],
                 np.float32)  # fmt: skip
    np.testing.assert_array_equal(truncate_to_tf32(x), [1, 1, 1, 1 + ULP, -1])
    # To nearest; ties away from zero: 1 + ulp/2 -> 1 + ulp, -(1 + ulp/2) -> -(1 + ulp).
    np.testing.assert_array_equal(round_to_tf32(x), [1, 1 + ULP, 1 + ULP, 1 + 2 * ULP, -(1 + ULP)])


def test_rounding_is_to_the_nearer_of_the_two_tf32_neighbours():
    r = np.random.default_rng(4).normal(0, 3, 2000).astype(np.float32)
    for cut in (truncate_to_tf32, round_to_tf32):
        assert not (cut(r).view(np.uint32) & np.uint32(0x1FFF)).any()
    down = truncate_to_tf32(r)  # toward zero
    step = np.spacing(np.abs(down)).astype(np.float64) * 2**13  # float32's ulp -> TF32's
    down = down.astype(np.float64)
    up = down + np.sign(r) * step
    nearer = np.where(np.abs(r - down) < np.abs(r - up), down, up)
    np.testing.assert_array_equal(round_to_tf32(r).astype(np.float64), nearer)
    assert np.abs(round_to_tf32(r) - r).max() < np.abs(truncate_to_tf32(r) - r).max()


def test_special_values_and_shapes_are_kept():
    x = np.array([[np.inf, -np.inf], [np.nan, 0.0]], np.float32)
    out = round_to_tf32(x)
    assert out.shape == (2, 2) and np.isnan(out[1, 0]) and out[1, 1] == 0
    assert out[0, 0] == np.inf and out[0, 1] == -np.inf
    assert round_to_tf32(np.float32(1 + ULP / 2)).shape == ()
    assert truncate_to_tf32(np.float64(1.5)).dtype == np.float32
