"""The GPU schedule the cuda / opencl templates share: TOPI's ``schedule_direct_cuda``.

Each spatial axis of the output is split four ways (block, virtual thread, thread, inner);
the output is computed in a ``local`` register tile at the thread loop; each reduction axis is
split two ways and the inputs are staged in ``shared`` memory at the outer reduction loops,
fetched cooperatively by all threads of a block; ``auto_unroll_max_step`` is a knob. As in the
auto-scheduler's GPU sketches, the block, virtual-thread and thread parts of all axes are fused
into one ``blockIdx.x``, one ``vthread`` and one ``threadIdx.x`` loop (TOPI binds them to
x/y/z separately; the fused form needs no 3-D launch and lowers the same way).
"""

from __future__ import annotations

import math

from .epilogue import register_tile
from .schedule_cpu import _iter

__all__ = ["schedule_direct_gpu"]


def schedule_direct_gpu(cfg, s, out, pad, inputs, tiles, reduce_split):
    """Schedule reduction stage ``out`` (a root output) for a GPU.

    Parameters
    ----------
    cfg : ConfigSpace or ConfigEntity
    s : State
    out : str
        The reduction stage (the DAG's output).
    pad : str or None
        A padding stage to inline.
    inputs : list of str
        The placeholders the reduction reads (staged in shared memory).
    tiles : list of (knob name, spatial axis name)
        Spatial axes split four ways; axes not listed (batch) join the block loop.
    reduce_split : list of (knob name, reduce axis name)
        Reduction axes split two ways.
    """
    iters = {it.name: it for it in s[out].iters}
    red_extent = {name: iters[ax].extent for name, ax in reduce_split}
    out, local, axis_of = register_tile(s, out, keep=(pad,) if pad else ())
    tiles = [(name, axis_of[axis]) for name, axis in tiles]
    # Stage the inputs (the padding stage itself, as TOPI's ``AA = cache_read(pad_data)``)
    # before inlining the padding into its shared copy.
    shared = [s.cache_read(name, "shared", [local]).op.name for name in inputs]
    if pad is not None:
        s.compute_inline(pad)
    for name, axis in tiles:
        # At most 8 virtual threads and 64 threads per axis (TOPI's filters), so most of the
        # space fits a GPU; the products over axes are checked when lowering.
        cfg.define_split(name, _iter(s, out, axis), num_outputs=4,
                         filter=lambda e: e.size[1] <= 8 and e.size[2] <= 64)  # fmt: skip
    for name, _ in reduce_split:
        cfg.define_split(name, red_extent[name], num_outputs=2)
    cfg.define_knob("auto_unroll_max_step", [0, 512, 1500])
    if cfg.is_fallback:
        # Untuned: no virtual threads, at most 8 threads and 2 outputs per thread per axis,
        # so the default fits any GPU (TVM takes a reference log from tophub instead).
        for name, _ in tiles:
            cfg.fallback_split(name, [-1, 1, 8, 2])

    levels: list[list] = [[], [], [], []]
    for name, axis in tiles:
        for k, part in enumerate(cfg[name].apply(s, out, _iter(s, out, axis))):
            levels[k].append(part)
    tiled = {ax for _, ax in tiles}
    rest = [it for it in s[out].iters if it.name.split(".")[0] not in tiled]
    s.reorder(out, rest + levels[0] + levels[1] + levels[2] + levels[3])
    block = s.fuse(out, rest + levels[0])
    vthread = s.fuse(out, [_iter(s, out, it) for it in levels[1]])
    thread = s.fuse(out, [_iter(s, out, it) for it in levels[2]])
    s.bind(out, block, "blockIdx.x")
    s.bind(out, vthread, "vthread")
    s.bind(out, thread, "threadIdx.x")
    s.pragma(out, block, f"auto_unroll_max_step${cfg['auto_unroll_max_step'].val}")
    s.compute_at(local, out, _iter(s, out, thread))

    red = []
    for name, axis in reduce_split:
        red.append(cfg[name].apply(s, local, _iter(s, local, axis)))
    spatial = [it for it in s[local].iters if it.kind == "spatial"]
    outer = [r[0] for r in red]
    inner = [r[1] for r in red]
    s.reorder(local, outer + inner + spatial)

    n_threads = math.prod(cfg[name].size[2] for name, _ in tiles)
    for name in shared:
        s.compute_at(name, local, _iter(s, local, outer[-1]))
        fused = s.fuse(name, list(s[name].iters))
        _, tid = s.split(name, fused, [n_threads])
        s.bind(name, _iter(s, name, tid), "threadIdx.x")
    return s
