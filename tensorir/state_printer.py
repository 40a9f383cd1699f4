"""Text forms of a schedule: the state as a loop tree, and the steps as TE-like Python code.

``state_str`` is TVM's ``State::ToStr``: state identity, deduplication and the measured set all
use this string, so it must be deterministic. ``print_python_code`` mirrors
``ComputeDAG.print_python_code_from_state`` (used by ``print_best``).
"""

from __future__ import annotations

import re

from .printer import expr_str
from .stage import Stage
from .tensor import ComputeOp

_LOOP_WORD = {"none": "for"}  # every other annotation prints as its own name


def state_str(stages, delete_trivial_loop: bool = True) -> str:
    """``Placeholder: A, B`` then the loop tree of the root stages, attached stages nested
    under their attach iterator; loops of extent 1 omitted (TVM default)."""
    placeholders = [s.name for s in stages if s.is_placeholder]
    lines = [f"Placeholder: {', '.join(placeholders)}"]
    children: dict[tuple[str, str], list[Stage]] = {}
    for s in stages:  # stage-id order keeps the printout deterministic
        if s.compute_at == "iter":
            children.setdefault(s.attach, []).append(s)
    for s in stages:
        if not s.is_placeholder and s.compute_at == "root":
            _print_stage(s, 0, children, delete_trivial_loop, lines)
    return "\n".join(lines) + "\n"


def _print_stage(stage, base, children, delete_trivial, lines) -> None:
    pad = " " * base
    if stage.auto_unroll_max_step:
        lines.append(f"{pad}{stage.name} auto_unroll: {stage.auto_unroll_max_step}")
    if stage.storage_align:
        lines.append(f"{pad}{stage.name} storage_offset: {stage.storage_align[-1][2]}")
    indent = 0
    for it in stage.iters:
        prag = "".join(f" pragma({p})" for name, p in stage.pragmas if name == it.name)
        if not (delete_trivial and it.extent == 1 and not prag):  # a pragma keeps its loop
            word = _LOOP_WORD.get(it.annotation, it.annotation)
            rng = "(None)" if it.extent is None else f"(0,{it.extent})"
            lines.append(f"{' ' * (base + indent)}{word} {it.name} {rng}{prag}")
            indent += 2
        for sub in children.get((stage.name, it.name), ()):
            _print_stage(sub, base + indent, children, delete_trivial, lines)
    lines.append(f"{' ' * (base + indent)}{stage.name} = ...")


def op_str(op) -> str:
    """One line for a compute op, e.g. ``C.local[i.c, j.c] = sum(k: (A[i.c, k]*B[k, j.c]))``."""
    if not isinstance(op, ComputeOp):
        return f"{op.name}: placeholder{list(op.shape)} {op.dtype}"
    lhs = f"{op.name}[{', '.join(ax.name for ax in op.axes)}]"
    axes = op.reduce_axes
    if not axes:
        return f"{lhs} = {expr_str(op.body)}"
    red = op.body
    rng = ", ".join(f"{ax.name}:{ax.extent}" for ax in axes)
    cond = "" if red.condition is None else f" if {expr_str(red.condition)}"
    return f"{lhs} = {red.combiner}({rng}; {expr_str(red.source)}{cond})"


# ----------------------------------------------------------------------------- python code


def _clean(name: str, prefix: str = "") -> str:
    """TVM's CleanName: a valid Python identifier for a stage or iterator name."""
    # "a@b@" -> "a_b_fused", "a@b@.0" -> "a_b_fused_0" (TE's "a.b.fused", "a.b.fused.o")
    out = re.sub(r"@(?=\.|$)", "@fused", name).replace(".", "_").replace("@", "_")
    return f"{prefix}_{out}" if prefix else out


def _axes_line(stage: Stage) -> str:
    op = _clean(stage.name)
    names = ", ".join(_clean(it.name, op) for it in stage.root_iters)
    lhs = names + ("," if len(stage.root_iters) == 1 else "")
    return f"{lhs} = tuple({op}.op.axis) + tuple({op}.op.reduce_axis)"


def print_python_code(state) -> str:
    """The state's steps as TE schedule code (``s[C].split(...)`` ...), one line per call."""
    from . import steps as st
    from .schedule import State

    cur = State(state.dag)
    lines = [_axes_line(s) for s in cur.stages if not s.is_placeholder]
    for k, step in enumerate(state.steps):
        before = cur.stages
        cur._apply(step)
        lines.extend(_step_code(step, before, cur.stages, state.steps[:k], st))
    return "\n".join(lines) + "\n"


def _step_code(step, before, after, history, st) -> list[str]:
    stage = before[step.stage_id]
    op = _clean(stage.name)
    s = f"s[{op}]"

    def it(k, stg=stage):
        return _clean(stg.iters[k].name, _clean(stg.name))

    if isinstance(step, st.SplitStep | st.FollowSplitStep | st.FollowFusedSplitStep):
        return _split_code(step, stage, after[step.stage_id], history, st)
    if isinstance(step, st.ReorderStep):
        return [f"{s}.reorder({', '.join(it(k) for k in step.after_ids)})"]
    if isinstance(step, st.FuseStep):
        new = after[step.stage_id].iters[step.fused_ids[0]]
        args = ", ".join(it(k) for k in step.fused_ids)
        return [f"{_clean(new.name, op)} = {s}.fuse({args})"]
    if isinstance(step, st.AnnotationStep):
        ann = step.annotation
        if ann in st.THREAD_NAMES:
            return [f'{s}.bind({it(step.iter_id)}, te.thread_axis("{ann}"))']
        return [f"{s}.{ann}({it(step.iter_id)})"]
    if isinstance(step, st.PragmaStep):
        if step.pragma_type == "debug_skip_region":
            return [f'{s}.pragma({it(step.iter_id)}, "debug_skip_region")']
        if step.pragma_type in st.LOOP_PRAGMAS:
            return [f'{s}.pragma({it(step.iter_id)}, "{step.pragma_type}")']
        n = step.pragma_type.split("$")[1]
        return [
            f'{s}.pragma({it(step.iter_id)}, "auto_unroll_max_step", {n})',
            f'{s}.pragma({it(step.iter_id)}, "unroll_explicit", True)',
        ]
    return _dataflow_code(step, stage, before, after, st)


def _split_code(step, stage, new_stage, history, st) -> list[str]:
    op = _clean(stage.name)
    if isinstance(step, st.SplitStep):
        lengths, i2o = list(step.lengths), step.inner_to_outer
    elif isinstance(step, st.FollowSplitStep):
        lengths, i2o = list(step.lengths(history)), True
    else:
        lengths, i2o = [step.length(history)], step.factor_or_nparts
    n = len(lengths)
    outs = [_clean(x.name, op) for x in new_stage.iters[step.iter_id : step.iter_id + n + 1]]
    to_split = _clean(stage.iters[step.iter_id].name, op)
    lines = []
    if i2o:
        for k in range(n - 1, -1, -1):
            lines.append(
                f"{outs[k]}, {outs[k + 1]} = s[{op}].split({to_split}, factor={lengths[k]})"
            )
            to_split = outs[k]
    else:
        for k in range(n):
            lines.append(
                f"{outs[k]}, {outs[k + 1]} = s[{op}].split({to_split}, nparts={lengths[k]})"
            )
            to_split = outs[k + 1]
    return lines


def _dataflow_code(step, stage, before, after, st) -> list[str]:
    op = _clean(stage.name)
    s = f"s[{op}]"
    if isinstance(step, st.ComputeAtStep):
        target = before[step.target_stage_id]
        it = _clean(target.iters[step.target_iter_id].name, _clean(target.name))
        return [f"{s}.compute_at(s[{_clean(target.name)}], {it})"]
    if isinstance(step, st.ComputeInlineStep):
        return [f"{s}.compute_inline()"]
    if isinstance(step, st.ComputeRootStep):
        return [f"{s}.compute_root()"]
    if isinstance(step, st.StorageAlignStep):
        it = _clean(stage.iters[step.iter_id].name, op)
        return [f"{s}.storage_align({it}, {step.factor}, {step.offset})"]
    if isinstance(step, st.CacheReadStep):
        new = after[step.stage_id + 1]
        readers = ", ".join(_clean(before[r].name) for r in step.reader_stage_ids)
        return [
            f'{_clean(new.name)} = s.cache_read({op}, "{step.scope_name}", [{readers}])',
            _axes_line(new),
        ]
    if isinstance(step, st.CacheWriteStep):
        new, orig = after[step.stage_id], after[step.stage_id + 1]
        return [
            f'{_clean(new.name)} = s.cache_write({op}, "{step.scope_name}")',
            _axes_line(new),
            _axes_line(orig),
        ]
    if isinstance(step, st.RfactorStep):
        new, orig = after[step.stage_id], after[step.stage_id + 1]
        it = _clean(stage.iters[step.iter_id].name, op)
        return [
            f"{_clean(new.name)} = s.rfactor({op}, {it}, {step.factor_iter_id})",
            _axes_line(new),
            _axes_line(orig),
        ]
    raise TypeError(f"print_python_code: unknown step {type(step).__name__}")
