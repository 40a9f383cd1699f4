"""A hand-built Hopper ``wgmma`` GEMM from :mod:`codegen.cuda_wgmma`, against cuBLAS.

    python benchmarks/bench_wgmma_probe.py                 # 4096^3 fp16, several tiles
    python benchmarks/bench_wgmma_probe.py --emit          # print one kernel's source (no GPU)

Not a tuned kernel and not the tensor-core sketch: a probe, to check the ``wgmma`` pieces
(descriptors, the no-swizzle core-matrix layout written by ``cp.async``, the accumulator
layout) on a GPU against numpy, and to measure what a plain warpgroup main loop gives on
sm_90 before the sketch learns it (docs/gpu.md, "What limits the tensor-core kernels").
``C = A @ B.T`` with A (M, K) and B (N, K) row-major float16 and float32 accumulators. One
block holds ``BM / 64`` warpgroups, each computing 64 rows by BN columns with
``wgmma.m64n{BN}k16``. K tiles of BK columns move through STAGES shared buffers by
``cp.async``. Each tile's products are waited on before the next tile (``wgmma.wait_group 0``).
M, N and K must be multiples of the tile.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torch_timing import cuda_event_ms  # noqa: E402  (run from benchmarks/)

from codegen.cuda_async import cp_async_prelude  # noqa: E402
from codegen.cuda_wgmma import PRELUDE, mma_function, mma_function_name  # noqa: E402

KERNEL = "wgmma_gemm"


def shared_bytes(bm: int, bn: int, bk: int, stages: int) -> int:
    """Dynamic shared memory of the kernel: ``stages`` copies of the A and B tiles."""
    return stages * (bm + bn) * bk * 2


LAYOUTS = ("interleave", "swizzle128")


def gemm_source(bm: int = 128, bn: int = 128, bk: int = 64, stages: int = 4,
                inflight: int = 0, layout: str = "interleave") -> str:  # fmt: skip
    """CUDA source of ``KERNEL(const half* A, const half* B, half* C, int M, int N, int K)``;
    launch with ``(N / bn, M / bm)`` blocks of ``32 * bm / 16`` threads and
    :func:`shared_bytes` of dynamic shared memory.

    ``inflight`` 0 waits for each K tile's products before the next tile; 1 leaves one tile's
    products running while the next is issued, so copies run ``stages - 2`` tiles ahead
    instead of ``stages - 1`` (the stage still being read is not refilled). ``layout`` is the
    shared tiles' order (:mod:`codegen.cuda_wgmma`): ``interleave``, 8 x 8 core matrices
    without swizzling, or ``swizzle128``, rows of 64 halves with the 128-byte swizzle (BK 64).

    Raises
    ------
    ValueError
        A tile the kernel cannot run: BM not a multiple of 64, BN not a wgmma N, BK not a
        multiple of 16, fewer than 2 stages.
    """
    if bm % 64 or bm <= 0:
        raise ValueError(f"BM {bm}: a multiple of 64 (one warpgroup per 64 rows)")
    if bk % 16 or bk <= 0:
        raise ValueError(f"BK {bk}: a multiple of 16 (the wgmma K)")
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: one of {LAYOUTS}")
    if layout == "swizzle128" and bk != 64:
        raise ValueError(f"BK {bk}: the 128-byte swizzle takes rows of 64 halves (BK 64)")
    if inflight not in (0, 1):
        raise ValueError(f"inflight {inflight}: 0 or 1 tiles of products left running")
    if stages < 2 + inflight:
        raise ValueError(f"stages {stages}: at least {2 + inflight} with inflight {inflight}")
    ahead = stages - 1 - inflight  # K tiles copied ahead of the one multiplied
    if layout == "interleave":  # row r, chunk kc -> core matrix (r / 8, kc), its row r % 8
        store = f"((r / 8) * {bk // 8} + kc) * 64 + (r % 8) * 8"
        # K step kk: core-matrix columns 2 kk and 2 kk + 1 (128 bytes apart); 8-row groups
        # BK * 16 bytes apart
        desc = "wgmma_desc({} + kk * 128, 128, BK * 16, 0)"
    else:  # row r of 128 bytes, chunk kc stored at kc ^ (r % 8)
        store = "r * 64 + (kc ^ (r % 8)) * 8"
        # K step kk: 32 bytes into each row (the hardware swizzles the address); 8-row groups
        # 1024 bytes apart; the leading byte offset is unused (1)
        desc = "wgmma_desc({} + kk * 16, 16, 1024, 1)"
    mma = mma_function(bn)  # raises for a BN that is no wgmma N
    threads = 2 * bm  # 128 threads per 64 rows
    chunks = bk // 8  # 16-byte chunks per tile row = core matrices along K
    return f"""#include <cuda_fp16.h>
{cp_async_prelude((ahead - 1,))}{PRELUDE}{mma}
#define BM {bm}
#define BN {bn}
#define BK {bk}
#define STAGES {stages}
#define THREADS {threads}

// One K tile of A (BM x BK) and B (BN x BK) into stage s, in the {layout} layout.
static __device__ __forceinline__ void load_stage(const half* A, const half* B, half* sA,
    half* sB, int m0, int n0, int k0, int K, int s) {{
  for (int c = threadIdx.x; c < BM * {chunks}; c += THREADS) {{
    int r = c / {chunks}, kc = c % {chunks};
    cp_async16(sA + s * BM * BK + {store},
               A + (size_t)(m0 + r) * K + k0 + kc * 8);
  }}
  for (int c = threadIdx.x; c < BN * {chunks}; c += THREADS) {{
    int r = c / {chunks}, kc = c % {chunks};
    cp_async16(sB + s * BN * BK + {store},
               B + (size_t)(n0 + r) * K + k0 + kc * 8);
  }}
}}

extern "C" __global__ void __launch_bounds__(THREADS) {KERNEL}(const half* __restrict__ A,
    const half* __restrict__ B, half* __restrict__ C, int M, int N, int K) {{
  extern __shared__ __align__(1024) unsigned char smem[];  // swizzle atoms are 1024 bytes
  half* sA = reinterpret_cast<half*>(smem);
  half* sB = sA + STAGES * BM * BK;
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int tiles = K / BK;
  float d[BN / 2];
  #pragma unroll
  for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
  for (int s = 0; s < {ahead}; ++s) {{
    if (s < tiles) load_stage(A, B, sA, sB, m0, n0, s * BK, K, s);
    cp_async_commit();
  }}
  for (int kt = 0; kt < tiles; ++kt) {{
    cp_async_wait_group{ahead - 1}();  // tile kt has landed ({ahead - 1} newer in flight)
    fence_async_shared();  // ... and is visible to the wgmma (async proxy)
    __syncthreads();  // every thread's part; the stage of tile kt - {1 + inflight} is free
    if (kt + {ahead} < tiles)
      load_stage(A, B, sA, sB, m0, n0, (kt + {ahead}) * BK, K, (kt + {ahead}) % STAGES);
    cp_async_commit();
    const half* a = sA + (kt % STAGES) * BM * BK + wg * 64 * BK;  // its 64 rows
    const half* b = sB + (kt % STAGES) * BN * BK;
    wgmma_fence();
    #pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {{
      {mma_function_name(bn)}(d, {desc.format("a")}, {desc.format("b")}, 1);
    }}
    wgmma_commit();
    wgmma_wait<{inflight}>();
  }}
  wgmma_wait<0>();
  const int warp = t / 32, lane = t % 32;
  #pragma unroll
  for (int j = 0; j < BN / 8; ++j) {{
    #pragma unroll
    for (int h = 0; h < 2; ++h) {{
      int row = m0 + wg * 64 + warp * 16 + lane / 4 + 8 * h;
      int col = n0 + 8 * j + 2 * (lane % 4);
      *reinterpret_cast<__half2*>(C + (size_t)row * N + col) =
          __floats2half2_rn(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
    }}
  }}
}}
"""


def _tiles(text: str) -> list[tuple[int, int, int, int, int]]:
    """``BMxBNxBKxSTAGES[xINFLIGHT]`` items, comma-separated."""
    tiles = []
    for item in text.split(","):
        numbers = [int(x) for x in item.split("x")]
        if len(numbers) not in (4, 5):
            raise argparse.ArgumentTypeError(f"tile {item!r}: BMxBNxBKxSTAGES[xINFLIGHT]")
        tiles.append(tuple(numbers + [0] * (5 - len(numbers))))
    return tiles


def run(args) -> list[dict]:
    """Each tile: build (nvcc via pycuda, ``-arch=sm_90a``), check against numpy, time."""
    import pycuda.driver as cuda
    import torch
    from pycuda.compiler import SourceModule

    torch.cuda.init()  # the device's primary context, shared with pycuda below, so that
    cuda.init()  # kernels built by pycuda may read torch's allocations
    context = cuda.Device(torch.cuda.current_device()).retain_primary_context()
    context.push()

    n = args.n
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (n, n)).astype("float16")
    b = rng.uniform(-1, 1, (n, n)).astype("float16")
    want = a.astype("float32") @ b.astype("float32").T
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    cublas_ms = cuda_event_ms(lambda: torch.matmul(ta, tb.T))
    rows = []
    for (bm, bn, bk, stages, inflight), layout in args.runs:
        row = {"tile": f"{bm}x{bn}x{bk}", "stages": stages, "inflight": inflight,
               "layout": layout, "n": n}  # fmt: skip
        try:
            source = gemm_source(bm, bn, bk, stages, inflight, layout)
            mod = SourceModule(source, arch="sm_90a", no_extern_c=True,
                               options=["-std=c++17"])  # fmt: skip
            fn = mod.get_function(KERNEL)
            smem = shared_bytes(bm, bn, bk, stages)
            fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
            tc = torch.empty((n, n), dtype=torch.float16, device="cuda")
            grid, block = (n // bn, n // bm, 1), (2 * bm, 1, 1)

            def launch(fn=fn, tc=tc, grid=grid, block=block, smem=smem):
                fn(np.uintp(ta.data_ptr()), np.uintp(tb.data_ptr()), np.uintp(tc.data_ptr()),
                   np.int32(n), np.int32(n), np.int32(n), grid=grid, block=block,
                   shared=smem)  # fmt: skip

            launch()
            torch.cuda.synchronize()
            err = float(np.abs(tc.float().cpu().numpy() - want).max())
            ms = cuda_event_ms(launch)
            row.update(ms=ms, tflops=2 * n**3 / ms / 1e9, max_abs_err=err,
                       cublas_ms=cublas_ms, fraction_of_cublas=cublas_ms / ms)  # fmt: skip
        except Exception as e:  # a tile that fails to build or run: say so, go on
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        print(json.dumps(row), flush=True)
        rows.append(row)
    context.pop()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=4096, help="M = N = K")
    default_tiles = "128x128x64x4,128x128x64x4x1,128x256x64x3,128x256x64x4x1,64x128x64x4"
    p.add_argument("--tiles", type=_tiles, default=_tiles(default_tiles),
                   help="BMxBNxBKxSTAGES[xINFLIGHT], comma-separated")  # fmt: skip
    p.add_argument("--layouts", default=",".join(LAYOUTS),
                   help="shared layouts for each tile (swizzle128 only for BK 64)")  # fmt: skip
    p.add_argument("--emit", action="store_true", help="print the first run's source and stop")
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args()
    layouts = args.layouts.split(",")
    if not set(layouts) <= set(LAYOUTS):
        p.error(f"--layouts {args.layouts}: from {LAYOUTS}")
    args.runs = [(t, lay) for t in args.tiles for lay in layouts
                 if lay != "swizzle128" or t[2] == 64]  # fmt: skip
    if args.emit:
        print(gemm_source(*args.runs[0][0], layout=args.runs[0][1]))
        return
    for bm, bn, bk, _, _ in args.tiles:
        if args.n % bm or args.n % bn or args.n % bk:
            p.error(f"--n {args.n} is not a multiple of the tile {bm}x{bn}x{bk}")
    rows = run(args)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
