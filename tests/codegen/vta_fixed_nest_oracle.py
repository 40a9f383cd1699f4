"""Test oracle: the VTA instruction stream of a packed conv2d from a FIXED loop nest.

This was codegen/vta's generator before the schedule path (codegen/vta/schedule.py ->
tensorir lowering -> codegen/vta/lower.py) replaced it; tests/codegen/test_vta_lower.py keeps
it to check that the lowered schedule computes the same values in the same (or fewer) cycles.
Nothing outside tests/ uses it.

The loop nest it emits, for each output tile (batch, co, h, w; ``TileConfig`` sizes)::

    for each ci chunk of tile_ci blocks:
        for each virtual thread t (h_threading x oc_threading of them):
            load:    LOAD inp (one per batch x ci block, padded at the image border)
                     LOAD wgt (one 2-D DMA: tile_co rows of tile_ci*KH*KW blocks)
            compute: GEMM reset        (first chunk: zero the thread's accumulator)
                     GEMM              (iter_out = KH, iter_in = KW; uops over b, co, oh, ow, ci)
                     ALU SHR, MAX, MIN (last chunk: requantize)
            store:   STORE             (last chunk: one per batch x co block)

Each virtual thread has its own part of every buffer (a *context*), so while the compute module
works on thread 0's data the load module fills thread 1's, and the store module drains one
thread's accumulator while the others compute: VTA's latency hiding. Tokens enforce the reuse:

* load -> compute: each step's last LOAD pushes, its GEMM pops (the data is there);
* compute -> load: a step's GEMM pushes, the load of the next step of the same context pops (its
  buffer part is free again);
* compute -> store: the last ALU of a thread's tile pushes, its first STORE pops;
* store -> compute: a thread tile's last STORE pushes, the reset of the next tile of the same
  context pops (its accumulator part is free again).

Contexts alternate round-robin, so the k-th pop of each queue matches its k-th push.

The micro-op kernels (per context: the GEMM kernel and an elementwise one for reset and ALU) are
loaded once at the start, as VTA's runtime caches them in the uop buffer.

The output is plain values (the runtime's ISA is not importable here, tests/test_layering.py):
``{"insns": [dict, ...], "uops": ndarray (n, 3)}`` with runtime/vta/isa.py's field names.
"""

from __future__ import annotations

import itertools

import numpy as np

from codegen.vta.config import (
    Conv2dWorkload,
    TileConfig,
    VTAConfigError,
    _knobs,
    _shape,
    check_config,
    footprint,
)
from codegen.vta.lower import _loops, _mem  # the instruction-dict builders both paths emit


def conv2d_program(wkl: Conv2dWorkload, cfg: TileConfig, spec) -> dict:
    """The instruction stream and uop table of ``wkl`` tiled by ``cfg`` (see the module doc).

    Raises
    ------
    VTAConfigError
        When ``check_config`` refuses ``cfg``.
    """
    reason = check_config(wkl, cfg, spec)
    if reason:
        raise VTAConfigError(f"VTA conv2d {_shape(wkl)}: config {_knobs(cfg)}: {reason}")
    fp = footprint(wkl, cfg)
    nctx = cfg.threads
    th, tw, tb = cfg.tile_h // cfg.h_threading, cfg.tile_w, cfg.tile_b
    tco, tci = cfg.tile_co // cfg.oc_threading, cfg.tile_ci
    kh, kw, sh, sw = wkl.kernel_h, wkl.kernel_w, wkl.stride_h, wkl.stride_w
    oh_n, ow_n = wkl.out_height, wkl.out_width

    # ---- micro-op kernels, one pair per context, loaded once.
    uops, gemm_kernel, elem_kernel = [], [], []
    for ctx in range(nctx):
        acc0, inp0, wgt0 = ctx * fp.acc, ctx * fp.inp, ctx * fp.wgt
        bgn = len(uops)
        for b, co, oh, ow, ci in itertools.product(
            range(tb), range(tco), range(th), range(tw), range(tci)
        ):
            uops.append((
                acc0 + ((b * tco + co) * th + oh) * tw + ow,
                inp0 + ((b * tci + ci) * fp.in_h + oh * sh) * fp.in_w + ow * sw,
                wgt0 + (co * tci + ci) * kh * kw,
            ))  # fmt: skip
        gemm_kernel.append((bgn, len(uops)))
        bgn = len(uops)
        uops.extend((acc0 + e, acc0 + e, 0) for e in range(fp.acc))
        elem_kernel.append((bgn, len(uops)))
    insns = [_mem("LOAD", "uop", 0, 0, 1, len(uops), len(uops))]

    # ---- the steps: (tile, ci chunk, thread), threads round-robin.
    tiles = list(itertools.product(
        range(0, wkl.batch_blocks, tb), range(0, wkl.out_blocks, cfg.tile_co),
        range(0, oh_n, cfg.tile_h), range(0, ow_n, tw),
    ))  # fmt: skip
    chunks = range(0, wkl.in_blocks, tci)
    threads = list(itertools.product(range(cfg.h_threading), range(cfg.oc_threading)))
    n_steps = len(tiles) * len(chunks) * nctx
    n_thread_tiles = len(tiles) * nctx
    loads, computes = [], []
    step = 0
    for tile_index, (b0, co0, h0, w0) in enumerate(tiles):
        for chunk_index, c0 in enumerate(chunks):
            for ctx, (ht, ct) in enumerate(threads):
                oh0, oc0 = h0 + ht * th, co0 + ct * tco
                thread_tile = tile_index * nctx + ctx
                first, last = chunk_index == 0, chunk_index == len(chunks) - 1
                # load
                step_loads = _input_loads(wkl, fp, b0, c0, oh0, w0, tb, tci, ctx * fp.inp)
                step_loads.append(_mem(
                    "LOAD", "wgt", ctx * fp.wgt, (oc0 * wkl.in_blocks + c0) * kh * kw,
                    tco, tci * kh * kw, wkl.in_blocks * kh * kw,
                ))  # fmt: skip
                if step >= nctx:
                    step_loads[0]["pop_next"] = True
                step_loads[-1]["push_next"] = True
                loads.append(step_loads)
                # compute
                step_compute = []
                ebgn, eend = elem_kernel[ctx]
                if first:
                    reset = dict(opcode="GEMM", reset=True, **_loops(ebgn, eend))
                    # int32 output: compute already waited for the last store of this context
                    reset["pop_next"] = thread_tile >= nctx and wkl.requantize
                    step_compute.append(reset)
                gbgn, gend = gemm_kernel[ctx]
                gemm = dict(
                    opcode="GEMM", reset=False, wgt_factor_out=kw, wgt_factor_in=1,
                    **_loops(gbgn, gend, iters=(kh, kw), src=(fp.in_w, 1)),
                )  # fmt: skip
                gemm["pop_prev"] = True
                gemm["push_prev"] = step + nctx < n_steps
                step_compute.append(gemm)
                if last:
                    dst0 = ctx * fp.acc
                    dram0 = (((b0 * wkl.out_blocks + oc0) * oh_n + oh0) * ow_n) + w0
                    step_compute += _epilogue(wkl, fp, cfg, elem_kernel[ctx], dst0, dram0,
                                              thread_tile + nctx < n_thread_tiles)  # fmt: skip
                computes.append(step_compute)
                step += 1
    # The three modules' queues are independent: the stream interleaves them step by step.
    for i in range(n_steps):
        insns.extend(loads[i])
        insns.extend(computes[i])
    insns.append(dict(opcode="FINISH"))
    return {"insns": insns, "uops": np.asarray(uops, np.int32).reshape(-1, 3)}


def _epilogue(wkl, fp, cfg, elem_kernel, acc0, dram0, acc_reused) -> list:
    """The end of a thread's tile: requantize and store int8, or store the int32 accumulator
    as four byte planes (VTA stores only 8 bits: ``SHR 8`` between the planes)."""
    th, tw = cfg.tile_h // cfg.h_threading, cfg.tile_w
    tb, tco = cfg.tile_b, cfg.tile_co // cfg.oc_threading
    oh_n, ow_n = wkl.out_height, wkl.out_width
    plane = wkl.batch_blocks * wkl.out_blocks * oh_n * ow_n  # entries of one output plane
    out = []

    def alu(op, imm, **deps):
        return {"opcode": "ALU", "alu_opcode": op, "use_imm": True, "imm": imm,
                **_loops(*elem_kernel), **deps}  # fmt: skip

    def stores(p):
        block = [
            _mem("STORE", "out", acc0 + (b * tco + co) * th * tw,
                 p * plane + dram0 + ((b * wkl.out_blocks + co) * oh_n) * ow_n, th, tw, ow_n)
            for b, co in itertools.product(range(tb), range(tco))
        ]  # fmt: skip
        block[0]["pop_prev"] = True
        return block

    if wkl.requantize:
        out += [alu("SHR", wkl.shift), alu("MAX", wkl.clip_min),
                alu("MIN", wkl.clip_max, push_next=True)]  # fmt: skip
        out += stores(0)
        out[-1]["push_prev"] = acc_reused  # the next tile of this context may reset it
        return out
    for p in range(4):
        if p:  # shift the next byte down once the previous plane is stored
            out.append(alu("SHR", 8, pop_next=True, push_next=True))
        else:
            out.append(alu("ADD", 0, push_next=True))  # a no-op that hands the tile to store
        out += stores(p)
        out[-1]["push_prev"] = True
    out.append(alu("ADD", 0, pop_next=True))  # wait for the last plane: the tile is free
    return out


def _input_loads(wkl, fp, b0, c0, oh0, ow0, tb, tci, sram0) -> list:
    """One padded 2-D LOAD per (batch, ci block) of the input window of a thread's tile."""
    ih = oh0 * wkl.stride_h - wkl.pad_h
    iw = ow0 * wkl.stride_w - wkl.pad_w
    y0, x0 = max(0, -ih), max(0, -iw)
    y1 = max(0, ih + fp.in_h - wkl.height)
    x1 = max(0, iw + fp.in_w - wkl.width)
    loads = []
    for b, ci in itertools.product(range(tb), range(tci)):
        plane = ((b0 + b) * wkl.in_blocks + c0 + ci) * wkl.height
        loads.append(_mem(
            "LOAD", "inp", sram0 + (b * tci + ci) * fp.in_h * fp.in_w,
            (plane + ih + y0) * wkl.width + iw + x0,
            fp.in_h - y0 - y1, fp.in_w - x0 - x1, wkl.width, pads=(y0, y1, x0, x1),
        ))  # fmt: skip
    return loads
