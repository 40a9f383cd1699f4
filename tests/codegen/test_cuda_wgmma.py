"""codegen/cuda_wgmma.py and the probe GEMM built from it, without a GPU: the accumulator and
shared-memory layouts are bijections with the documented shapes, a numpy emulation of the
probe's index arithmetic (its cp.async stores, the descriptors' reads, the epilogue) gives
A @ B.T on random inputs, and nvcc compiles the probe for sm_90a into ``wgmma`` PTX. Whether
the GPU agrees is checked by ``benchmarks/bench_wgmma_probe.py`` on one (docs/gpu.md)."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from codegen.cuda_warpgroup import swizzled_index
from codegen.cuda_wgmma import (
    CORE_MATRIX_BYTES,
    accumulator_position,
    core_matrix_offset,
    descriptor_byte_offset,
    mma_function,
    mma_function_name,
    swizzle128_offset,
    swizzle128_read_address,
)
from tests.benchmarks.bench_loader import load_bench

probe = load_bench("bench_wgmma_probe")
NVCC = shutil.which("nvcc") or shutil.which("nvcc", path="/usr/local/cuda/bin")


@pytest.mark.parametrize("n", [8, 64, 256])
def test_accumulators_cover_the_64_by_n_tile_once(n):
    seen = {accumulator_position(r, t) for t in range(128) for r in range(n // 2)}
    assert len(seen) == 64 * n
    assert seen == {(i, j) for i in range(64) for j in range(n)}


def test_accumulator_layout_is_the_mma_m16n8_layout_per_warp():
    assert [accumulator_position(r, 0) for r in range(5)] == [(0, 0), (0, 1), (8, 0), (8, 1),
                                                              (0, 8)]  # fmt: skip
    assert accumulator_position(0, 1) == (0, 2)  # lanes 0-3 share a row, two columns each
    assert accumulator_position(0, 4) == (1, 0)
    assert accumulator_position(0, 32) == (16, 0)  # warp 1 holds rows 16-31
    with pytest.raises(ValueError, match="thread 128"):
        accumulator_position(0, 128)


def test_core_matrices_are_128_contiguous_bytes_and_the_tile_is_a_bijection():
    rows, tile_k = 32, 64
    offsets = {(r, k): core_matrix_offset(r, k, tile_k) for r in range(rows) for k in range(tile_k)}
    assert sorted(offsets.values()) == list(range(rows * tile_k))
    for r0, k0 in [(0, 0), (8, 16), (24, 56)]:
        block = sorted(offsets[r0 + i, k0 + j] for i in range(8) for j in range(8))
        assert block[-1] - block[0] == CORE_MATRIX_BYTES // 2 - 1  # 64 halves, contiguous
    assert offsets[0, 8] - offsets[0, 0] == 64  # leading byte offset: 128 bytes
    assert offsets[8, 0] - offsets[0, 0] == tile_k * 8  # stride byte offset: tile_k * 16 bytes
    with pytest.raises(ValueError, match="multiple of 8"):
        core_matrix_offset(0, 0, 12)


def test_descriptor_reads_match_the_core_matrix_stores():
    tile_k = 64
    for row in range(64):
        for k in range(16):
            for step in range(tile_k // 16):
                stored = core_matrix_offset(row, 16 * step + k, tile_k) * 2
                start = step * 128 * 2  # the probe's a + kk * 128 halves
                read = start + descriptor_byte_offset(row, k, lbo=128, sbo=tile_k * 16)
                assert read == stored


def test_swizzled_rows_are_permuted_chunks_and_reads_find_the_stores():
    offsets = [swizzle128_offset(r, k) for r in range(16) for k in range(64)]
    assert sorted(offsets) == list(range(16 * 64))
    assert swizzle128_offset(3, 8) == 3 * 64 + 2 * 8  # chunk 1 of row 3 stored at chunk 1 ^ 3
    for step in range(4):  # a K step starts 32 bytes further into the 1024-aligned atom
        for row in range(64):
            for k in range(16):
                read = swizzle128_read_address(step * 32, row, k)
                assert read == 2 * swizzle128_offset(row, 16 * step + k)
    with pytest.raises(ValueError, match="64-half row"):
        swizzle128_offset(0, 64)


def _emulate_probe(a, b, bm, bn, bk, layout="interleave"):
    """The probe kernel's index arithmetic in numpy: cp.async stores of each K tile in the
    layout, wgmma reads through the descriptors it builds, epilogue stores."""
    m, k = a.shape
    n = b.shape[0]
    c = np.zeros((m, n), np.float32)
    chunks = bk // 8
    for m0 in range(0, m, bm):
        for n0 in range(0, n, bn):
            acc = np.zeros((bm // 64, 128, bn // 2), np.float32)
            for k0 in range(0, k, bk):
                s_a, s_b = np.zeros(bm * bk, a.dtype), np.zeros(bn * bk, b.dtype)
                for buf, src, rows, r0 in ((s_a, a, bm, m0), (s_b, b, bn, n0)):  # load_stage
                    for cidx in range(rows * chunks):
                        r, kc = divmod(cidx, chunks)
                        if layout == "interleave":
                            dst = ((r // 8) * chunks + kc) * 64 + (r % 8) * 8
                        else:
                            dst = r * 64 + (kc ^ (r % 8)) * 8
                        buf[dst : dst + 8] = src[r0 + r, k0 + kc * 8 : k0 + kc * 8 + 8]
                for wg in range(bm // 64):
                    a_base = wg * 64 * bk
                    for kk in range(bk // 16):

                        def tile(buf, base, rows, kk=kk):
                            out = np.empty((rows, 16), np.float32)
                            for i in range(rows):
                                for j in range(16):
                                    if layout == "interleave":
                                        byte = descriptor_byte_offset(i, j, 128, bk * 16)
                                        out[i, j] = buf[base + kk * 128 + byte // 2]
                                    else:  # byte addresses from the 1024-aligned buffer
                                        at = swizzle128_read_address(2 * base + 32 * kk, i, j)
                                        out[i, j] = buf[at // 2]
                            return out

                        prod = tile(s_a, a_base, 64) @ tile(s_b, 0, bn).T
                        for t in range(128):
                            for reg in range(bn // 2):
                                i, j = accumulator_position(reg, t)
                                acc[wg, t, reg] += prod[i, j]
            for wg in range(bm // 64):  # the epilogue's row and column formulas
                for t in range(128):
                    warp, lane = divmod(t, 32)
                    for jb in range(bn // 8):
                        for h in range(2):
                            row = m0 + wg * 64 + warp * 16 + lane // 4 + 8 * h
                            col = n0 + 8 * jb + 2 * (lane % 4)
                            c[row, col] = acc[wg, t, 4 * jb + 2 * h]
                            c[row, col + 1] = acc[wg, t, 4 * jb + 2 * h + 1]
    return c


@pytest.mark.parametrize("layout,bk", [("interleave", 32), ("swizzle128", 64)])
def test_the_probe_index_arithmetic_computes_a_times_b_transposed(layout, bk):
    rng = np.random.default_rng(3)
    m, n, k = 128, 16, 128
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (n, k)).astype(np.float16)
    got = _emulate_probe(a, b, bm=128, bn=16, bk=bk, layout=layout)
    want = a.astype(np.float32) @ b.astype(np.float32).T
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_mma_function_operands_and_refusals():
    src = mma_function(64, "bfloat16")
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in src
    assert src.count('"+f"(d[') == 32 and "%32, %33, p" in src and "%34, 0" in src
    assert mma_function_name(64, "bfloat16") in src
    with pytest.raises(ValueError, match="multiple of 8"):
        mma_function(12)
    tf32 = mma_function(32, "float32")  # TF32: k8, no transpose immediates (K-major only)
    assert "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32" in tf32
    assert "%16, %17, p, 1, 1;" in tf32 and mma_function_name(32, "float32") in tf32
    with pytest.raises(ValueError, match="float32"):
        mma_function(64, "int8")


def test_probe_refuses_tiles_it_cannot_run():
    with pytest.raises(ValueError, match="BM 96"):
        probe.gemm_source(96, 128, 64, 4)
    with pytest.raises(ValueError, match="stages 1"):
        probe.gemm_source(128, 128, 64, 1)
    with pytest.raises(ValueError, match="stages 2: at least 3 with inflight 1"):
        probe.gemm_source(128, 128, 64, 2, inflight=1)
    with pytest.raises(ValueError, match="inflight 2"):
        probe.gemm_source(128, 128, 64, 4, inflight=2)
    assert probe._tiles("128x256x64x4x1,64x64x32x2") == [(128, 256, 64, 4, 1), (64, 64, 32, 2, 0)]
    with pytest.raises(ValueError, match="BK 32: the 128-byte swizzle"):
        probe.gemm_source(128, 128, 32, 4, layout="swizzle128")
    assert probe.shared_bytes(128, 256, 64, 3) == 3 * 384 * 64 * 2


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize(
    "tile,layout",
    [((128, 128, 64, 4, 0), "interleave"), ((64, 256, 32, 3, 0), "interleave"),
     ((128, 128, 64, 4, 1), "swizzle128")],
)  # fmt: skip
def test_probe_compiles_for_sm90a_to_wgmma(tmp_path, tile, layout):
    cu = tmp_path / "probe.cu"
    cu.write_text(probe.gemm_source(*tile, layout=layout))
    ptx = tmp_path / "probe.ptx"
    run = [NVCC, "-arch=sm_90a", "-std=c++17"]
    subprocess.run([*run, "-ptx", "-o", str(ptx), str(cu)], check=True, capture_output=True)
    text = ptx.read_text()
    bm, bn, bk, stages, inflight = tile
    assert len(re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{bn}k16", text)) == bk // 16
    assert "fence.proxy.async.shared::cta" in text
    assert f"cp.async.wait_group {stages - 2 - inflight}" in text
    assert f"wgmma.wait_group.sync.aligned {inflight}" in text
    done = subprocess.run([*run, "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "p.cubin"),
                           str(cu)], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "0 bytes spill stores" in done.stderr


def test_the_32_bit_swizzle_permutes_the_same_16_byte_chunks():
    """Rows of 32 floats: the same 128-byte rows and 16-byte chunks as 64 halves."""
    swz32 = eval(f"lambda i: {swizzled_index('i', 32)}")  # noqa: S307 - our own C/Python text
    swz64 = eval(f"lambda i: {swizzled_index('i', 64)}")  # noqa: S307
    assert sorted(swz32(i) for i in range(32 * 64)) == list(range(32 * 64))
    for r in range(64):
        for c in range(32):  # float (r, c) is bytes 4c..4c+3: halves 2c and 2c + 1
            assert 2 * swz32(r * 32 + c) == swz64(r * 64 + 2 * c)
    with pytest.raises(ValueError, match="rows of 16"):
        swizzled_index("i", 16)


def test_the_renderer_swizzle_is_the_layout_wgmma_reads():
    """codegen.cuda_warpgroup.swizzled_index (C text, also valid Python) stores element (r, c)
    of 64-element rows where swizzle128_offset says, and a descriptor starting at any 8-row,
    16-column step of a 1024-aligned tile reads each element back from there."""
    swz = eval(f"lambda i: {swizzled_index('i')}")  # noqa: S307 - our own C/Python text
    assert sorted(swz(i) for i in range(64 * 64)) == list(range(64 * 64))
    for r in range(64):
        for c in range(64):
            assert swz(r * 64 + c) == swizzle128_offset(r, c)
    for r0 in range(0, 64, 8):
        for k0 in range(0, 64, 16):
            start = 2 * (r0 * 64 + k0)  # bytes: the descriptor's start address
            for row in range(64 - r0):
                for k in range(16):
                    want = 2 * swz((r0 + row) * 64 + k0 + k)
                    assert swizzle128_read_address(start, row, k) == want


def test_cubins_that_use_wgmma_compile_for_sm_90a():
    from runtime.cuda import feature_arch

    assert feature_arch('asm("wgmma.mma_async.sync...")', "sm_90") == "sm_90a"
    assert feature_arch("mma.sync", "sm_90") == "sm_90"
    assert feature_arch("wgmma.mma_async", "sm_80") == "sm_80"  # (the code has a fallback)


def test_dynamic_shared_arrays_keep_their_alignment():
    from codegen.cuda_shared import SharedArray, shared_declarations

    arrays = [SharedArray("s", "float", 3000, 4), SharedArray("a", "half", 16384, 2, 1024),
              SharedArray("b", "half", 8192, 2, 1024)]  # fmt: skip
    body, _ = shared_declarations(arrays, "k")
    assert "__align__(1024)" in body[0]
    offsets = [int(re.search(r"\+ (\d+)\)", line).group(1)) for line in body[1:]]
    assert offsets[0] == 0 and offsets[1] % 1024 == 0 and offsets[2] % 1024 == 0
    assert offsets[1] >= 12000 and offsets[2] >= offsets[1] + 32768
