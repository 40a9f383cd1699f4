"""The VTA schedule of a packed conv2d / dense, built as ordinary steps on a tensorir State.

This is TVM's ``schedule_conv2d_packed`` written with our steps (tensorir/steps.py), driven by
the seed's knobs (``TileConfig``). On the DAG ``data, kernel -> res (the packed conv, int32) ->
out`` (``out`` is either ``res`` itself or ``int8(min(max(res >> shift, lo), hi))``) it:

* splits the output's batch / channel / row / column axes by the tile sizes and puts the tile
  loops outside (``b.0, co.0, i.0, j.0``); with ``h_threading`` / ``oc_threading`` > 1 the
  inner row / channel tile is split again and its outer part bound to ``vthread`` (outermost,
  as TVM does);
* copies the input (its padding stage inlined into the copy) and the kernel into the scopes
  ``local.inp_buffer`` / ``local.wgt_buffer`` (``cache_read``), computes the convolution into
  ``local.acc_buffer`` (``cache_write``), and the requantization too (``cache_write`` of the
  output), all at the output's innermost tile loop;
* splits the input-channel reduction by ``tile_ci`` and computes the two copies at the chunk
  loop, with the kernel window loops (dy, dx) just inside it and the tensor block
  (``b_tns, co_tns, ic_tns``) innermost;
* marks the copies and the output's store loops ``dma_copy``, the requantization ``alu`` and
  the tensor block ``gemm`` (the tensorize of TVM's ``env.gemm``).

codegen/vta/lower.py turns the lowered loop nest into the instruction stream.
"""

from __future__ import annotations

from tensorir.expr import max_, min_
from tensorir.ops.packed_layout import conv2d_packed
from tensorir.tensor import ComputeOp, compute, placeholder

from .config import Conv2dWorkload, TileConfig

INP_SCOPE, WGT_SCOPE, ACC_SCOPE = "local.inp_buffer", "local.wgt_buffer", "local.acc_buffer"


def packed_conv2d_tensors(wkl: Conv2dWorkload, spec) -> tuple:
    """``(data, kernel, out)`` te tensors of ``wkl`` in the packed layouts: ``out`` is the
    requantized int8 result, or the int32 accumulator when ``wkl.requantize`` is False."""
    data = placeholder(
        (wkl.batch_blocks, wkl.in_blocks, wkl.height, wkl.width, spec.BATCH, spec.BLOCK_IN),
        "int8", name="data",
    )  # fmt: skip
    kernel = placeholder(
        (wkl.out_blocks, wkl.in_blocks, wkl.kernel_h, wkl.kernel_w, spec.BLOCK_OUT,
         spec.BLOCK_IN),
        "int8", name="kernel",
    )  # fmt: skip
    pads = (wkl.pad_h, wkl.pad_w, wkl.pad_h, wkl.pad_w)
    res = conv2d_packed(data, kernel, (wkl.stride_h, wkl.stride_w), pads, (1, 1), "int32")
    if not wkl.requantize:
        return data, kernel, res
    out = compute(
        res.shape,
        lambda *i: min_(max_(res[i] >> wkl.shift, wkl.clip_min), wkl.clip_max).astype("int8"),
        "out",
    )
    return data, kernel, out


def _roles(state) -> dict:
    """Names of the stages the schedule works on: the reduction, its padding stage (or None),
    the kernel, the data and the output (which may be the reduction itself)."""
    stages = state.stages
    reductions = [s for s in stages if isinstance(s.op, ComputeOp) and s.op.reduce_axes]
    if len(reductions) != 1:
        raise ValueError(
            f"VTA schedule: expected one packed GEMM reduction, found "
            f"{[s.name for s in reductions]}"
        )
    conv = reductions[0]
    inputs = [t.op for t in conv.op.input_tensors]
    pad = next((op.name for op in inputs if isinstance(op, ComputeOp)), None)
    placeholders = [op.name for op in inputs if not isinstance(op, ComputeOp)]
    kernel = placeholders[-1]
    outputs = [t.name for t in state.dag.output_tensors]
    return {"conv": conv.name, "pad": pad, "kernel": kernel, "out": outputs[0]}


def schedule_packed(state, cfg: TileConfig) -> None:
    """Apply the VTA schedule (module doc) to ``state`` (a State of a packed conv2d or dense
    DAG), in place. The tiles must divide their axes (``check_config``)."""
    roles = _roles(state)
    conv, out = roles["conv"], roles["out"]
    dense = len(state[conv].op.axes) == 4
    requantize = out != conv

    data_src = roles["pad"] or state[conv].op.input_tensors[0].name
    inp = state.cache_read(data_src, INP_SCOPE, [conv])
    if roles["pad"]:
        state.compute_inline(roles["pad"])  # the copy's bounds conditions become LOAD padding
    wgt = state.cache_read(roles["kernel"], WGT_SCOPE, [conv])
    acc = state.cache_write(conv, ACC_SCOPE)
    alu = None
    if requantize:
        state.compute_inline(conv)  # the copy cache_write left behind
        alu = state.cache_write(out, ACC_SCOPE)

    # ---- the output (store) stage: tile loops outside, virtual threads outermost.
    its = state[out].iters
    if dense:
        b, co, b_tns, co_tns = its
        tiles = ((b, cfg.tile_b, 1), (co, cfg.tile_co, cfg.oc_threading))
    else:
        b, co, h, w, b_tns, co_tns = its
        tiles = (
            (b, cfg.tile_b, 1),
            (co, cfg.tile_co, cfg.oc_threading),
            (h, cfg.tile_h, cfg.h_threading),
            (w, cfg.tile_w, 1),
        )
    outer, inner, vthreads = [], [], []
    for axis, tile, threads in tiles:
        o, i = state.split(out, axis, [tile])
        outer.append(o)
        if threads > 1:
            v, i = state.split(out, i, [tile // threads])
            vthreads.append(v)
        inner.append(i)
    # TVM binds h's thread before oc's: keep that order (rows, then channels).
    vthreads = vthreads[::-1] if len(vthreads) == 2 else vthreads
    state.reorder(out, [*vthreads, *outer, *inner, b_tns, co_tns])
    for v in vthreads:
        state.bind(out, v, "vthread")
    store_at = outer[-1]
    if alu is not None:
        state.compute_at(alu, out, store_at)
    state.compute_at(acc, out, store_at)

    # ---- the GEMM stage: ci chunks outside, the kernel window, the tile, the tensor block.
    a_its = state[acc].iters
    n_sp = 4 if dense else 6
    spatial, reduce_ = a_its[:n_sp], a_its[n_sp:]
    ic, window, ic_tns = reduce_[0], reduce_[1:-1], reduce_[-1]
    ic_o, ic_i = state.split(acc, ic, [cfg.tile_ci])
    state.reorder(acc, [ic_o, *window, *spatial[:-2], ic_i, *spatial[-2:], ic_tns])
    state.compute_at(inp, acc, ic_o)
    state.compute_at(wgt, acc, ic_o)

    # ---- the pragmas (last: a later split would drop them).
    state.pragma(inp, state[inp].iters[0], "dma_copy")
    state.pragma(wgt, state[wgt].iters[0], "dma_copy")
    state.pragma(acc, state[acc].iters[-3], "gemm")  # b_tns: the BATCH x BLOCK_OUT x BLOCK_IN block
    if alu is not None:
        state.pragma(alu, state[alu].iters[0], "alu")
    state.pragma(out, inner[0], "dma_copy")
