"""Transform steps: one frozen record per schedule primitive, each a pure ``apply``.

A schedule is a list of steps (TVM auto_scheduler's central idea), so it can be stored as JSON,
replayed on a fresh state and mutated. Every step stores ids, not names: ``stage_id`` indexes the
*current* stage list and ``iter_id`` the *current* iterator list of that stage (after all
earlier steps), exactly like TVM's records. ``apply(stages, dag, steps_so_far)`` returns a new
stage tuple or raises :class:`ScheduleError`; it never mutates its inputs.

Attachments (``Stage.attach``) are kept by *name*: splitting a target iterator moves the
attachment to the innermost child, fusing moves it to the fused iterator, reordering keeps it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from .stage import FuseRel, Iterator, SplitRel, Stage, initial_stage


class ScheduleError(ValueError):
    """A schedule step cannot be applied; the message names the stage, the iterator and the fix.

    Re-exported by :mod:`tensorir.schedule` (it lives here because the steps raise it).
    """


# Annotation names and their integer codes in TVM records (IteratorAnnotation).
ANNOTATION_CODES = {
    "none": 0, "unroll": 1, "vectorize": 2, "parallel": 3, "vthread": 4, "blockIdx.x": 5,
    "threadIdx.x": 6, "blockIdx.y": 7, "threadIdx.y": 8, "blockIdx.z": 9, "threadIdx.z": 10,
}  # fmt: skip
ANNOTATION_NAMES = {v: k for k, v in ANNOTATION_CODES.items()}
THREAD_NAMES = ("vthread", "blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x",
                "threadIdx.y", "threadIdx.z")  # fmt: skip


# ----------------------------------------------------------------------------- shared helpers


def get_stage(stages, stage_id: int, what: str) -> Stage:
    """``stages[stage_id]`` or a ScheduleError naming the valid range."""
    if not isinstance(stage_id, int) or not 0 <= stage_id < len(stages):
        names = [s.name for s in stages]
        raise ScheduleError(f"{what}: stage id {stage_id!r} is out of range; stages are {names}")
    return stages[stage_id]


def get_iter(stage: Stage, iter_id: int, what: str) -> Iterator:
    if not isinstance(iter_id, int) or not 0 <= iter_id < len(stage.iters):
        raise ScheduleError(
            f"{what} of stage {stage.name!r}: iterator id {iter_id!r} is out of range; "
            f"valid iterators are {[it.name for it in stage.iters]}"
        )
    return stage.iters[iter_id]


def check_schedulable(stage: Stage, what: str) -> None:
    """Loop steps need a compute stage that still has its own loops."""
    if stage.is_placeholder:
        raise ScheduleError(f"{what}: stage {stage.name!r} is a placeholder and has no loops")
    if stage.compute_at == "inline":
        raise ScheduleError(
            f"{what}: stage {stage.name!r} is inlined and has no loops; "
            "call compute_root on it first"
        )


def set_stage(stages, stage_id: int, stage: Stage) -> tuple[Stage, ...]:
    return tuple(stage if k == stage_id else s for k, s in enumerate(stages))


def move_attachments(stages, target: str, old_names, new_name: str) -> tuple[Stage, ...]:
    """Stages attached to ``target``'s iterators ``old_names`` now hang under ``new_name``."""
    old = set(old_names)
    out = []
    for s in stages:
        if s.compute_at == "iter" and s.attach[0] == target and s.attach[1] in old:
            s = s.with_(attach=(target, new_name))
        out.append(s)
    return tuple(out)


def attached_to(stages, name: str) -> list[Stage]:
    return [s for s in stages if s.compute_at == "iter" and s.attach[0] == name]


def split_extents(parent: int | None, lengths) -> list[int | None]:
    """Child extents of a split (outermost first); unknown parents give unknown children."""
    if parent is None:
        return [None] * (len(lengths) + 1)
    if any(x is None for x in lengths):
        return [None] + list(lengths)
    return [math.ceil(parent / math.prod(lengths))] + list(lengths)


def derive_extents(stage: Stage, root_extents: dict) -> dict:
    """Extent of every iterator name, from root extents through the stage's relations."""
    ext = dict(root_extents)
    for rel in stage.relations:
        if isinstance(rel, SplitRel):
            for child, e in zip(rel.children, split_extents(ext[rel.parent], rel.lengths)):
                ext[child] = e
        else:
            parts = [ext[p] for p in rel.parents]
            ext[rel.child] = None if None in parts else math.prod(parts)
    return ext


def refresh_extents(stage: Stage) -> Stage:
    """Recompute leaf extents: op extents at root, all unknown (None) when attached (as TVM)."""
    known = stage.compute_at != "iter"
    roots = {it.name: (it.extent if known else None) for it in stage.root_iters}
    ext = derive_extents(stage, roots)
    iters = tuple(Iterator(it.name, ext[it.name], it.kind, it.annotation) for it in stage.iters)
    return stage.with_(iters=iters)


def _check_no_pragma(stage: Stage, it: Iterator, what: str) -> None:
    marks = [p for name, p in stage.pragmas if name == it.name]
    if marks:
        raise ScheduleError(
            f"{what} of {stage.name}.{it.name}: the loop carries pragma {marks[0]!r}, which "
            "would be lost; apply pragmas after the loop steps"
        )


def _check_int(value, what: str, allow_none: bool = False, minimum: int = 1) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ScheduleError(f"{what} must be {kind}{' or None' if allow_none else ''}, "
                            f"got {value!r}")  # fmt: skip


# ----------------------------------------------------------------------------- loop steps


def apply_split(stages, stage_id, iter_id, lengths, inner_to_outer, what="split"):
    """Split one iterator; returns the new stage tuple (shared by SP, FSP and FFSP)."""
    stage = get_stage(stages, stage_id, what)
    check_schedulable(stage, what)
    it = get_iter(stage, iter_id, what)
    lengths = tuple(lengths)
    if not lengths:
        raise ScheduleError(f"{what} of {stage.name}.{it.name}: give at least one length")
    for x in lengths:
        _check_int(x, f"{what} of {stage.name}.{it.name}: every length", allow_none=True)
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
    _check_no_pragma(stage, it, what)
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
        _check_int(self.n_split, "follow_split: n_split")
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
            _check_no_pragma(stage, it, "fuse")
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
LOOP_PRAGMAS = ("dma_copy", "alu", "gemm", "tensor_core", "double_buffer", "software_pipeline_3",
                "software_pipeline_4")  # fmt: skip


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


# ----------------------------------------------------------------------------- placement steps


def _reads_through_inlined(stages, consumer: Stage, producer: str) -> bool:
    """Does ``consumer`` read ``producer`` directly or through inlined stages?"""
    by_name = {s.name: s for s in stages}
    todo = [t.name for t in consumer.op.input_tensors]
    seen = set()
    while todo:
        name = todo.pop()
        if name == producer:
            return True
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        s = by_name[name]
        if s.compute_at == "inline":
            todo.extend(t.name for t in s.op.input_tensors)
    return False


def _consumed_under(stages, target: Stage, producer: str, seen=None) -> bool:
    """Does ``target`` read ``producer`` (directly or through inlined stages), or does a stage
    attached inside ``target``'s loops (recursively) read it? Either way every read of the
    producer runs inside the target's loops, so it may be computed there (as in TVM, where a
    GEMM stage and its ALU consumer both sit at the output's tile loop)."""
    if _reads_through_inlined(stages, target, producer):
        return True
    seen = set() if seen is None else seen
    seen.add(target.name)
    return any(
        _consumed_under(stages, s, producer, seen)
        for s in attached_to(stages, target.name)
        if s.name not in seen and s.name != producer
    )


def _movable(stages, stage_id, what) -> Stage:
    stage = get_stage(stages, stage_id, what)
    if stage.is_placeholder:
        raise ScheduleError(
            f"{what}: stage {stage.name!r} is a placeholder (an input), it is not computed; "
            "cache_read it to get a stage you can place"
        )
    return stage


@dataclass(frozen=True)
class ComputeAtStep:
    """``CA``: compute the stage inside ``target_iter_id`` of a consumer stage; its iterator
    extents become unknown (None) until bound inference."""

    stage_id: int
    target_stage_id: int
    target_iter_id: int
    code: ClassVar[str] = "CA"

    def apply(self, stages, dag, steps_so_far):
        stage = _movable(stages, self.stage_id, "compute_at")
        check_schedulable(stage, "compute_at")
        target = get_stage(stages, self.target_stage_id, "compute_at")
        if target.is_placeholder or target.compute_at == "inline" or target is stage:
            raise ScheduleError(
                f"compute_at of {stage.name!r}: the target {target.name!r} must be another "
                "computed, non-inlined stage"
            )
        it = get_iter(target, self.target_iter_id, "compute_at target")
        if not _consumed_under(stages, target, stage.name):
            readers = [s.name for s in stages if not s.is_placeholder
                       and _reads_through_inlined(stages, s, stage.name)]  # fmt: skip
            raise ScheduleError(
                f"compute_at of {stage.name!r} at {target.name}.{it.name}: {target.name!r} "
                f"does not consume {stage.name!r}; attach it to one of its consumers {readers}"
            )
        new = refresh_extents(stage.with_(compute_at="iter", attach=(target.name, it.name)))
        return set_stage(stages, self.stage_id, new)

    def to_json(self) -> list:
        return ["CA", self.stage_id, self.target_stage_id, self.target_iter_id]

    @classmethod
    def from_json(cls, rec) -> ComputeAtStep:
        return cls(*rec[1:4])


@dataclass(frozen=True)
class ComputeInlineStep:
    """``CI``: substitute the stage's body into its consumers (no loops of its own)."""

    stage_id: int
    code: ClassVar[str] = "CI"

    def apply(self, stages, dag, steps_so_far):
        stage = _movable(stages, self.stage_id, "compute_inline")
        check_schedulable(stage, "compute_inline")
        why = None
        if stage.op.reduce_axes:
            why = "it is a reduction (only element-wise stages can be inlined)"
        elif stage.name in {t.name for t in dag.output_tensors}:
            why = "it is an output of the DAG"
        elif attached_to(stages, stage.name):
            names = [s.name for s in attached_to(stages, stage.name)]
            why = f"stages {names} are attached to it (compute_root them first)"
        if why:
            raise ScheduleError(f"compute_inline of {stage.name!r}: cannot inline, {why}")
        new = stage.with_(compute_at="inline", attach=None)
        return set_stage(stages, self.stage_id, new)

    def to_json(self) -> list:
        return ["CI", self.stage_id]

    @classmethod
    def from_json(cls, rec) -> ComputeInlineStep:
        return cls(rec[1])


@dataclass(frozen=True)
class ComputeRootStep:
    """``CR``: compute the stage at the root (undoes compute_at and compute_inline)."""

    stage_id: int
    code: ClassVar[str] = "CR"

    def apply(self, stages, dag, steps_so_far):
        stage = _movable(stages, self.stage_id, "compute_root")
        new = refresh_extents(stage.with_(compute_at="root", attach=None))
        return set_stage(stages, self.stage_id, new)

    def to_json(self) -> list:
        return ["CR", self.stage_id]

    @classmethod
    def from_json(cls, rec) -> ComputeRootStep:
        return cls(rec[1])


@dataclass(frozen=True)
class StorageAlignStep:
    """``SA``: pad the output buffer's dimension of axis ``iter_id`` so that its stride
    satisfies ``stride % factor == offset`` (recorded as ``(axis_index, factor, offset)``)."""

    stage_id: int
    iter_id: int
    factor: int
    offset: int
    code: ClassVar[str] = "SA"

    def apply(self, stages, dag, steps_so_far):
        stage = get_stage(stages, self.stage_id, "storage_align")
        check_schedulable(stage, "storage_align")
        it = get_iter(stage, self.iter_id, "storage_align")
        axes = [ax.name for ax in stage.op.axes]
        if it.name not in axes:
            raise ScheduleError(
                f"storage_align of {stage.name}.{it.name}: the iterator is not an axis of the "
                f"op's output; use one of {axes}"
            )
        _check_int(self.factor, f"storage_align of {stage.name}.{it.name}: factor")
        _check_int(self.offset, f"storage_align of {stage.name}.{it.name}: offset", minimum=0)
        dim = axes.index(it.name)
        kept = tuple(a for a in stage.storage_align if a[0] != dim)
        new = stage.with_(storage_align=kept + ((dim, self.factor, self.offset),))
        return set_stage(stages, self.stage_id, new)

    def to_json(self) -> list:
        return ["SA", self.stage_id, self.iter_id, self.factor, self.offset]

    @classmethod
    def from_json(cls, rec) -> StorageAlignStep:
        return cls(*rec[1:5])


# ----------------------------------------------------------------------------- dataflow steps

SCOPES = ("global", "shared", "local")


def unique_name(stages, base: str) -> str:
    """``base``, or ``base1``, ``base2``... when a stage already has that name."""
    taken = {s.name for s in stages}
    if base not in taken:
        return base
    k = 1
    while f"{base}{k}" in taken:
        k += 1
    return f"{base}{k}"


def base_scope(scope: str) -> str:
    """The storage class of a scope: ``"local.inp_buffer"`` (a tagged scope, TVM's
    accelerator buffers) is ``"local"``."""
    return scope.partition(".")[0]


def _check_scope(scope, what) -> None:
    if not isinstance(scope, str) or base_scope(scope) not in SCOPES:
        raise ScheduleError(
            f"{what}: unknown scope {scope!r}; use one of {list(SCOPES)} or a tagged local "
            "scope such as 'local.acc_buffer'"
        )
    if scope.startswith("global.") or scope.endswith("."):
        raise ScheduleError(f"{what}: scope {scope!r}: only shared/local scopes take a tag")


def rebind_ops(stages, new_ops) -> tuple[Stage, ...]:
    """Stages with their ops replaced one to one; loop structure and placement kept."""
    return tuple(s if s.op is op else s.with_(op=op) for s, op in zip(stages, new_ops))


@dataclass(frozen=True)
class CacheReadStep:
    """``CHR``: a new stage ``<name>.<scope>`` copying the stage's output, inserted at
    ``stage_id + 1``; the readers read the copy instead."""

    stage_id: int
    scope_name: str
    reader_stage_ids: tuple[int, ...]
    code: ClassVar[str] = "CHR"

    def apply(self, stages, dag, steps_so_far):
        from . import dag_rewrite

        stage = get_stage(stages, self.stage_id, "cache_read")
        if stage.compute_at == "inline":
            check_schedulable(stage, "cache_read")
        _check_scope(self.scope_name, f"cache_read of {stage.name!r}")
        if not self.reader_stage_ids:
            raise ScheduleError(f"cache_read of {stage.name!r}: give at least one reader stage")
        for rid in self.reader_stage_ids:
            reader = get_stage(stages, rid, "cache_read reader")
            if reader.is_placeholder or id(stage.op) not in dag_rewrite.reads(reader.op):
                readers = [s.name for s in stages if id(stage.op) in dag_rewrite.reads(s.op)]
                raise ScheduleError(
                    f"cache_read of {stage.name!r}: stage {reader.name!r} does not read it; "
                    f"its readers are {readers}"
                )
        name = unique_name(stages, f"{stage.name}.{self.scope_name}")
        ops = tuple(s.op for s in stages)
        new_ops, cache = dag_rewrite.cache_read(
            ops, self.stage_id, self.scope_name, self.reader_stage_ids, name
        )
        k = self.stage_id + 1
        cache_stage = initial_stage(cache).with_(scope=self.scope_name)
        out = stages[:k] + (cache_stage,) + tuple(stages[k:])
        return rebind_ops(out, new_ops)

    def to_json(self) -> list:
        return ["CHR", self.stage_id, self.scope_name, list(self.reader_stage_ids)]

    @classmethod
    def from_json(cls, rec) -> CacheReadStep:
        return cls(rec[1], rec[2], tuple(rec[3]))


def _copy_stage(old: Stage, copy_op) -> Stage:
    """The stage of cache_write's copy op: keep the spatial loop structure when no relation
    involves a reduce iterator, else start afresh (TVM always starts afresh)."""
    fresh = initial_stage(copy_op)
    derived = {it.name for it in old.root_iters if it.kind != "spatial"}
    reduce_touched = False
    for rel in old.relations:
        parents = (rel.parent,) if isinstance(rel, SplitRel) else rel.parents
        if derived & set(parents):
            reduce_touched = True
            derived.update(rel.children if isinstance(rel, SplitRel) else (rel.child,))
    keep = old.with_(op=copy_op, root_iters=fresh.root_iters)
    if reduce_touched:
        keep = keep.with_(iters=fresh.iters, relations=(), auto_unroll_max_step=0)
    else:
        keep = keep.with_(iters=tuple(it for it in old.iters if it.name not in derived))
    return refresh_extents(keep)


@dataclass(frozen=True)
class CacheWriteStep:
    """``CHW``: a new stage ``<name>.<scope>`` computing the body, inserted at ``stage_id``;
    the original (now at ``stage_id + 1``) becomes the copy ``C[i, j] = C.local[i, j]``."""

    stage_id: int
    scope_name: str
    code: ClassVar[str] = "CHW"

    def apply(self, stages, dag, steps_so_far):
        from . import dag_rewrite

        stage = get_stage(stages, self.stage_id, "cache_write")
        if stage.is_placeholder:
            raise ScheduleError(
                f"cache_write: stage {stage.name!r} is a placeholder and is never written; "
                "use cache_read"
            )
        check_schedulable(stage, "cache_write")
        _check_scope(self.scope_name, f"cache_write of {stage.name!r}")
        name = unique_name(stages, f"{stage.name}.{self.scope_name}")
        ops = tuple(s.op for s in stages)
        new_ops, cache, copy = dag_rewrite.cache_write(ops, self.stage_id, name)
        k = self.stage_id
        cache_stage = initial_stage(cache).with_(scope=self.scope_name)
        out = stages[:k] + (cache_stage, _copy_stage(stage, copy)) + tuple(stages[k + 1 :])
        return rebind_ops(out, new_ops)

    def to_json(self) -> list:
        return ["CHW", self.stage_id, self.scope_name]

    @classmethod
    def from_json(cls, rec) -> CacheWriteStep:
        return cls(rec[1], rec[2])


@dataclass(frozen=True)
class RfactorStep:
    """``RF``: factor the reduction over the reduce leaf ``iter_id`` into a new stage
    ``<name>.rf`` (inserted at ``stage_id``) whose extra spatial axis, at ``factor_iter_id``
    among its axes, is that iterator; the original reduces ``<name>.rf`` over it."""

    stage_id: int
    iter_id: int
    factor_iter_id: int
    code: ClassVar[str] = "RF"

    def apply(self, stages, dag, steps_so_far):
        from . import dag_rewrite

        stage = get_stage(stages, self.stage_id, "rfactor")
        check_schedulable(stage, "rfactor")
        it = get_iter(stage, self.iter_id, "rfactor")
        where = f"rfactor of {stage.name}.{it.name}"
        if it.kind != "reduce":
            raise ScheduleError(
                f"{where}: the iterator is {it.kind}; rfactor needs a reduce iterator (a "
                "reduce axis or a part of a split reduce axis)"
            )
        spatial = {ax.name for ax in stage.op.axes}
        hit = sorted(dag_rewrite.touched(stage.relations, it.name) & spatial)
        if hit:
            raise ScheduleError(
                f"{where}: the iterator is fused with spatial axes {hit}; rfactor a pure "
                "reduce iterator"
            )
        n_axes = len(stage.op.axes)
        if isinstance(self.factor_iter_id, bool) or self.factor_iter_id not in range(n_axes + 1):
            raise ScheduleError(
                f"{where}: factor_iter_id {self.factor_iter_id!r} must be in [0, {n_axes}]"
            )
        extents = derive_extents(stage, {r.name: r.extent for r in stage.root_iters})
        unknown = sorted(n for n in dag_rewrite.touched(stage.relations, it.name)
                         if extents[n] is None)  # fmt: skip
        if unknown:
            raise ScheduleError(
                f"{where}: the extents of {unknown} are undefined (split lengths None); "
                "rfactor needs concrete split lengths"
            )
        name = unique_name(stages, f"{stage.name}.rf")
        ops = tuple(s.op for s in stages)
        new_ops, rf_op, new_op = dag_rewrite.rfactor(
            ops, self.stage_id, stage.relations, extents, [x.name for x in stage.iters],
            it.name, self.factor_iter_id, name,
        )  # fmt: skip
        k = self.stage_id
        orig = initial_stage(new_op).with_(
            compute_at=stage.compute_at, attach=stage.attach, scope=stage.scope
        )
        out = stages[:k] + (initial_stage(rf_op), refresh_extents(orig)) + stages[k + 1 :]
        return rebind_ops(out, new_ops)

    def to_json(self) -> list:
        return ["RF", self.stage_id, self.iter_id, self.factor_iter_id]

    @classmethod
    def from_json(cls, rec) -> RfactorStep:
        return cls(*rec[1:4])


# ----------------------------------------------------------------------------- JSON

STEP_KINDS = (AnnotationStep, FuseStep, PragmaStep, ReorderStep, SplitStep, FollowSplitStep,
              FollowFusedSplitStep, StorageAlignStep, ComputeAtStep, ComputeInlineStep,
              ComputeRootStep, CacheReadStep, CacheWriteStep, RfactorStep)  # fmt: skip


def step_from_json(rec):
    """One step from its record, e.g. ``["SP", 2, 0, 1024, [8, 4], 1]``."""
    if not isinstance(rec, list | tuple) or not rec:
        raise ScheduleError(f"a step record is a non-empty list like ['SP', ...], got {rec!r}")
    for cls in STEP_KINDS:
        if cls.code == rec[0]:
            try:
                return cls.from_json(list(rec))
            except (TypeError, ValueError, IndexError) as exc:
                if isinstance(exc, ScheduleError):
                    raise
                raise ScheduleError(f"malformed {rec[0]} record {rec!r}: {exc}") from exc
    codes = [c.code for c in STEP_KINDS]
    raise ScheduleError(f"unknown step code {rec[0]!r} in {rec!r}; known codes are {codes}")


def steps_to_json(steps) -> list:
    """The steps as JSON-ready lists (TVM record encoding)."""
    return [s.to_json() for s in steps]


def steps_from_json(data) -> tuple:
    """Inverse of :func:`steps_to_json`."""
    return tuple(step_from_json(r) for r in data)


def check_attachments(stages) -> None:
    """Every attached stage must hang under an existing iterator of a non-inlined stage."""
    by_name = {s.name: s for s in stages}
    for s in stages:
        if s.compute_at != "iter":
            continue
        target, it = s.attach
        t = by_name.get(target)
        if t is None or t.compute_at == "inline" or it not in [x.name for x in t.iters]:
            raise ScheduleError(
                f"stage {s.name!r} is attached to {target}.{it}, which no longer exists after "
                "this step; compute_root the stage (or re-attach it) first"
            )
        if not _consumed_under(stages, t, s.name):
            raise ScheduleError(
                f"stage {s.name!r} is attached to {target}.{it}, but after this step "
                f"{target!r} no longer consumes {s.name!r}; compute_root it (or re-attach it "
                "to a consumer) first"
            )
