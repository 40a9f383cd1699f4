"""Where a template's register tile lives: the reduction alone, or a fused group's output.

A template's own DAG ends in its reduction: the tile is a ``cache_write`` ``local`` stage of
it. In a network the reduction is fused with element-wise ops after it (bias, activation), as
TOPI's schedules see it through ``traverse_inline``: those are inlined into the group's output,
the output is tiled, and the reduction itself becomes the tile computed at it. The knobs are
defined on the output's axes, which match the reduction's spatial axes one to one, so a
configuration tuned on the bare operator applies to the fused group.
"""

from __future__ import annotations

from tensorir.expr import TensorRead, walk
from tensorir.steps import ScheduleError

__all__ = ["anchor", "register_tile"]

PAD_STAGES = ("pad_temp", "PaddedInput")


def anchor(s) -> tuple[str, str | None, list[str]]:
    """``(reduction stage, its padding stage or None, the stages it reads)`` of a template's
    DAG or of a fused group's: the one stage with a reduction."""
    reductions = [st for st in s.stages if not st.is_placeholder and st.op.reduce_axes]
    if len(reductions) != 1:
        raise ScheduleError(
            f"a template schedules one reduction; this DAG has {len(reductions)}: "
            f"{[st.name for st in reductions]}"
        )
    op = reductions[0].op
    reads = list(dict.fromkeys(
        n.tensor.op.name for n in walk(op.body) if isinstance(n, TensorRead)
    ))  # fmt: skip
    pad = next((r for r in reads if r in PAD_STAGES), None)
    return op.name, pad, reads


def register_tile(s, reduction: str, keep=()) -> tuple[str, str, dict]:
    """Set up the tile of ``reduction``; returns ``(tiled stage, tile stage, axis names)``.

    ``axis names`` maps each spatial axis name of ``reduction`` to the matching axis of the
    tiled stage. ``keep``: stages not to inline (the padding a GPU template stages in shared
    memory first). Raises ScheduleError when the DAG is not "a reduction, then element-wise
    ops of the same shape".
    """
    spatial = [it.name for it in s[reduction].iters if it.kind == "spatial"]
    output = s.dag.output_tensors[0].op.name
    if output == reduction:
        local = s.cache_write(reduction, "local").op.name
        return reduction, local, {a: a for a in spatial}
    for st in list(s.stages):
        if st.is_placeholder or st.name in (reduction, output, *keep) or st.compute_at == "inline":
            continue
        if st.op.reduce_axes:
            raise ScheduleError(f"fused group: {st.name} is a second reduction; no template")
        s.compute_inline(st.name)
    out_iters = [it.name for it in s[output].iters]
    if len(out_iters) != len(spatial) or s[output].op.shape != s[reduction].op.shape:
        raise ScheduleError(f"fused group: {output} does not have {reduction}'s shape")
    return output, reduction, dict(zip(spatial, out_iters, strict=True))
