"""The loop steps: split (SP, FSP, FFSP), reorder, fuse, annotate and pragma (re-exported by
:mod:`tensorir.steps`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from .passes.double_buffer import PIPELINE_PRAGMAS
from .stage import FuseRel, Iterator, SplitRel
from .steps_common import (
    ANNOTATION_CODES,
    ANNOTATION_NAMES,
    THREAD_NAMES,
    ScheduleError,
    check_int,
    check_no_pragma,
    check_schedulable,
    get_iter,
    get_stage,
    move_attachments,
    set_stage,
    split_extents,
)


def apply_split(stages, stage_id, iter_id, lengths, inner_to_outer, what="split"):
    """Split one iterator; returns the new stage tuple (shared by SP, FSP and FFSP)."""
    stage = get_stage(stages, stage_id, what)
    check_schedulable(stage, what)
    it = get_iter(stage, iter_id, what)
    lengths = tuple(lengths)
    if not lengths:
        raise ScheduleError(f"{what} of {stage.name}.{it.name}: give at least one length")
    for x in lengths:
        check_int(x, f"{what} of {stage.name}.{it.name}: every length", allow_none=True)
    if inner_to_outer:
        inner = lengths
    else:
        # nparts from outer to inner: the innermost extent is derived; SplitRel wants the
        # extents of children 1..n, so convert (lowering only knows the factor form).
        if it.extent is None or None in lengths:
            raise ScheduleError(
                f"{what} of {stage.name}.{it.name}: an nparts split (inner_to_outer=False) "
                "needs a known extent and known lengths; use inner_to_outer=True"
            )
        inner = lengths[1:] + (math.ceil(it.extent / math.prod(lengths)),)
    names = tuple(f"{it.name}.{k}" for k in range(len(inner) + 1))
    exts = split_extents(it.extent, inner)
    children = tuple(Iterator(n, e, it.kind, "none") for n, e in zip(names, exts))
    if it.annotation != "none":
        raise ScheduleError(
            f"{what} of {stage.name}.{it.name}: the iterator is already annotated "
            f"{it.annotation!r}; split before annotating"
        )
    check_no_pragma(stage, it, what)
    new = stage.with_(
        iters=stage.iters[:iter_id] + children + stage.iters[iter_id + 1 :],
        relations=stage.relations + (SplitRel(it.name, names, inner),),
    )
    stages = set_stage(stages, stage_id, new)
    return move_attachments(stages, stage.name, [it.name], names[-1])


@dataclass(frozen=True)
class SplitStep:
    """``SP``: split ``iter_id`` by ``lengths`` (None = undefined, in sketches).

    ``extent`` records the iterator's extent when the step was made (0 in JSON when unknown);
    replay uses the current extent.
    """

    stage_id: int
    iter_id: int
    extent: int | None
    lengths: tuple[int | None, ...]
    inner_to_outer: bool = True
    code: ClassVar[str] = "SP"

    def apply(self, stages, dag, steps_so_far):
        return apply_split(stages, self.stage_id, self.iter_id, self.lengths, self.inner_to_outer)

    def to_json(self) -> list:
        return ["SP", self.stage_id, self.iter_id, self.extent or 0, list(self.lengths),
                int(self.inner_to_outer)]  # fmt: skip

    @classmethod
    def from_json(cls, rec) -> SplitStep:
        sid, iid, ext, lengths, i2o = rec[1:6]
        return cls(sid, iid, ext or None, tuple(lengths), bool(i2o))


def _split_source(steps_so_far, src_step_id, what) -> SplitStep:
    if not isinstance(src_step_id, int) or not 0 <= src_step_id < len(steps_so_far):
        raise ScheduleError(
            f"{what}: source step {src_step_id!r} does not exist (there are "
            f"{len(steps_so_far)} earlier steps)"
        )
    src = steps_so_far[src_step_id]
    if not isinstance(src, SplitStep):
        raise ScheduleError(
            f"{what}: source step {src_step_id} is a {type(src).__name__}, not a SplitStep"
        )
    return src


@dataclass(frozen=True)
class FollowSplitStep:
    """``FSP``: split like the earlier SplitStep ``src_step_id`` into ``n_split + 1`` parts:
    its first ``n_split - 1`` lengths, then the product of the remaining ones."""

    stage_id: int
    iter_id: int
    src_step_id: int
    n_split: int
    code: ClassVar[str] = "FSP"

    def lengths(self, steps_so_far) -> tuple[int | None, ...]:
        src = _split_source(steps_so_far, self.src_step_id, "follow_split")
        check_int(self.n_split, "follow_split: n_split")
        if self.n_split > len(src.lengths):
            raise ScheduleError(
                f"follow_split: n_split={self.n_split} but source step {self.src_step_id} "
                f"has only {len(src.lengths)} lengths"
            )
        head = src.lengths[: self.n_split - 1]
        rest = src.lengths[self.n_split - 1 :]
        last = None if None in rest else math.prod(rest)
        return tuple(head) + (last,)

    def apply(self, stages, dag, steps_so_far):
        lengths = self.lengths(steps_so_far)
        return apply_split(stages, self.stage_id, self.iter_id, lengths, True, "follow_split")

    def to_json(self) -> list:
        return ["FSP", self.stage_id, self.iter_id, self.src_step_id, self.n_split]

    @classmethod
    def from_json(cls, rec) -> FollowSplitStep:
        return cls(*rec[1:5])


@dataclass(frozen=True)
class FollowFusedSplitStep:
    """``FFSP``: one split whose length is the product of ``lengths[level]`` of several
    SplitSteps (e.g. the thread count for cooperative fetching); ``factor_or_nparts`` True
    means the length is the inner factor."""

    stage_id: int
    iter_id: int
    src_step_ids: tuple[int, ...]
    level: int
    factor_or_nparts: bool
    code: ClassVar[str] = "FFSP"

    def length(self, steps_so_far) -> int | None:
        out = 1
        for sid in self.src_step_ids:
            src = _split_source(steps_so_far, sid, "follow_fused_split")
            if not isinstance(self.level, int) or not 0 <= self.level < len(src.lengths):
                raise ScheduleError(
                    f"follow_fused_split: level {self.level!r} out of range for source step "
                    f"{sid} with {len(src.lengths)} lengths"
                )
            if src.lengths[self.level] is None:
                return None
            out *= src.lengths[self.level]
        return out

    def apply(self, stages, dag, steps_so_far):
        length = self.length(steps_so_far)
        return apply_split(
            stages, self.stage_id, self.iter_id, (length,), self.factor_or_nparts,
            "follow_fused_split",
        )  # fmt: skip

    def to_json(self) -> list:
        return ["FFSP", self.stage_id, self.iter_id, list(self.src_step_ids), self.level,
                int(self.factor_or_nparts)]  # fmt: skip

    @classmethod
    def from_json(cls, rec) -> FollowFusedSplitStep:
        sid, iid, srcs, level, fon = rec[1:6]
        return cls(sid, iid, tuple(srcs), level, bool(fon))


@dataclass(frozen=True)
class ReorderStep:
    """``RE``: the new order of all iterators (a permutation of the current ids)."""

    stage_id: int
    after_ids: tuple[int, ...]
    code: ClassVar[str] = "RE"

    def apply(self, stages, dag, steps_so_far):
        stage = get_stage(stages, self.stage_id, "reorder")
        check_schedulable(stage, "reorder")
        n = len(stage.iters)
        if sorted(self.after_ids) != list(range(n)):
            raise ScheduleError(
                f"reorder of stage {stage.name!r}: the order {list(self.after_ids)} is not a "
                f"permutation of all {n} iterators {[it.name for it in stage.iters]}; "
                "list every iterator exactly once"
            )
        new = stage.with_(iters=tuple(stage.iters[k] for k in self.after_ids))
        return set_stage(stages, self.stage_id, new)

    def to_json(self) -> list:
        return ["RE", self.stage_id, list(self.after_ids)]

    @classmethod
    def from_json(cls, rec) -> ReorderStep:
        return cls(rec[1], tuple(rec[2]))


@dataclass(frozen=True)
class FuseStep:
    """``FU``: fuse consecutive iterators ``fused_ids`` (outermost first) into ``a@b@``."""

    stage_id: int
    fused_ids: tuple[int, ...]
    code: ClassVar[str] = "FU"

    def apply(self, stages, dag, steps_so_far):
        stage = get_stage(stages, self.stage_id, "fuse")
        check_schedulable(stage, "fuse")
        ids = list(self.fused_ids)
        if not ids:
            raise ScheduleError(f"fuse of stage {stage.name!r}: give at least one iterator")
        its = [get_iter(stage, k, "fuse") for k in ids]
        if ids != list(range(ids[0], ids[0] + len(ids))):
            raise ScheduleError(
                f"fuse of stage {stage.name!r}: iterators {[it.name for it in its]} are not "
                "adjacent in the current loop order "
                f"{[it.name for it in stage.iters]}; reorder them next to each other first"
            )
        for it in its:
            check_no_pragma(stage, it, "fuse")
            if it.annotation != "none":
                raise ScheduleError(
                    f"fuse of stage {stage.name!r}: iterator {it.name!r} is annotated "
                    f"{it.annotation!r}; fuse before annotating"
                )
        name = "".join(f"{it.name}@" for it in its)
        kinds = {it.kind for it in its}
        kind = kinds.pop() if len(kinds) == 1 else "mixed"
        exts = [it.extent for it in its]
        ext = None if None in exts else math.prod(exts)
        fused = Iterator(name, ext, kind, "none")
        new = stage.with_(
            iters=stage.iters[: ids[0]] + (fused,) + stage.iters[ids[-1] + 1 :],
            relations=stage.relations + (FuseRel(tuple(it.name for it in its), name),),
        )
        stages = set_stage(stages, self.stage_id, new)
        return move_attachments(stages, stage.name, [it.name for it in its], name)

    def to_json(self) -> list:
        return ["FU", self.stage_id, list(self.fused_ids)]

    @classmethod
    def from_json(cls, rec) -> FuseStep:
        return cls(rec[1], tuple(rec[2]))


@dataclass(frozen=True)
class AnnotationStep:
    """``AN``: parallel / vectorize / unroll / bind an iterator (annotation name as in
    tensorir.stage.ANNOTATIONS; the record stores TVM's integer code)."""

    stage_id: int
    iter_id: int
    annotation: str
    code: ClassVar[str] = "AN"

    def apply(self, stages, dag, steps_so_far):
        ann = self.annotation
        what = "bind" if ann in THREAD_NAMES else (ann if ann != "none" else "annotate")
        stage = get_stage(stages, self.stage_id, what)
        check_schedulable(stage, what)
        it = get_iter(stage, self.iter_id, what)
        where = f"{what} of {stage.name}.{it.name}"
        if ann not in ANNOTATION_CODES or ann == "none":
            raise ScheduleError(
                f"{where}: unknown annotation {ann!r}; use parallel, vectorize, unroll or a "
                f"thread name {list(THREAD_NAMES)}"
            )
        if it.annotation != "none":
            raise ScheduleError(
                f"{where}: the iterator is already annotated {it.annotation!r}; "
                "an iterator takes one annotation (split it to annotate the parts)"
            )
        if it.kind != "spatial":
            if ann in ("vectorize", "parallel"):
                raise ScheduleError(
                    f"{where}: cannot {ann} a {it.kind} iterator (it carries a reduction); "
                    f"{ann} a spatial iterator, or rfactor the reduction first"
                )
            if ann in THREAD_NAMES and not ann.startswith("threadIdx"):
                raise ScheduleError(
                    f"{where}: a {it.kind} iterator can only be bound to threadIdx.* "
                    f"(cross-thread reduction), not {ann!r}"
                )
        new_it = Iterator(it.name, it.extent, it.kind, ann)
        iters = stage.iters[: self.iter_id] + (new_it,) + stage.iters[self.iter_id + 1 :]
        return set_stage(stages, self.stage_id, stage.with_(iters=iters))

    def to_json(self) -> list:
        return ["AN", self.stage_id, self.iter_id, ANNOTATION_CODES[self.annotation]]

    @classmethod
    def from_json(cls, rec) -> AnnotationStep:
        code = ANNOTATION_CODES.get(rec[3], rec[3])  # names are accepted too
        if code not in ANNOTATION_NAMES:
            raise ScheduleError(f"AN record {rec}: unknown annotation code {code!r}")
        return cls(rec[1], rec[2], ANNOTATION_NAMES[code])


#: Accelerator pragmas (TVM's VTA ``env.dma_copy``, ``env.alu`` and the GEMM tensorize): the
#: pragma is recorded on the stage (``Stage.pragmas``) and lowering annotates the loop with
#: ``("pragma", name)``; a backend that knows them (codegen/vta) lowers that loop nest to
#: instructions, every other backend ignores them. ``tensor_core`` marks a 16x16(x16) fragment
#: loop nest that the CUDA backend runs as ``nvcuda::wmma`` calls
#: (:mod:`tensorir.passes.tensor_core`); elsewhere it runs as the scalar loops it is.
#: ``double_buffer`` on a loop makes lowering stage the shared buffers attached at it twice
#: over and load tile k + 1 while tile k is computed; ``software_pipeline_<N>`` (N = 3, 4) N
#: times over, tiles k + 1 .. k + N - 1 in flight (:mod:`tensorir.passes.double_buffer`).
# The accelerator pragmas, the tensor-core mark and the pipeline depths (one home: the pass).
LOOP_PRAGMAS = ("dma_copy", "alu", "gemm", "tensor_core", *PIPELINE_PRAGMAS)


@dataclass(frozen=True)
class PragmaStep:
    """``PR``: ``auto_unroll_max_step$N`` sets ``Stage.auto_unroll_max_step = N`` (lowering puts
    it on the stage's outermost loop); ``debug_skip_region`` is accepted and does nothing; a
    pragma of ``LOOP_PRAGMAS`` marks the iterator's loop (apply it after the loop steps of
    the stage: splitting or fusing a marked iterator is refused)."""

    stage_id: int
    iter_id: int
    pragma_type: str
    code: ClassVar[str] = "PR"

    def apply(self, stages, dag, steps_so_far):
        stage = get_stage(stages, self.stage_id, "pragma")
        check_schedulable(stage, "pragma")
        it = get_iter(stage, self.iter_id, "pragma")
        prag = self.pragma_type
        if prag == "debug_skip_region":
            return tuple(stages)
        if prag in LOOP_PRAGMAS:
            new = stage.with_(pragmas=stage.pragmas + ((it.name, prag),))
            return set_stage(stages, self.stage_id, new)
        key, sep, value = prag.partition("$")
        if key != "auto_unroll_max_step" or not sep or not value.isdigit():
            raise ScheduleError(
                f"pragma of {stage.name}.{it.name}: unknown pragma {prag!r}; supported are "
                f"'auto_unroll_max_step$<N>', 'debug_skip_region' and {list(LOOP_PRAGMAS)}"
            )
        new = stage.with_(auto_unroll_max_step=int(value))
        return set_stage(stages, self.stage_id, new)

    def to_json(self) -> list:
        return ["PR", self.stage_id, self.iter_id, self.pragma_type]

    @classmethod
    def from_json(cls, rec) -> PragmaStep:
        return cls(*rec[1:4])
