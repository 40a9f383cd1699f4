"""What every transform step shares: :class:`ScheduleError`, the annotation codes of TVM
records, and the helpers that look up a stage or an iterator by id, check arguments, replace a
stage, move attachments and derive iterator extents (re-exported by :mod:`tensorir.steps`)."""

from __future__ import annotations

import math

from .stage import Iterator, SplitRel, Stage


class ScheduleError(ValueError):
    """A schedule step cannot be applied; the message names the stage, the iterator and the fix.

    Re-exported by :mod:`tensorir.steps` and :mod:`tensorir.schedule` (it lives with the
    steps' helpers because the steps raise it).
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


def check_no_pragma(stage: Stage, it: Iterator, what: str) -> None:
    marks = [p for name, p in stage.pragmas if name == it.name]
    if marks:
        raise ScheduleError(
            f"{what} of {stage.name}.{it.name}: the loop carries pragma {marks[0]!r}, which "
            "would be lost; apply pragmas after the loop steps"
        )


def check_int(value, what: str, allow_none: bool = False, minimum: int = 1) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ScheduleError(f"{what} must be {kind}{' or None' if allow_none else ''}, "
                            f"got {value!r}")  # fmt: skip
