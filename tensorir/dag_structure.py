"""The structural identity of a ComputeDAG: one canonical text, and equality by it.

:func:`canonical_text` prints everything that changes what a DAG computes or how its kernel is
called: every op (name, dtype, shape, axis ranges, tag and attributes), every expression node
with its dtype and all its operands (call and ``if_then_else`` arguments included), constants
exactly (``repr`` of the value, not 6 significant digits) and the layout-free placeholders.
Loop variables print by position (``s0`` for the first spatial axis, ``r0`` for the first
reduction axis), so two DAGs that differ only in the names of their loop variables are equal.

The workload key hashes this text (``ComputeDAG.workload_key``), and code that shares one
compiled kernel between several DAGs checks :func:`structurally_equal` rather than trusting
equal keys.
"""

from __future__ import annotations

import dataclasses
import json

from .expr import Const, Expr, IterVar, Var
from .tensor import PlaceholderOp

__all__ = ["canonical_text", "structurally_equal"]


def structurally_equal(a, b) -> bool:
    """Whether two ComputeDAGs compute the same thing with the same kernel signature."""
    return a is b or canonical_text(a) == canonical_text(b)


def canonical_text(dag) -> str:
    """The full canonical print of ``dag`` (one line per op, then its I/O and layout facts)."""
    lines = []
    for op in dag.ops:
        if isinstance(op, PlaceholderOp):
            lines.append(f"{op.name} = placeholder {op.dtype}{list(op.shape)}")
            continue
        names = {id(ax.var): f"s{k}" for k, ax in enumerate(op.axes)}
        names.update({id(ax.var): f"r{k}" for k, ax in enumerate(op.reduce_axes)})
        axes = ", ".join(_node_text(ax, names) for ax in op.axes)
        extra = f" tag={op.tag!r} attrs={_attrs_text(op.attrs)}"
        lines.append(f"{op.name}({axes}) {op.dtype}{extra} = {_node_text(op.body, names)}")
    lines.append("tensors: " + ", ".join(t.name for t in dag.tensors))
    lines.append(f"layout_free: {sorted(dag.layout_free_placeholders)}")
    return "".join(line + "\n" for line in lines)


def _node_text(node, names: dict) -> str:
    """Any expression node, generically: its class, then every field (so a field added to a
    node class later is part of the identity without touching this function)."""
    if isinstance(node, Var):
        # Vars compare by identity: name them by their position among the op's axes.
        return names.get(id(node), f"free:{node.name}") + f":{node.dtype}"
    if isinstance(node, Const):
        return f"{node.value!r}:{node.dtype}"
    if isinstance(node, IterVar):
        return f"{_node_text(node.var, names)}[{node.dom_min}:+{node.extent}]{node.kind}"
    if isinstance(node, Expr) and dataclasses.is_dataclass(node):
        fields = []
        for f in dataclasses.fields(node):
            fields.append(_field_text(getattr(node, f.name), names))
        return f"{type(node).__name__}({', '.join(fields)})"
    raise TypeError(f"canonical_text: no canonical form for {type(node).__name__} ({node!r})")


def _field_text(value, names: dict) -> str:
    if isinstance(value, Expr | IterVar):
        return _node_text(value, names)
    if isinstance(value, tuple | list):
        return "(" + ", ".join(_field_text(v, names) for v in value) + ")"
    if value is None or isinstance(value, str | int | float | bool):
        return repr(value)
    if hasattr(value, "op") and hasattr(value.op, "name"):  # a Tensor read by a TensorRead
        return f"tensor:{value.op.name}"
    raise TypeError(f"canonical_text: no canonical form for {type(value).__name__} ({value!r})")


def _attrs_text(attrs: dict) -> str:
    def exact(value):
        if hasattr(value, "tolist"):  # numpy arrays and scalars: every element, not a summary
            return {"dtype": str(getattr(value, "dtype", "")), "value": value.tolist()}
        # Anything else by its repr: at worst (an address in it) equal DAGs get different
        # texts and share nothing, never the other way round.
        return f"{type(value).__name__}:{value!r}"

    return json.dumps(attrs, sort_keys=True, default=exact)
