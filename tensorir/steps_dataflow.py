"""The dataflow steps, which add stages and rewrite the DAG's ops: cache_read, cache_write and
rfactor, with the storage scopes they accept (re-exported by :mod:`tensorir.steps`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .stage import SplitRel, Stage, initial_stage
from .steps_common import (
    ScheduleError,
    check_schedulable,
    derive_extents,
    get_iter,
    get_stage,
    refresh_extents,
)

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
