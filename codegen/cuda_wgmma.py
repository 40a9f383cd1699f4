"""Hopper's warpgroup matrix product (``wgmma.mma_async``, sm_90a) as CUDA source pieces.

The CUDA backend renders the warpgroup sketch's kernels with them (:mod:`codegen.cuda_warpgroup`,
the 128-byte swizzle); ``benchmarks/bench_wgmma_probe.py`` builds a hand-written GEMM from them,
in both layouts, to check them on a GPU and measure the instruction alone (docs/gpu.md).

What a ``wgmma`` needs, and what each function here gives:

- Four consecutive warps (a *warpgroup*, 128 threads) issue one ``m64nNk16`` product together.
  Each thread holds ``N / 2`` float32 accumulators; :func:`accumulator_position` says which
  element of the 64 x N tile each one is (the PTX ISA's "Matrix fragments for
  wgmma.m64nNk16", the ``mma.sync`` m16n8 accumulator layout repeated over 4 warps and N / 8
  column blocks).
- A and B come from shared memory through 64-bit *descriptors* (:data:`PRELUDE`,
  ``wgmma_desc``): start address, the byte offset between the two 8 x 16-byte core matrices
  adjacent along K (the leading byte offset) and between adjacent groups of 8 rows (the
  stride byte offset), and a swizzle mode. Two K-major layouts are described here. Without
  swizzling, every 8 rows x 8 halves core matrix is 128 contiguous bytes
  (:func:`core_matrix_offset`), so one 16-byte ``cp.async`` writes one core-matrix row. With
  the 128-byte swizzle, a tile is row-major with rows of 64 halves (128 bytes) whose 16-byte
  chunks are permuted by XOR with the row's index mod 8 (:func:`swizzle128_offset`): the
  layout a row-major shared tile gets from one XOR, and the one CUTLASS uses; it needs the
  tile 1024-byte aligned, as the hardware swizzles on address bits.
- Ordering: shared memory written by ``cp.async`` (the generic proxy) must be fenced with
  ``fence.proxy.async.shared::cta`` before ``wgmma`` (the async proxy) reads it;
  ``wgmma.fence`` before the first product that reads accumulators written by ordinary
  instructions; ``wgmma.commit_group`` / ``wgmma.wait_group N`` to wait for the products.
"""

from __future__ import annotations

__all__ = [
    "CORE_MATRIX_BYTES",
    "PRELUDE",
    "WGMMA_N",
    "accumulator_position",
    "core_matrix_offset",
    "descriptor_byte_offset",
    "swizzle128_offset",
    "swizzle128_read_address",
    "mma_function",
    "mma_function_name",
]

CORE_MATRIX_BYTES = 128
"""One core matrix: 8 rows of 16 bytes (8 halves), contiguous in the no-swizzle layout."""

WGMMA_N = tuple(range(8, 257, 8))
"""The N of ``wgmma.mma_async.m64nNk16`` for 16-bit inputs: multiples of 8 up to 256."""

PRELUDE = r"""#ifndef AUTOSCHED_WGMMA_PRELUDE
#define AUTOSCHED_WGMMA_PRELUDE
// A shared-memory matrix descriptor: bits 0-13 the start address / 16, 16-29 the leading (K)
// byte offset / 16, 32-45 the stride (8-row) byte offset / 16, 62-63 the swizzle (0 none,
// 1 the 128-byte swizzle).
static __device__ __forceinline__ unsigned long long wgmma_desc(const void* smem, unsigned lbo,
                                                                unsigned sbo, unsigned swizzle) {
  unsigned long long addr = (unsigned long long)__cvta_generic_to_shared(smem);
  return ((addr & 0x3FFFFull) >> 4) | ((unsigned long long)((lbo & 0x3FFFFu) >> 4) << 16)
         | ((unsigned long long)((sbo & 0x3FFFFu) >> 4) << 32)
         | ((unsigned long long)(swizzle & 3u) << 62);
}
static __device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
static __device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> static __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
// Shared memory written by cp.async or st.shared, made visible to the wgmma's async proxy.
static __device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
#endif
"""

_PTX_TYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "tf32"}
# K of one product: 32 bytes of each operand row, 16 halves or 8 floats read as TF32.
_K = {"float16": 16, "bfloat16": 16, "float32": 8}


def mma_function_name(n: int, dtype: str = "float16") -> str:
    """The device function :func:`mma_function` defines."""
    return f"wgmma_m64n{n}k{_K[dtype]}_f32_{_PTX_TYPES[dtype]}"


def mma_function(n: int, dtype: str = "float16") -> str:
    """A device function ``void NAME(float* d, unsigned long long desc_a, unsigned long long
    desc_b, int accumulate)``: one ``wgmma.mma_async.m64n{n}k16`` of K-major 16-bit A and B
    (``m64n{n}k8`` for float32, read as TF32: the hardware uses each float's top 19 bits)
    from shared memory into the thread's ``n / 2`` float32 accumulators ``d`` (``accumulate``
    0 overwrites them, as the first product of a tile does).

    Both operands are K-major, the only layout TF32 ``wgmma`` takes; the 16-bit form's
    transpose immediates are 0.

    Raises
    ------
    ValueError
        ``n`` is not a wgmma N (:data:`WGMMA_N`) or ``dtype`` has no wgmma here.
    """
    if n not in WGMMA_N:
        raise ValueError(f"wgmma m64n{n}: N must be a multiple of 8 from 8 to 256")
    if dtype not in _PTX_TYPES:
        raise ValueError(
            f"wgmma: operand dtype {dtype!r}; float16, bfloat16 and float32 (as TF32) are supported"
        )
    regs = n // 2
    ptx = _PTX_TYPES[dtype]
    d_list = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    name = mma_function_name(n, dtype)
    guard = f"AUTOSCHED_{name.upper()}"
    # scale-d (the predicate), then imm-scale-a / imm-scale-b = 1, then (16-bit only)
    # imm-trans-a / imm-trans-b = 0: both K-major.
    immediates = "p, 1, 1" if dtype == "float32" else "p, 1, 1, 0, 0"
    return (
        f"#ifndef {guard}\n#define {guard}\n"
        f"static __device__ __forceinline__ void {name}(float* d, unsigned long long desc_a,\n"
        f"    unsigned long long desc_b, int accumulate) {{\n"
        f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + 2}, 0;\\n"\n'
        f'      "wgmma.mma_async.sync.aligned.m64n{n}k{_K[dtype]}.f32.{ptx}.{ptx} "\n'
        f'      "{{{d_list}}}, %{regs}, %{regs + 1}, {immediates};\\n}}\\n"\n'
        f"      : {outs}\n"
        f'      : "l"(desc_a), "l"(desc_b), "r"(accumulate));\n'
        f"}}\n#endif\n"
    )


def accumulator_position(register: int, thread: int) -> tuple[int, int]:
    """The (row, column) in the 64 x N accumulator tile of float ``register`` (0 .. N/2-1)
    of warpgroup thread ``thread`` (0 .. 127).

    Warp ``w`` holds rows ``16 w .. 16 w + 15``; registers come in fours per 8-column block:
    two neighbouring columns of row ``lane / 4``, then the same columns 8 rows below.
    """
    if not 0 <= thread < 128 or register < 0:
        raise ValueError(f"accumulator_position: thread {thread} of 128, register {register}")
    warp, lane = divmod(thread, 32)
    block, within = divmod(register, 4)
    row = 16 * warp + lane // 4 + 8 * (within // 2)
    col = 8 * block + 2 * (lane % 4) + within % 2
    return row, col


def core_matrix_offset(row: int, k: int, tile_k: int) -> int:
    """Element offset of (``row``, ``k``) in a K-major no-swizzle tile of ``tile_k`` 16-bit
    columns: 8 x 8 core matrices of 128 bytes, K-adjacent ones 128 bytes apart (the
    descriptor's leading byte offset), 8-row groups ``tile_k * 16`` bytes apart (its stride
    byte offset)."""
    if tile_k % 8:
        raise ValueError(f"core_matrix_offset: tile_k {tile_k} is not a multiple of 8")
    return ((row // 8) * (tile_k // 8) + k // 8) * 64 + (row % 8) * 8 + k % 8


def descriptor_byte_offset(row: int, k: int, lbo: int, sbo: int) -> int:
    """Where a ``wgmma`` reads element (``row``, ``k``) of a K-major no-swizzle operand, in
    bytes from the descriptor's start address: 8-row groups ``sbo`` apart, the two 8-column
    halves of the 16 K columns ``lbo`` apart, 16 bytes per core-matrix row (the PTX ISA's
    shared memory matrix layout, 16-bit elements)."""
    if not (0 <= k < 16 and row >= 0):
        raise ValueError(f"descriptor_byte_offset: k {k} of 16, row {row}")
    return (row // 8) * sbo + (k // 8) * lbo + (row % 8) * 16 + (k % 8) * 2


def swizzle128_offset(row: int, k: int) -> int:
    """Element offset of (``row``, ``k``), ``k`` < 64, in a K-major tile with the 128-byte
    swizzle: rows of 64 halves, 16-byte chunk ``k / 8`` stored at chunk ``(k / 8) ^ (row %
    8)``."""
    if not 0 <= k < 64:
        raise ValueError(f"swizzle128_offset: k {k} of a 64-half row")
    return row * 64 + ((k // 8) ^ (row % 8)) * 8 + k % 8


def swizzle128_read_address(start: int, row: int, k: int) -> int:
    """The shared byte address a ``wgmma`` with a 128-byte-swizzle descriptor (stride byte
    offset 1024) starting at ``start`` reads for element (``row``, ``k``), ``k`` < 16: the
    unswizzled address with its bits 4-6 XORed by bits 7-9 (``start``'s atom 1024-aligned)."""
    if not (0 <= k < 16 and row >= 0):
        raise ValueError(f"swizzle128_read_address: k {k} of 16, row {row}")
    plain = start + (row // 8) * 1024 + (row % 8) * 128 + k * 2
    return plain ^ (((plain >> 7) & 7) << 4)
