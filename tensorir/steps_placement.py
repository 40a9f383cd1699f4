"""The placement steps: compute_at, compute_inline, compute_root and storage_align, and the
check that every attachment still hangs under a consumer's loop after a step (re-exported by
:mod:`tensorir.steps`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .stage import Stage
from .steps_common import (
    ScheduleError,
    attached_to,
    check_int,
    check_schedulable,
    get_iter,
    get_stage,
    refresh_extents,
    set_stage,
)


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
        check_int(self.factor, f"storage_align of {stage.name}.{it.name}: factor")
        check_int(self.offset, f"storage_align of {stage.name}.{it.name}: offset", minimum=0)
        dim = axes.index(it.name)
        kept = tuple(a for a in stage.storage_align if a[0] != dim)
        new = stage.with_(storage_align=kept + ((dim, self.factor, self.offset),))
        return set_stage(stages, self.stage_id, new)

    def to_json(self) -> list:
        return ["SA", self.stage_id, self.iter_id, self.factor, self.offset]

    @classmethod
    def from_json(cls, rec) -> StorageAlignStep:
        return cls(*rec[1:5])


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
