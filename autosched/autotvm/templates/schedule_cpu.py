"""The CPU schedule the llvm templates share: a register-tiled direct reduction.

Follows TOPI's x86 conv2d schedule (``_schedule_conv_NCHWc``: a ``cache_write`` register tile
of output positions x output channels, the reduction loops outside it, the channel block
vectorized, the outer loops fused and parallel, an ``unroll_kw`` knob) on the unpacked layouts:
the vectorized axis is the one contiguous in the output (``ow`` for NCHW, ``oc`` for NHWC), the
other tile axes are unrolled. Knobs: one two-way split per spatial axis of the tile and per
channel reduction axis, ``unroll_kw``.
"""

from __future__ import annotations

from .epilogue import register_tile

__all__ = ["schedule_direct_cpu"]


def _iter(s, stage, it):
    """The current iterator object of ``it`` (an Iterator or name) in ``stage``."""
    return s[stage].iters[s.iter_id(stage, getattr(it, "name", it))]


def schedule_direct_cpu(cfg, s, out, pad, tiles, vector_axis, reduce_split, unroll_axis=None,
                        pad_at_root=False):  # fmt: skip
    """Schedule reduction stage ``out`` (a root output) with a register tile.

    Parameters
    ----------
    cfg : ConfigSpace or ConfigEntity
    s : State
    out : str
        The reduction stage: the DAG's output, or the anchor of a fused group whose
        element-wise ops follow it (:func:`~.epilogue.register_tile`).
    pad : str or None
        A padding stage to inline (None when there is none).
    tiles : list of (knob name, spatial axis name)
        Spatial axes split two ways by the knob, in loop order (outer parts first); axes not
        listed stay outermost and are fused with the outer parts into the parallel loop.
    vector_axis : str
        The spatial axis (one of ``tiles``) whose inner part is vectorized (innermost).
    reduce_split : list of (knob name, reduce axis name)
        Reduction axes split two ways (the inner part runs just outside the register tile).
    unroll_axis : str, optional
        The reduction axis the ``unroll_kw`` knob unrolls.
    pad_at_root : bool
        Compute the padding once at the root (parallel) instead of inlining it, as TOPI's x86
        conv2d does. Measured here (3x3 conv, 64 channels, 56x56): NCHW 2-4x faster at the
        root (the inlined bounds test sits in the vectorized ``ow`` loop), NHWC 2x faster
        inlined (the test is invariant in its vectorized channel loop).
    """
    if pad is not None and pad_at_root:
        s.parallel(pad, s.fuse(pad, list(s[pad].iters[:2])))
    elif pad is not None:
        s.compute_inline(pad)
    iters = {it.name: it for it in s[out].iters}
    red_extent = {name: iters[ax].extent for name, ax in reduce_split}
    reduction = out
    out, local, axis_of = register_tile(s, reduction, keep=(pad,) if pad_at_root else ())
    tiles = [(name, axis_of[axis]) for name, axis in tiles]
    vector_axis, local_vector = axis_of[vector_axis], vector_axis
    for name, axis in tiles:
        cfg.define_split(name, _iter(s, out, axis), num_outputs=2)
    for name, _ in reduce_split:
        cfg.define_split(name, red_extent[name], num_outputs=2)
    if unroll_axis is not None:
        cfg.define_knob("unroll_kw", [True, False])

    outer, inner = [], []
    for name, axis in tiles:
        o, i = cfg[name].apply(s, out, _iter(s, out, axis))
        outer.append(o)
        inner.append((axis, i))
    tiled = {ax for _, ax in tiles}
    rest = [it for it in s[out].iters if it.name.split(".")[0] not in tiled]
    vec = next(i for ax, i in inner if ax == vector_axis)
    inner_order = [i for ax, i in inner if ax != vector_axis] + [vec]
    s.reorder(out, rest + outer + inner_order)
    n_par = len(rest) + len(outer) - 1  # the last outer part hosts the register tile
    fused = s.fuse(out, rest + outer[:-1]) if n_par > 1 else (rest + outer)[0]
    s.parallel(out, fused)
    s.vectorize(out, _iter(s, out, vec))
    s.compute_at(local, out, _iter(s, out, outer[-1]))

    # The register tile: reduction loops outside, tile axes inside, vector axis innermost.
    red = []
    for name, axis in reduce_split:
        red.extend(cfg[name].apply(s, local, _iter(s, local, axis)))
    spatial = [it for it in s[local].iters if it.kind == "spatial"]
    others = [it for it in s[local].iters if it.kind != "spatial" and it.name not in
              {r.name for r in red}]  # fmt: skip
    red_outer = [r for k, r in enumerate(red) if k % 2 == 0]
    red_inner = [r for k, r in enumerate(red) if k % 2 == 1]
    # cache_write names the local stage's spatial axes "<axis>.c"
    vec_local = next(it for it in spatial if it.name in (local_vector, f"{local_vector}.c"))
    spatial_rest = [it for it in spatial if it.name != vec_local.name]
    s.reorder(local, red_outer + others + red_inner + spatial_rest + [vec_local])
    for it in spatial_rest:
        if _iter(s, local, it).extent != 1:
            s.unroll(local, _iter(s, local, it))
    s.vectorize(local, _iter(s, local, vec_local))
    if unroll_axis is not None and cfg["unroll_kw"].val:
        s.unroll(local, _iter(s, local, unroll_axis))
    return s
