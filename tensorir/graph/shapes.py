"""The graph layer's names for the operator table.

The table itself, one :class:`~tensorir.ops.registry.OpEntry` per op with its attributes,
shape rule, pattern, compute and numpy reference, is ``tensorir.ops.registry``; the shape rules
and attribute canonicalisers are ``tensorir.ops.shape_rules``. This module re-exports them
under the names the graph layer has always used (``OPS``, ``OpDef``, ``get_op``...).
"""

from __future__ import annotations

from ..ops.registry import OPS, REQUIRED, OpAttrError, OpEntry
from ..ops.shape_rules import (
    BROADCAST,
    COMM_REDUCE,
    ELEMWISE,
    INJECTIVE,
    LAYOUT_PAIRS,
    OPAQUE,
    OUT_ELEMWISE_FUSABLE,
    TUPLE,
    ShapeError,
    broadcast_shapes,
    ntuple,
    pad_tuple,
    reshape_shape,
    window_out,
)

OpDef = OpEntry  # the graph layer's old name for an entry of the one table

__all__ = [
    "BROADCAST", "COMM_REDUCE", "ELEMWISE", "INJECTIVE", "LAYOUT_PAIRS", "OPAQUE", "OPS",
    "OUT_ELEMWISE_FUSABLE", "REQUIRED", "TUPLE", "OpAttrError", "OpDef", "OpEntry", "ShapeError",
    "broadcast_shapes", "get_op", "ntuple", "pad_tuple", "reshape_shape", "window_out",
]  # fmt: skip


def get_op(name: str) -> OpEntry:
    """The table entry of ``name`` (KeyError listing the known ops otherwise)."""
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known ops: {sorted(OPS)}") from None
