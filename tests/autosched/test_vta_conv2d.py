"""Packed conv2d and dense on the simulated VTA, bit-exact against the int8 numpy reference."""

import numpy as np
import pytest

from autosched.vta import get_env, top
from codegen.vta import TileConfig, VTAConfigError

ENV = get_env()
RNG = np.random.default_rng(20)


def _int8(*shape):
    return RNG.integers(-128, 128, size=shape, dtype=np.int8)


CASES = [
    # (n, ci, h, w, co, k, stride, pad), config
    ((1, 2, 8, 8, 2, 3, 1, 1), TileConfig(1, 4, 8, 1, 2, 2, 1)),
    ((1, 2, 8, 8, 2, 3, 2, 1), TileConfig(1, 2, 4, 2, 2, 1, 2)),
    ((2, 3, 7, 5, 4, 3, 1, 1), TileConfig(2, 7, 5, 3, 4, 1, 2)),
    ((2, 3, 7, 5, 4, 3, 1, 1), TileConfig(1, 1, 1, 1, 1, 1, 1)),
    ((1, 4, 9, 9, 2, 1, 2, 0), TileConfig(1, 5, 5, 2, 2, 1, 1)),
    ((1, 2, 6, 6, 4, 3, 1, 1), TileConfig(1, 6, 3, 1, 4, 2, 2)),
]


@pytest.mark.parametrize("shape, cfg", CASES)
def test_conv2d_packed_is_bit_exact(shape, cfg):
    n, ci, h, w, co, k, s, p = shape
    data, kern = _int8(n, ci, h, w, 1, 16), _int8(co, ci, k, k, 16, 16)
    wkl = top.conv2d_workload(data.shape, kern.shape, s, p, shift=9)
    out, stats = top.build(wkl, cfg).run(data, kern)
    want = top.conv2d_packed_reference(data, kern, (s, s), (p, p), 9, -127, 127)
    np.testing.assert_array_equal(out, want)
    assert np.mean(np.abs(want) < 127) > 0  # not all clipped: the check can fail
    assert stats.gemm_counter == wkl.gemm_uops
    assert stats.out_store_nbytes == want.size
    assert stats.alu_counter == 3 * want.size // 16
    assert stats.cycles >= wkl.gemm_uops


@pytest.mark.parametrize("cfg", [TileConfig(1, 1, 1, 2, 3), TileConfig(1, 1, 1, 4, 2, 1, 2)])
def test_dense_packed_is_bit_exact(cfg):
    data, weight = _int8(1, 4, 1, 16), _int8(3 * cfg.oc_threading, 4, 16, 16)
    wkl = top.dense_workload(data.shape, weight.shape, shift=8)
    kernel = top.build(wkl, cfg)
    out, stats = kernel.run(data[:, :, None, None], weight[:, :, None, None])
    acc = data.reshape(1, 64).astype(np.int64) @ weight.transpose(0, 2, 1, 3).reshape(-1, 64).T
    want = np.clip(acc.astype(np.int32) >> 8, -127, 127).astype(np.int8)
    np.testing.assert_array_equal(out.reshape(1, -1), want)


@pytest.mark.parametrize(
    "cfg, why",
    [
        (TileConfig(1, 3, 8, 1, 2), "tile_h=3 does not divide its axis of extent 8"),
        (TileConfig(1, 8, 8, 1, 3), "tile_co=3 does not divide its axis of extent 2"),
        (TileConfig(1, 2, 8, 1, 2, h_threading=4), "h_threading=4 does not divide its tile of 2"),
        (TileConfig(1, 8, 8, 2, 2), None),
    ],
)
def test_invalid_configs_are_refused_not_miscompiled(cfg, why):
    wkl = top.conv2d_workload((1, 2, 8, 8, 1, 16), (2, 2, 3, 3, 16, 16), 1, 1)
    if why is None:
        top.build(wkl, cfg)
        return
    with pytest.raises(VTAConfigError, match=why):
        top.build(wkl, cfg)


def test_tiles_that_overflow_a_buffer_are_refused_naming_it():
    # a 28x28 output tile of 4 channel blocks: the accumulator needs 4*28*28 entries.
    wkl = top.conv2d_workload((1, 4, 56, 56, 1, 16), (4, 4, 3, 3, 16, 16), 1, 1)
    with pytest.raises(VTAConfigError, match=r"\d+ acc buffer entries, more than its 2048"):
        top.build(wkl, TileConfig(1, 28, 28, 1, 4))


def test_virtual_threads_hide_load_latency():
    data, kern = _int8(1, 4, 14, 14, 1, 16), _int8(4, 4, 3, 3, 16, 16)
    wkl = top.conv2d_workload(data.shape, kern.shape, 1, 1)
    single, _ = top.build(wkl, TileConfig(1, 14, 14, 1, 2)).run(data, kern)
    cycles = {}
    for h, oc in ((1, 1), (2, 1), (1, 2), (2, 2)):
        out, stats = top.build(wkl, TileConfig(1, 14, 14, 1, 2, h, oc)).run(data, kern)
        np.testing.assert_array_equal(out, single)
        cycles[h, oc] = stats.cycles
    assert cycles[2, 1] < cycles[1, 1] and cycles[1, 2] < cycles[1, 1]


@pytest.mark.parametrize("cfg", [TileConfig(1, 4, 8, 1, 2, 2, 1), TileConfig(1, 8, 4, 2, 2, 1, 2)])
def test_int32_output_through_byte_planes_is_exact(cfg):
    # A graph's nn.conv2d keeps the int32 accumulator: VTA stores it as four int8 planes.
    data, kern = _int8(1, 2, 8, 8, 1, 16), _int8(2, 2, 3, 3, 16, 16)
    wkl = top.conv2d_workload(data.shape, kern.shape, 1, 1, requantize=False)
    out, stats = top.build(wkl, cfg).run(data, kern)
    x = top.unpack_nchw(data)
    w = kern.transpose(0, 4, 1, 5, 2, 3).reshape(32, 32, 3, 3)
    want = top.pack_nchw(
        top.reference.conv2d_nchw_int(x, w, (1, 1), (1, 1)).astype(np.int32), 1, 16
    )
    assert out.dtype == np.int32 and np.abs(want).max() > 1 << 16  # all four bytes matter
    np.testing.assert_array_equal(out, want)
    assert stats.out_store_nbytes == 4 * want.size
