"""The user-facing schedule State: TVM auto_scheduler's State API over immutable stage data.

``State`` is a thin mutable wrapper: ``stages`` (a tuple of :class:`~tensorir.stage.Stage`,
placeholders included, in current stage-id order) and ``steps`` (the history, a tuple of step
records from :mod:`tensorir.steps`). Each method builds one step record from the names or
objects it is given, applies it to the current data (pure, copy-on-write) and only then
commits, so a step that raises leaves the state unchanged.

Stages are addressed by a Tensor (``state[C]``), an op name or a stage id; iterators by an
:class:`~tensorir.stage.Iterator` from ``state[C].iters``, by name or by index.

Example
-------
>>> s = dag.get_init_state()
>>> io, ii = s.split(C, s[C].iters[0], [8])
>>> s.parallel(C, io)
"""

from __future__ import annotations

from . import steps as st
from .expr import TensorRead, walk
from .stage import Iterator, SplitRel, Stage, initial_stage
from .steps import ScheduleError
from .tensor import ComputeOp, PlaceholderOp, Tensor

__all__ = ["ScheduleError", "State", "replay", "replay_deferred"]


_DEFERRED = object()  # State's stages argument from replay_deferred: replay when first read


class State:
    """A loop state of a :class:`~tensorir.dag.ComputeDAG` plus the steps that made it.

    Parameters
    ----------
    dag : ComputeDAG
        The original computation; ``state.dag`` always stays this DAG (cache and rfactor
        stages only appear in ``state.stages`` / ``state.current_ops``).
    """

    def __init__(self, dag, stages=None, steps=()):
        self.dag = dag
        if stages is None:
            stages = tuple(initial_stage(op) for op in dag.ops)
        # _DEFERRED (replay_deferred): None until the stages are first read.
        self._stage_data: tuple[Stage, ...] | None = None if stages is _DEFERRED else tuple(stages)
        self._steps: tuple = tuple(steps)
        self._tensor_cache: dict[int, Tensor] = {}

    @property
    def _stages(self) -> tuple[Stage, ...]:
        # None: a state from replay_deferred whose steps are replayed on first use.
        if self._stage_data is None:
            self._stage_data = replay(self.dag, self._steps)._stage_data
        return self._stage_data

    @_stages.setter
    def _stages(self, stages) -> None:
        self._stage_data = stages

    # ------------------------------------------------------------------ views

    @property
    def stages(self) -> tuple[Stage, ...]:
        return self._stages

    @property
    def steps(self) -> tuple:
        return self._steps

    @property
    def current_ops(self) -> tuple:
        """The ops of the current stages (cache/rfactor ops included), producers first."""
        return tuple(s.op for s in self._stages)

    @property
    def tensors(self) -> tuple[Tensor, ...]:
        """One Tensor per current stage, in stage order (the objects bodies read)."""
        return tuple(self._tensor_of(s.op) for s in self._stages)

    @property
    def concrete(self) -> bool:
        """False while some split length is undefined (None), as in sketches."""
        for step in self._steps:
            if isinstance(step, st.SplitStep) and None in step.lengths:
                return False
        for s in self._stages:
            for rel in s.relations:
                if isinstance(rel, SplitRel) and None in rel.lengths:
                    return False
        return True

    def __getitem__(self, key) -> Stage:
        return self._stages[self.stage_id(key)]

    def stage_id(self, key) -> int:
        """The current id of a stage given as Tensor, op, Stage, name or id."""
        if isinstance(key, bool):
            key = repr(key)
        if isinstance(key, int):
            if 0 <= key < len(self._stages):
                return key
            name = key
        else:
            if isinstance(key, Tensor | Stage | ComputeOp | PlaceholderOp):
                name = key.name
            elif isinstance(key, str):
                name = key
            else:
                raise ScheduleError(
                    f"cannot address a stage by {key!r} ({type(key).__name__}); "
                    "use a Tensor, an op name or a stage id"
                )
            for k, s in enumerate(self._stages):
                if s.name == name:
                    return k
        raise ScheduleError(f"unknown stage {name!r}; stages are {[s.name for s in self._stages]}")

    def iter_id(self, stage, it) -> int:
        """The index of iterator ``it`` (Iterator, name or index) in ``stage``'s loop order."""
        s = self[stage]
        if s.is_placeholder:
            raise ScheduleError(f"stage {s.name!r} is a placeholder and has no iterators")
        names = [x.name for x in s.iters]
        if isinstance(it, int) and not isinstance(it, bool):
            if 0 <= it < len(names):
                return it
        else:
            name = it.name if isinstance(it, Iterator) else it
            if name in names:
                return names.index(name)
        raise ScheduleError(
            f"stage {s.name!r} has no iterator {getattr(it, 'name', it)!r}; "
            f"valid iterators are {names}"
        )

    # ------------------------------------------------------------------ plumbing

    def _tensor_of(self, op) -> Tensor:
        t = self._tensor_cache.get(id(op))
        if t is not None and t.op is op:
            return t
        t = _find_tensor(op, self.dag, self._stages)
        self._tensor_cache[id(op)] = t
        return t

    def _apply(self, step) -> int:
        """Apply ``step`` to a copy and commit it; returns the step's stage id."""
        new_stages = step.apply(self._stages, self.dag, self._steps)
        st.check_attachments(new_stages)
        self._stages = tuple(new_stages)
        self._steps = self._steps + (step,)
        return step.stage_id

    # ------------------------------------------------------------------ loop steps

    def split(self, stage, iterator, lengths, inner_to_outer=True) -> list[Iterator]:
        """Split ``iterator`` into ``len(lengths) + 1`` parts ``<it>.0`` (outermost) ... ``<it>.n``.

        Parameters
        ----------
        stage : Tensor, str or int
            The stage (its output tensor, its op name or its stage id).
        iterator : Iterator, str or int
            One of ``state[stage].iters`` (or its name or index).
        lengths : list of int or None
            With ``inner_to_outer`` (default), the extents of parts 1..n; the outermost extent
            is ``ceil(extent / prod(lengths))`` (non-divisible splits are guarded when
            lowered). Otherwise the part counts from outer to inner, the innermost derived.
            None marks an undefined length (sketches; the state is then not ``concrete``).
        inner_to_outer : bool
            Which of the two meanings ``lengths`` has.

        Returns
        -------
        list of Iterator
            The new iterators, outermost first.
        """
        sid, iid = self.stage_id(stage), self.iter_id(stage, iterator)
        try:
            lengths = tuple(lengths)
        except TypeError as exc:
            raise ScheduleError(
                f"split of {self._stages[sid].name}: lengths must be a list of ints, "
                f"got {lengths!r}"
            ) from exc
        ext = self._stages[sid].iters[iid].extent
        self._apply(st.SplitStep(sid, iid, ext, lengths, bool(inner_to_outer)))
        return list(self._stages[sid].iters[iid : iid + len(lengths) + 1])

    def follow_split(self, stage, iterator, src_step_id, n_split) -> list[Iterator]:
        """Split like the earlier SplitStep ``src_step_id`` into ``n_split + 1`` parts."""
        sid, iid = self.stage_id(stage), self.iter_id(stage, iterator)
        self._apply(st.FollowSplitStep(sid, iid, src_step_id, n_split))
        return list(self._stages[sid].iters[iid : iid + n_split + 1])

    def follow_fused_split(
        self, stage, iterator, src_step_ids, level, factor_or_nparts
    ) -> list[Iterator]:
        """Split in two by the product of ``lengths[level]`` of the SplitSteps given."""
        sid, iid = self.stage_id(stage), self.iter_id(stage, iterator)
        step = st.FollowFusedSplitStep(sid, iid, tuple(src_step_ids), level, bool(factor_or_nparts))
        self._apply(step)
        return list(self._stages[sid].iters[iid : iid + 2])

    def reorder(self, stage, order) -> None:
        """Put all iterators of ``stage`` in ``order`` (outermost first)."""
        sid = self.stage_id(stage)
        self._apply(st.ReorderStep(sid, tuple(self.iter_id(sid, it) for it in order)))

    def fuse(self, stage, iters) -> Iterator:
        """Fuse adjacent iterators into one named ``a@b@``; returns it."""
        sid = self.stage_id(stage)
        ids = tuple(self.iter_id(sid, it) for it in iters)
        self._apply(st.FuseStep(sid, ids))
        return self._stages[sid].iters[ids[0]] if ids else None

    def _annotate(self, stage, it, ann) -> None:
        sid = self.stage_id(stage)
        self._apply(st.AnnotationStep(sid, self.iter_id(sid, it), ann))

    def parallel(self, stage, iterator) -> None:
        self._annotate(stage, iterator, "parallel")

    def vectorize(self, stage, iterator) -> None:
        self._annotate(stage, iterator, "vectorize")

    def unroll(self, stage, iterator) -> None:
        self._annotate(stage, iterator, "unroll")

    def bind(self, stage, iterator, thread_name) -> None:
        """Bind to ``vthread``, ``blockIdx.x|y|z`` or ``threadIdx.x|y|z``."""
        if thread_name not in st.THREAD_NAMES:
            s = self[stage]
            name = getattr(iterator, "name", iterator)
            raise ScheduleError(
                f"bind of {s.name}.{name}: unknown thread name {thread_name!r}; "
                f"use one of {list(st.THREAD_NAMES)}"
            )
        self._annotate(stage, iterator, thread_name)

    def pragma(self, stage, iterator, pragma_type) -> None:
        """``auto_unroll_max_step$<N>`` (or the no-op ``debug_skip_region``)."""
        sid = self.stage_id(stage)
        self._apply(st.PragmaStep(sid, self.iter_id(sid, iterator), pragma_type))

    def storage_align(self, stage, iterator, factor, offset) -> None:
        """Pad the output dimension of axis ``iterator`` so ``stride % factor == offset``."""
        sid = self.stage_id(stage)
        self._apply(st.StorageAlignStep(sid, self.iter_id(sid, iterator), factor, offset))

    # ------------------------------------------------------------------ placement

    def compute_at(self, stage, target_stage, target_iter) -> None:
        """Compute ``stage`` inside loop ``target_iter`` of its consumer ``target_stage``.

        The target must read ``stage`` directly or through inlined stages. The stage's
        iterator extents become unknown (None) until bound inference (lowering). The
        attachment follows the target iterator: a split moves it to the innermost part, a
        fuse to the fused iterator.
        """
        sid, tid = self.stage_id(stage), self.stage_id(target_stage)
        self._apply(st.ComputeAtStep(sid, tid, self.iter_id(tid, target_iter)))

    def compute_inline(self, stage) -> None:
        """Inline an element-wise, non-output stage into its consumers."""
        self._apply(st.ComputeInlineStep(self.stage_id(stage)))

    def compute_root(self, stage) -> None:
        """Compute ``stage`` at the root (undoes compute_at / compute_inline)."""
        self._apply(st.ComputeRootStep(self.stage_id(stage)))

    # ------------------------------------------------------------------ dataflow

    def cache_read(self, stage, scope, reader_stages) -> Tensor:
        """Add a stage ``<name>.<scope>`` copying ``stage`` for ``reader_stages``.

        Parameters
        ----------
        stage : Tensor, str or int
            The stage to cache (often a placeholder).
        scope : str
            "shared", "local" or "global"; recorded as the new stage's ``scope``.
        reader_stages : list
            Stages that read ``stage``; their bodies read the copy instead.

        Returns
        -------
        Tensor
            The cache tensor; its stage is inserted at ``stage_id + 1`` with axes ``ax0``...
        """
        sid = self.stage_id(stage)
        if not isinstance(reader_stages, list | tuple):
            reader_stages = [reader_stages]
        readers = tuple(self.stage_id(r) for r in reader_stages)
        self._apply(st.CacheReadStep(sid, scope, readers))
        return self._tensor_of(self._stages[sid + 1].op)

    def cache_write(self, stage, scope) -> Tensor:
        """Compute ``stage`` into a new stage ``<name>.<scope>`` (at the same stage id; the
        original becomes a copy at ``stage_id + 1``); returns the new tensor."""
        sid = self.stage_id(stage)
        self._apply(st.CacheWriteStep(sid, scope))
        return self._tensor_of(self._stages[sid].op)

    def rfactor(self, stage, iterator, factor_iter_id) -> Tensor:
        """Factor the reduction over ``iterator`` into a new stage ``<name>.rf`` (at the same
        stage id) with that iterator as spatial axis ``factor_iter_id``; returns its tensor."""
        sid = self.stage_id(stage)
        self._apply(st.RfactorStep(sid, self.iter_id(sid, iterator), factor_iter_id))
        return self._tensor_of(self._stages[sid].op)

    def attached_stages(self, stage) -> tuple[Stage, ...]:
        """The stages attached (compute_at) to iterators of ``stage``, in stage order."""
        name = self[stage].name
        return tuple(s for s in self._stages if s.compute_at == "iter" and s.attach[0] == name)

    # ------------------------------------------------------------------ misc

    def copy(self) -> State:
        return State(self.dag, self._stages, self._steps)

    def __str__(self) -> str:
        from .state_printer import state_str

        return state_str(self._stages)

    def __repr__(self) -> str:
        return f"<State of {len(self._stages)} stages, {len(self._steps)} steps>"

    def _repr_html_(self) -> str:
        """The loop nest, highlighted (what a notebook shows)."""
        from .display import code_html

        head = f"<b>State</b> of {len(self._stages)} stages, {len(self._steps)} steps"
        return f"<div>{head}{code_html(str(self), 'python')}</div>"

    def to_json(self) -> list:
        """``[[], [step records]]``: the state field of a TVM measure record."""
        return [[], st.steps_to_json(self._steps)]

    @staticmethod
    def from_json(dag, data) -> State:
        """Replay a ``to_json()`` value (or a bare list of step records) on ``dag``."""
        if len(data) == 2 and data[0] == [] and isinstance(data[1], list):
            data = data[1]
        return replay(dag, st.steps_from_json(data))


def replay(dag, steps) -> State:
    """Apply ``steps`` to the initial state of ``dag`` (deterministic)."""
    state = State(dag)
    for step in steps:
        state._apply(step)
    return state


def replay_deferred(dag, steps) -> State:
    """The state of ``steps`` on ``dag``, replayed only when its stages are first read.

    A search keeps many states it never looks inside: the cost model and the builders take
    their step lists, and their identity is the step tuple. The GPU search gets its states
    back from worker processes as step lists, and replaying each in the tuning process (about
    5 ms a state on resnet-18's tasks) was most of that process's time (issue 29). The steps
    must be ones that replay cleanly (a worker made them by replaying); a bad list raises
    :class:`ScheduleError` on first use instead of here.
    """
    return State(dag, _DEFERRED, steps)


def _find_tensor(op, dag, stages) -> Tensor:
    """The Tensor object for ``op``: the DAG's, or the one consumers read, or a new one."""
    for t in dag.tensors:
        if t.op is op:
            return t
    for s in stages:
        if isinstance(s.op, ComputeOp):
            for node in walk(s.op.body):
                if isinstance(node, TensorRead) and node.tensor.op is op:
                    return node.tensor
    return Tensor(op)
