"""The loop-state data model shared by the scheduling steps and lowering.

A :class:`Stage` is one op of the (current) DAG with its loop structure: ``root_iters`` are the
op's axes then its reduce axes as first created; ``relations`` record how the leaf ``iters`` were
derived from them (splits and fuses, in the order applied), exactly like TVM's IterVarRelation.
Lowering reads only this model plus the ops; the steps in ``schedule.py`` produce it.

Naming (relied upon by sketch rules, as in TVM): splitting ``i`` into n+1 parts gives ``i.0``
(outermost) ... ``i.n``; fusing ``a, b, c`` gives ``a@b@c@``; cache stages are ``A.shared``,
``C.local``; an rfactor stage is ``C.rf``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .tensor import ComputeOp, PlaceholderOp

ITER_KINDS = ("spatial", "reduce", "mixed")
ANNOTATIONS = ("none", "parallel", "vectorize", "unroll", "vthread", "blockIdx.x", "blockIdx.y",
               "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")  # fmt: skip
COMPUTE_AT_KINDS = ("root", "inline", "iter")


@dataclass(frozen=True)
class Iterator:
    """One loop of a stage. ``extent`` is None while unknown (attached stages before bound
    inference); ``annotation`` is one of ANNOTATIONS."""

    name: str
    extent: int | None
    kind: str = "spatial"
    annotation: str = "none"


@dataclass(frozen=True)
class SplitRel:
    """``parent`` became ``children`` (outermost first) with inner extents ``lengths``.

    ``lengths[k]`` is the extent of ``children[k + 1]``; the outermost child's extent is
    ``ceil(parent_extent / prod(lengths))``. The parent value is
    ``sum(child_k * prod(extents of the children after k))``; when the product of the
    extents exceeds the parent's extent, lowering guards the tail with ``parent < extent``.
    """

    parent: str
    children: tuple[str, ...]
    lengths: tuple[int, ...]


@dataclass(frozen=True)
class FuseRel:
    """``parents`` (outermost first, adjacent) became the single iterator ``child``."""

    parents: tuple[str, ...]
    child: str


@dataclass(frozen=True)
class Stage:
    """One op with its loop structure and placement.

    ``compute_at`` is "root", "inline" or "iter"; for "iter", ``attach`` is
    ``(target_stage_name, target_iterator_name)``. ``scope`` is the storage scope of the
    op's output ("global", "shared", "local", or a tagged ``"local.<tag>"`` such as VTA's
    ``"local.inp_buffer"``). ``storage_align`` holds ``(axis_index, factor, offset)`` triples
    for the output buffer's layout. ``pragmas`` holds ``(iterator_name, pragma)`` pairs of the
    accelerator pragmas in ``steps.LOOP_PRAGMAS`` (lowering annotates that loop).
    """

    op: ComputeOp | PlaceholderOp
    root_iters: tuple[Iterator, ...]
    iters: tuple[Iterator, ...]
    relations: tuple[SplitRel | FuseRel, ...] = ()
    compute_at: str = "root"
    attach: tuple[str, str] | None = None
    auto_unroll_max_step: int = 0
    scope: str = "global"
    storage_align: tuple[tuple[int, int, int], ...] = field(default=())
    pragmas: tuple[tuple[str, str], ...] = field(default=())

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def is_placeholder(self) -> bool:
        return isinstance(self.op, PlaceholderOp)

    def iter_index(self, name: str) -> int:
        for k, it in enumerate(self.iters):
            if it.name == name:
                return k
        raise KeyError(name)

    def with_(self, **changes) -> Stage:
        return replace(self, **changes)


def initial_stage(op: ComputeOp | PlaceholderOp) -> Stage:
    """A fresh stage: one spatial iterator per axis, then one reduce iterator per reduce axis."""
    if isinstance(op, PlaceholderOp):
        return Stage(op, (), ())
    iters = tuple(Iterator(ax.name, ax.extent, "spatial") for ax in op.axes) + tuple(
        Iterator(ax.name, ax.extent, "reduce") for ax in op.reduce_axes
    )
    return Stage(op, iters, iters)
