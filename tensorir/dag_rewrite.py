"""The op rewrites behind cache_read, cache_write and rfactor (TE's dataflow rewrites).

Pure functions on the current op tuple (producers first): they build new te-level ComputeOps and
return a new tuple. Whenever an op is replaced, every op that read it is rebuilt to read the new
tensor, transitively downstream, so each op in the result reads only ops of the result (what
lowering and bound inference rely on). Errors are checked by the callers in
:mod:`tensorir.steps`; these functions assume valid arguments.
"""

from __future__ import annotations

from .expr import (
    IterVar,
    Reduce,
    TensorRead,
    Var,
    binary,
    floordiv,
    floormod,
    if_then_else,
)
from .identity_cache import IdentityCache
from .stage import FuseRel, SplitRel
from .tensor import ComputeOp, Tensor, compute, reduce_identity
from .transform import rewrite, substitute


def reads(op) -> set[int]:
    """ids of the ops that ``op`` reads directly."""
    return {id(t.op) for t in op.input_tensors}


def _with_body(op: ComputeOp, body) -> ComputeOp:
    return ComputeOp(op.name, op.axes, body, op.tag, dict(op.attrs))


def _redirect(body, mapping: dict[int, Tensor]):
    """``body`` with reads of the ops in ``mapping`` (by id) reading the mapped tensors."""

    def fn(node):
        if isinstance(node, TensorRead) and id(node.tensor.op) in mapping:
            idx = tuple(rewrite(i, fn) for i in node.indices)
            return TensorRead(mapping[id(node.tensor.op)], idx, node.dtype)
        return None

    return rewrite(body, fn)


def rewire(ops, mapping: dict[int, Tensor], only: dict[int, dict[int, Tensor]] | None = None):
    """Rebuild ops so reads follow ``mapping`` (old op id -> new tensor), transitively.

    ``only`` adds redirections that apply to one op only (keyed by that op's id), as
    cache_read needs for its readers.
    """
    mapping = dict(mapping)
    out = []
    for op in ops:
        if isinstance(op, ComputeOp):
            local = {**mapping, **(only or {}).get(id(op), {})}
            body = _redirect(op.body, local) if local else op.body
            if body is not op.body:
                new = _with_body(op, body)
                mapping[id(op)] = Tensor(new)
                op = new
        out.append(op)
    return tuple(out)


def _tensor(op) -> Tensor:
    return Tensor(op)


# The rewrites are pure, so the same arguments may return the same objects. Replaying a sketch's
# cache_read / cache_write for each of its thousands of sampled states then gives every state
# the same new ops instead of fresh copies, and what is cached by op identity downstream (the
# inlined bodies of bound inference, an op's input tensors, the DAG of a state's ops) hits
# instead of being rebuilt per state. Entries keep their ops alive so that the ids in their
# keys stay theirs; bounded, most recently used last.
_MEMO = IdentityCache(256)


def _memoized(kind: str, ops, args: tuple, build):
    key = (kind, tuple(id(op) for op in ops), args)
    out = _MEMO.get(key)
    if out is None:
        out = build()
        _MEMO.put(key, out, keep=tuple(ops))
    return out


def cache_read(ops, index: int, scope: str, reader_ids, name: str):
    """Insert ``name[ax0, ...] = T[ax0, ...]`` after ``ops[index]`` and make the readers read it.

    Returns ``(new_ops, cache_op)``; ``scope`` is recorded by the caller on the stage. The same
    arguments (the same op objects) return the same result objects.
    """
    del scope  # the storage scope lives on the Stage, not on the op
    args = (index, tuple(reader_ids), name)
    return _memoized("cache_read", ops, args, lambda: _cache_read(ops, index, reader_ids, name))


def _cache_read(ops, index: int, reader_ids, name: str):
    src = ops[index]
    src_t = _tensor(src)
    cache_t = compute(src.shape, lambda *idx: src_t[tuple(idx)], name=name)
    only = {id(ops[r]): {id(src): cache_t} for r in reader_ids}
    rest = rewire(ops[index + 1 :], {}, only)
    return tuple(ops[: index + 1]) + (cache_t.op,) + rest, cache_t.op


def _fresh_axes(axes, suffix: str = ""):
    return tuple(IterVar(Var(ax.name + suffix), ax.dom_min, ax.extent, ax.kind) for ax in axes)


def cache_write(ops, index: int, name: str):
    """Split ``ops[index]`` (``C``) into ``name`` computing the body and ``C = name[...]``.

    The cache op's spatial axes are named ``<axis>.c`` (as TVM), its reduce axes keep their
    names. Returns ``(new_ops, cache_op, copy_op)``; the same arguments (the same op objects)
    return the same result objects.
    """
    return _memoized("cache_write", ops, (index, name), lambda: _cache_write(ops, index, name))


def _cache_write(ops, index: int, name: str):
    op = ops[index]
    axes = _fresh_axes(op.axes, ".c")
    red = _fresh_axes(op.reduce_axes)
    vmap = {a.var: b.var for a, b in zip(op.axes + op.reduce_axes, axes + red)}
    body = op.body
    if isinstance(body, Reduce):
        cond = None if body.condition is None else substitute(body.condition, vmap)
        body = Reduce(body.combiner, substitute(body.source, vmap), red, body.dtype, cond)
    else:
        body = substitute(body, vmap)
    cache = ComputeOp(name, axes, body, op.tag, dict(op.attrs))
    read = TensorRead(_tensor(cache), tuple(ax.var for ax in op.axes), op.dtype)
    copy = ComputeOp(op.name, op.axes, read, op.tag, dict(op.attrs))
    rest = rewire(ops[index + 1 :], {id(op): _tensor(copy)})
    return tuple(ops[:index]) + (cache, copy) + rest, cache, copy


# ----------------------------------------------------------------------------- rfactor


def touched(relations, axis: str) -> set[str]:
    """Names linked to ``axis`` through splits and fuses (TVM's PassUp/DownBitMaskOr), iterated
    to a fixed point so a fuse reached on the way down pulls in its other parents."""
    seen = {axis}
    while True:
        before = len(seen)
        for rel in reversed(relations):
            if isinstance(rel, SplitRel) and seen & set(rel.children):
                seen.add(rel.parent)
            elif isinstance(rel, FuseRel) and rel.child in seen:
                seen.update(rel.parents)
        for rel in relations:
            if isinstance(rel, SplitRel) and rel.parent in seen:
                seen.update(rel.children)
            elif isinstance(rel, FuseRel) and seen & set(rel.parents):
                seen.add(rel.child)
        if len(seen) == before:
            return seen


def _pass_up(relations, extents, values: dict) -> list:
    """Fill ``values`` (name -> Expr) for parents of known children; returns tail guards."""
    guards = []
    for rel in reversed(relations):
        if isinstance(rel, SplitRel):
            if not all(c in values for c in rel.children):
                continue
            acc, stride = None, 1
            for c in reversed(rel.children):
                term = values[c] if stride == 1 else values[c] * stride
                acc = term if acc is None else term + acc
                stride *= extents[c]
            values[rel.parent] = acc
            if stride > extents[rel.parent]:
                guards.append(acc < extents[rel.parent])
        elif rel.child in values:
            inner = 1
            for p in reversed(rel.parents):
                v = values[rel.child] if inner == 1 else floordiv(values[rel.child], inner)
                values[p] = v if p == rel.parents[0] else floormod(v, extents[p])
                inner *= extents[p]
    return guards


def rfactor(ops, index, relations, extents, leaf_names, axis, factor_axis, rf_name):
    """TE rfactor of ``ops[index]`` on the reduce leaf ``axis``.

    ``extents`` maps every iterator name of the stage to its extent and ``leaf_names`` lists
    the stage's leaves in loop order. The new op ``rf_name`` has ``axis`` as an extra spatial
    axis at position ``factor_axis`` and reduces over the untouched reduce axes plus the other
    touched leaves; the original op becomes a reduction over ``<axis>.v`` of it.
    Returns ``(new_ops, rf_op, new_op)``.
    """
    op = ops[index]
    red: Reduce = op.body
    touch = touched(relations, axis)
    axes = _fresh_axes(op.axes)
    vmap = {a.var: b.var for a, b in zip(op.axes, axes)}
    factor_iv = IterVar(Var(axis), 0, extents[axis], "spatial")
    values = {axis: factor_iv.var}
    new_red = []
    for ax in red.axes:
        if ax.name not in touch:
            iv = IterVar(Var(ax.name), ax.dom_min, ax.extent, "reduce")
            vmap[ax.var] = iv.var
            new_red.append(iv)
    for name in leaf_names:
        if name in touch and name != axis:
            iv = IterVar(Var(name), 0, extents[name], "reduce")
            values[name] = iv.var
            new_red.append(iv)
    guards = _pass_up(relations, extents, values)
    for ax in red.axes:
        if ax.name in touch:
            root = values[ax.name]
            vmap[ax.var] = root if ax.dom_min == 0 else root + ax.dom_min
    cond = None if red.condition is None else substitute(red.condition, vmap)
    for g in guards:
        cond = g if cond is None else binary("&&", cond, g)
    rf_axes = axes[:factor_axis] + (factor_iv,) + axes[factor_axis:]
    source = substitute(red.source, vmap)
    if new_red:
        rf_body = Reduce(red.combiner, source, tuple(new_red), red.dtype, cond)
    else:  # nothing left to reduce: a plain element-wise body, guarded like the reduction
        ident = reduce_identity(red.combiner, red.dtype)
        rf_body = source if cond is None else if_then_else(cond, source, ident)
    rf_op = ComputeOp(rf_name, rf_axes, rf_body, op.tag, dict(op.attrs))
    v = IterVar(Var(axis + ".v"), 0, extents[axis], "reduce")
    out_axes = _fresh_axes(op.axes)
    idx = [ax.var for ax in out_axes]
    idx.insert(factor_axis, v.var)
    read = TensorRead(_tensor(rf_op), tuple(idx), red.dtype)
    new_op = ComputeOp(op.name, out_axes, Reduce(red.combiner, read, (v,), red.dtype), op.tag,
                       dict(op.attrs))  # fmt: skip
    rest = rewire(ops[index + 1 :], {id(op): _tensor(new_op)})
    return tuple(ops[:index]) + (rf_op, new_op) + rest, rf_op, new_op


def root_extents(op) -> dict:
    """Extents of the op's root iterators by name."""
    return {ax.name: ax.extent for ax in op.axes + op.reduce_axes}


__all__ = ["cache_read", "cache_write", "reads", "rewire", "rfactor", "root_extents", "touched"]
