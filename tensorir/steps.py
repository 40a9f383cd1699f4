"""Transform steps: one frozen record per schedule primitive, each a pure ``apply``.

A schedule is a list of steps (TVM auto_scheduler's central idea), so it can be stored as JSON,
replayed on a fresh state and mutated. Every step stores ids, not names: ``stage_id`` indexes the
*current* stage list and ``iter_id`` the *current* iterator list of that stage (after all
earlier steps), exactly like TVM's records. ``apply(stages, dag, steps_so_far)`` returns a new
stage tuple or raises :class:`ScheduleError`; it never mutates its inputs.

Attachments (``Stage.attach``) are kept by *name*: splitting a target iterator moves the
attachment to the innermost child, fusing moves it to the fused iterator, reordering keeps it.

The steps live by family in sibling modules, re-exported here (import them from here):
``steps_common`` (ScheduleError, annotation codes, shared helpers), ``steps_loop`` (split,
follow_split, follow_fused_split, reorder, fuse, annotate, pragma), ``steps_placement``
(compute_at/inline/root, storage_align, check_attachments) and ``steps_dataflow`` (cache_read,
cache_write, rfactor). This module keeps the JSON encoding of the whole set.
"""

from __future__ import annotations

from .steps_common import (
    ANNOTATION_CODES,
    ANNOTATION_NAMES,
    THREAD_NAMES,
    ScheduleError,
    attached_to,
    check_int,
    check_no_pragma,
    check_schedulable,
    derive_extents,
    get_iter,
    get_stage,
    move_attachments,
    refresh_extents,
    set_stage,
    split_extents,
)
from .steps_dataflow import (
    SCOPES,
    CacheReadStep,
    CacheWriteStep,
    RfactorStep,
    base_scope,
    rebind_ops,
    unique_name,
)
from .steps_loop import (
    LOOP_PRAGMAS,
    AnnotationStep,
    FollowFusedSplitStep,
    FollowSplitStep,
    FuseStep,
    PragmaStep,
    ReorderStep,
    SplitStep,
    apply_split,
)
from .steps_placement import (
    ComputeAtStep,
    ComputeInlineStep,
    ComputeRootStep,
    StorageAlignStep,
    check_attachments,
)

__all__ = [
    "ANNOTATION_CODES",
    "ANNOTATION_NAMES",
    "LOOP_PRAGMAS",
    "SCOPES",
    "STEP_KINDS",
    "THREAD_NAMES",
    "AnnotationStep",
    "CacheReadStep",
    "CacheWriteStep",
    "ComputeAtStep",
    "ComputeInlineStep",
    "ComputeRootStep",
    "FollowFusedSplitStep",
    "FollowSplitStep",
    "FuseStep",
    "PragmaStep",
    "ReorderStep",
    "RfactorStep",
    "ScheduleError",
    "SplitStep",
    "StorageAlignStep",
    "apply_split",
    "attached_to",
    "base_scope",
    "check_attachments",
    "check_int",
    "check_no_pragma",
    "check_schedulable",
    "derive_extents",
    "get_iter",
    "get_stage",
    "move_attachments",
    "rebind_ops",
    "refresh_extents",
    "set_stage",
    "split_extents",
    "step_from_json",
    "steps_from_json",
    "steps_to_json",
    "unique_name",
]

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
