"""The operator table: one :class:`OpEntry` per op, and ``compute_op``, which builds an op's
te computation from its Relay name and attributes.

The op names, input orders and attribute names are those of docs/graph-ops.md. Every op has
one entry here (as in Relay's op registry) holding its inputs, its attributes with Relay's
defaults, its fusion pattern, its shape rule (``tensorir.ops.shape_rules``), its te compute and
its numpy reference (``tensorir.ops.reference``). The graph layer (``tensorir.graph.shapes``,
``make_call``, ``evaluate``, the fusion and layout passes) looks ops up in the same table and
validates attributes with the same :meth:`OpEntry.normalize` as ``compute_op``. An unknown op,
an unknown attribute, a missing required attribute or the wrong number of inputs raises an
:class:`OpAttrError` that names the op and says what is supported.

Chaining several ops into one ComputeDAG: stage names must be unique in a DAG, so pass the
same :class:`NameScope` to every call (``compute_op(op, ins, attrs, name_scope=scope)``); a
second ``T_add`` then becomes ``T_add_1``. ``scope.placeholder(shape)`` names inputs
``placeholder``, ``placeholder_1``, ... the same way.

The entries live by family and are assembled here: ``op_entry.py`` (:class:`OpEntry`,
:data:`REQUIRED`, :class:`OpAttrError`, the entry builders), ``registry_nn.py`` (convolutions,
dense, norms, pooling, softmax, resize), ``registry_math.py`` (element-wise, broadcasting,
logic, reductions) and ``registry_transform.py`` (data movement, slicing, indexing). Import
every name from this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from ..tensor import Tensor, TensorError
from . import packed_layout, registry_math, registry_nn, registry_transform
from ._util import NameScope
from .op_entry import REQUIRED, OpAttrError, OpEntry, fill_attrs

__all__ = [
    "OPS",
    "REQUIRED",
    "OpEntry",
    "SUPPORTED_OPS",
    "OpAttrError",
    "compute_op",
    "get_entry",
    "op_arity",
    "op_attr_defaults",
    "op_attrs",
]

_ENTRIES = (*registry_nn.ENTRIES, *registry_math.ENTRIES, *registry_transform.ENTRIES)

OPS: Mapping[str, OpEntry] = MappingProxyType({e.name: e for e in _ENTRIES})
"""The operator table: Relay op name -> its one :class:`OpEntry` (read-only)."""

SUPPORTED_OPS: tuple[str, ...] = tuple(sorted(OPS))


def op_attrs(op: str, attrs: Mapping | None = None) -> dict:
    """``attrs`` completed with the op's defaults, after checking the names.

    Raises
    ------
    OpAttrError
        For an unknown op, an unknown attribute or a missing required attribute.
    """
    return fill_attrs(op, _spec(op).attrs, attrs)


def op_attr_defaults(op: str) -> Mapping:
    """``op``'s attribute names and Relay defaults (read-only; :data:`REQUIRED` marks the
    ones without a default, a callable one that follows from the others)."""
    return MappingProxyType(_spec(op).attrs)


def op_arity(op: str) -> int | None:
    """How many inputs ``op`` takes (None: any number, at least one)."""
    return _spec(op).arity


def get_entry(op: str) -> OpEntry:
    """The table entry of ``op`` (:class:`OpAttrError` listing the known ops otherwise)."""
    return _spec(op)


def _spec(op: str) -> OpEntry:
    spec = OPS.get(op)
    if spec is None:
        raise OpAttrError(f"unknown op {op!r}; supported ops are {list(SUPPORTED_OPS)}")
    return spec


def compute_op(
    op: str,
    inputs: Sequence[Tensor],
    attrs: Mapping | None = None,
    *,
    name_scope: NameScope | None = None,
) -> Tensor:
    """The output tensor of Relay op ``op`` applied to ``inputs``.

    Parameters
    ----------
    op : str
        A Relay op name from :data:`SUPPORTED_OPS` (the table of docs/graph-ops.md).
    inputs : sequence of Tensor
        The op's inputs in Relay's order (e.g. data, weight).
    attrs : mapping, optional
        Relay attribute names to plain Python values; missing ones take Relay's defaults.
    name_scope : NameScope, optional
        Uniquifies stage names across calls that build one DAG (``T_add``, ``T_add_1``...).
        Without it stages get topi's names, which repeat from call to call.

    Returns
    -------
    Tensor
        The op's output; its producers (padding, winograd stages...) hang off it.

    Raises
    ------
    TensorError
        Unknown op or attribute, missing required attribute, wrong input count, or attribute
        values / shapes the op does not support; the message names the op.
    """
    spec = _spec(op)
    inputs = list(inputs)
    full = spec.normalize(attrs, len(inputs))
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TensorError(f"{op}: inputs must be tensors, got {type(t).__name__}")
    if name_scope is None:
        out = spec.compute(inputs, full)
    else:
        with name_scope:
            out = spec.compute(inputs, full)
    _check_conv_attrs(op, inputs, full, out)
    return out


def _check_conv_attrs(op: str, inputs, a: dict, out: Tensor) -> None:
    """Relay's informational conv attributes (channels, kernel_size) must match the shapes."""
    if "channels" not in a or packed_layout.is_packed(a["data_layout"]):
        return  # a packed conv's rule checked them on the unpacked shapes
    layout = a["data_layout"]
    channels = out.shape[layout.index("C")]
    if a["channels"] is not None and int(a["channels"]) != channels:
        raise TensorError(
            f"{op}: attribute 'channels' = {a['channels']} but the output has {channels} channels"
        )
    if a["kernel_size"] is None or op.startswith("nn.contrib_conv2d_winograd"):
        return
    nsp = len(layout) - 2
    w = inputs[1].shape
    ks = w[2:] if layout.startswith("NC") else w[:nsp]
    if tuple(int(k) for k in a["kernel_size"]) != tuple(ks):
        raise TensorError(
            f"{op}: attribute 'kernel_size' = {a['kernel_size']!r} but the weight "
            f"{list(w)} has a {'x'.join(map(str, ks))} kernel"
        )
