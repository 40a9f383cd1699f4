"""Hand-written schedules for the benchmark operators: the baseline before any tuning.

They use only the public scheduling language (``State`` steps), so they double as examples
of it. ``matmul_cpu`` is the classic register-blocked GEMM: an 8x32 (AVX-512) or 6x16 (AVX2)
tile of C lives in a local buffer held in vector registers while the whole k loop runs over it.
"""

from __future__ import annotations

from tensorir.dag import ComputeDAG


def _stage(state, name):
    return next(s for s in state.stages if s.name == name)


def _it(state, stage_name, iter_name):
    return next(it for it in _stage(state, stage_name).iters if it.name == iter_name)


def _host_vector_lanes() -> int:
    from .hardware import HardwareParams

    return HardwareParams.for_target("llvm").vector_unit_bytes // 4


def matmul_cpu(dag: ComputeDAG, out: str = "C", tile_i: int | None = None,
               tile_j: int | None = None, reg_i: int | None = None,
               reg_j: int | None = None):  # fmt: skip
    """C[i, j] = sum_k A[i, k] * B[k, j] tiled for the CPU (parallel, vectorized, unrolled).

    The register tile defaults to two vectors wide and as many rows as the vector registers
    allow with room for the B loads and the A broadcast: 8x32 with AVX-512 (16 of 32 zmm
    registers accumulate), 6x16 with AVX2 (12 of 16 ymm). Fewer accumulators than
    ~2 FMA units x 4 cycles of latency leave the FMA units idle (4x16 on AVX-512 ran at a third
    of the 8x32 speed on 1024^3).
    """
    lanes = _host_vector_lanes()
    wide = lanes >= 16
    reg_i = reg_i or (8 if wide else 6)
    reg_j = reg_j or 2 * lanes
    tile_i = tile_i or 8 * reg_i
    tile_j = tile_j or max(64, reg_j)
    s = dag.get_init_state()
    s.cache_write(out, "local")
    local = f"{out}.local"
    i, j = s[out].iters
    io, ii, ir = s.split(out, i, [tile_i // reg_i, reg_i])
    jo, ji, jr = s.split(out, j, [tile_j // reg_j, reg_j])
    s.reorder(out, [io, jo, ji, ii, ir, jr])
    fused = s.fuse(out, [io, jo])
    s.parallel(out, fused)
    s.vectorize(out, _it(s, out, jr.name))
    s.compute_at(local, out, _it(s, out, ii.name))
    li, lj, lk = s[local].iters
    s.reorder(local, [lk, li, lj])
    s.unroll(local, _it(s, local, li.name))
    s.vectorize(local, _it(s, local, lj.name))
    return s


def conv2d_nhwc_cpu(dag: ComputeDAG, out: str = "T_relu", reg_x: int = 4, reg_f: int = 16):
    """conv2d NHWC (+bias+relu) tiled like a GEMM over (x, f), the reduction innermost-but-two."""
    s = dag.get_init_state()
    names = [st.name for st in s.stages]
    for name in names:
        if name.startswith("T_add") or name == "T_bias_add":
            s.compute_inline(name)
    conv = "Conv2dOutput"
    n, y, x, f = s[out].iters
    xo, xi = s.split(out, x, [reg_x])
    fo, fi = s.split(out, f, [reg_f])
    s.reorder(out, [n, y, xo, fo, xi, fi])
    fused = s.fuse(out, [n, y, xo])
    s.parallel(out, fused)
    s.vectorize(out, _it(s, out, fi.name))
    s.compute_at(conv, out, _it(s, out, fo.name))
    cn, cy, cx, cf, ry, rx, rc = s[conv].iters
    s.reorder(conv, [cn, cy, ry, rx, rc, cx, cf])
    s.unroll(conv, _it(s, conv, cx.name))
    s.vectorize(conv, _it(s, conv, cf.name))
    return s


def matmul_gpu(dag: ComputeDAG, out: str = "C", block: int = 64, thread: int = 4, tile_k: int = 8):
    """A classic shared-memory GEMM: 64x64 tiles per block, 4x4 per thread, k tiles of 8."""
    s = dag.get_init_state()
    a, b = (t.name for t in dag.input_tensors)
    s.cache_write(out, "local")
    local = f"{out}.local"
    i, j = s[out].iters
    bi, ti, ii = s.split(out, i, [block // thread, thread])
    bj, tj, jj = s.split(out, j, [block // thread, thread])
    s.reorder(out, [bi, bj, ti, tj, ii, jj])
    bx = s.fuse(out, [bi, bj])
    tx = s.fuse(out, [_it(s, out, ti.name), _it(s, out, tj.name)])
    s.bind(out, bx, "blockIdx.x")
    s.bind(out, tx, "threadIdx.x")
    s.compute_at(local, out, tx)
    li, lj, lk = s[local].iters
    ko, ki = s.split(local, lk, [tile_k])
    s.reorder(local, [ko, ki, _it(s, local, li.name), _it(s, local, lj.name)])
    nthreads = (block // thread) ** 2
    for src in (a, b):
        shared = s.cache_read(src, "shared", [local]).name
        s.compute_at(shared, local, _it(s, local, ko.name))
        fused = s.fuse(shared, list(s[shared].iters))
        _, tid = s.split(shared, fused, [nthreads])
        s.bind(shared, _it(s, shared, tid.name), "threadIdx.x")
    s.unroll(local, _it(s, local, ki.name))
    return s


def elementwise_gpu(s, stage: str, threads: int = 128):
    """Bind every loop of a root stage to blockIdx.x/threadIdx.x (fuse, then split)."""
    fused = s.fuse(stage, list(s[stage].iters))
    bx, tx = s.split(stage, fused, [threads])
    s.bind(stage, bx, "blockIdx.x")
    s.bind(stage, tx, "threadIdx.x")
    return s


def conv2d_nhwc_gpu(dag: ComputeDAG, out: str = "T_relu", threads: int = 64):
    """A direct conv2d on the GPU: one thread per output element, padding and bias inlined."""
    s = dag.get_init_state()
    for st in list(s.stages):
        if st.name in ("PaddedInput",) or st.name.startswith("T_add"):
            s.compute_inline(st.name)
    conv = "Conv2dOutput"
    n, y, x, f = s[conv].iters[:4]
    fused = s.fuse(conv, [n, y, x, f])
    bx, tx = s.split(conv, fused, [threads])
    s.bind(conv, bx, "blockIdx.x")
    s.bind(conv, tx, "threadIdx.x")
    return elementwise_gpu(s, out, threads)
