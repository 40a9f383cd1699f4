"""The loop structure of one stage: every iterator's extent from the root extents (splits
and fuses passed down, as TVM's PassDownDomain), the root axes' values from the leaf loops
with the tail guards of uneven splits, and the For kind of each annotation."""

from __future__ import annotations

import math

from .expr import Expr
from .lower_error import LowerError
from .stage import Iterator, SplitRel, Stage

__all__ = ["leaf_extents", "loop_kind", "root_values"]


def leaf_extents(stage: Stage, root_ext: dict) -> dict:
    """Extents of every iterator (root, intermediate, leaf) from the root extents.

    As TVM's PassDownDomain, a split applies its lengths innermost first and tightens each
    inner part to ``min(remaining extent, length)`` unless a loop derived from it is bound to
    a thread (a split of an extent-2 region by lengths [4, 2] gives loops 1, 1, 2 instead of
    1, 4, 2 with a guard). Strides stay the lengths (see :func:`root_values`).
    """
    bound = _thread_bound_iters(stage)
    ext = dict(root_ext)
    for rel in stage.relations:
        if isinstance(rel, SplitRel):
            if any(x is None for x in rel.lengths):
                raise LowerError(
                    f"stage {stage.name!r}: split of {rel.parent!r} has undefined lengths "
                    f"{list(rel.lengths)}; fill the tile sizes before lowering"
                )
            rem = ext[rel.parent]
            for child, ln in zip(reversed(rel.children[1:]), reversed(rel.lengths), strict=True):
                ln = int(ln)
                if ln <= 0:
                    raise LowerError(
                        f"stage {stage.name!r}: split of {rel.parent!r} has a non-positive "
                        f"length {ln}"
                    )
                ext[child] = ln if child in bound else min(rem, ln)
                rem = -(-rem // ln)
            ext[rel.children[0]] = rem
        else:
            ext[rel.child] = math.prod(ext[p] for p in rel.parents)
    return ext


def _thread_bound_iters(stage: Stage) -> set:
    """Names of iterators from which a thread- or vthread-bound leaf is derived."""
    out = {
        it.name
        for it in stage.iters
        if it.annotation not in ("none", None, "parallel", "vectorize", "unroll")
    }
    for rel in reversed(stage.relations):
        if isinstance(rel, SplitRel):
            if any(c in out for c in rel.children):
                out.add(rel.parent)
        elif rel.child in out:
            out.update(rel.parents)
    return out


def root_values(stage: Stage, leaf_vals: dict, ext: dict):
    """Root iterator values from leaf values, and tail guards ``value < extent``.

    A split parent is ``sum(child_k * stride_k)`` with strides the products of the split
    lengths; a guard is needed when the largest value reached is beyond the parent's extent.
    """
    val = dict(leaf_vals)
    guards = []
    for rel in reversed(stage.relations):
        if isinstance(rel, SplitRel):
            total: Expr | None = None
            stride = 1
            top = 0
            strides = [*[math.prod(rel.lengths[k:]) for k in range(len(rel.lengths))], 1]
            for c, stride in zip(reversed(rel.children), reversed(strides), strict=True):
                term = val[c] if stride == 1 else val[c] * stride
                total = term if total is None else term + total
                top += (ext[c] - 1) * stride
            val[rel.parent] = total
            if top >= ext[rel.parent]:
                guards.append(total < ext[rel.parent])
        else:
            fused = val[rel.child]
            stride = 1
            parts = {}
            for p in reversed(rel.parents):
                e = ext[p]
                x = fused if stride == 1 else fused // stride
                parts[p] = x if p == rel.parents[0] else x % e
                stride *= e
            val.update(parts)
    return val, guards


def loop_kind(it: Iterator) -> tuple[str, str | None]:
    ann = it.annotation
    if ann in ("none", None):
        return "serial", None
    if ann == "parallel":
        return "parallel", None
    if ann == "vectorize":
        return "vectorized", None
    if ann == "unroll":
        return "unrolled", None
    if ann == "vthread":
        return "vthread", None
    if ann.startswith("blockIdx") or ann.startswith("threadIdx"):
        return "thread", ann
    raise LowerError(f"unknown iterator annotation {ann!r} on {it.name!r}")
