"""One operator's entry in the operator table (:class:`OpEntry`), its attribute validation
and the builders of the common entry shapes (one-input, broadcasting two-input, predicate).

The table itself, :data:`tensorir.ops.registry.OPS`, is assembled by ``registry.py`` from the
family modules ``registry_nn.py``, ``registry_math.py`` and ``registry_transform.py``;
everything here is re-exported from :mod:`tensorir.ops.registry`, where users import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..tensor import TensorError
from . import reference as ref
from . import shape_rules as rules

REQUIRED = object()  # marks an attribute without a default


class OpAttrError(TensorError, TypeError):
    """An op is called with an unknown or missing attribute, or the wrong number of inputs.

    The one error of attribute validation, for ``compute_op`` and the graph's ``make_call``
    alike; it is a :class:`TensorError` (a ValueError) and, as Python does for bad
    arguments, a TypeError.
    """


@dataclass(frozen=True)
class OpEntry:
    """Everything the project knows about one operator, in one place (Relay's op registry).

    Attributes
    ----------
    name : str
        The Relay op name (docs/graph-ops.md).
    inputs : tuple of str
        The input names in Relay's order; ``("*data",)`` means any number, at least one.
    attrs : mapping
        Attribute name -> Relay default (:data:`REQUIRED`: no default; a callable: follows
        from the other attributes).
    pattern : int
        Relay's fusion pattern (``tensorir.ops.shape_rules.ELEMWISE`` ... ``OPAQUE``).
    shape_rule : callable
        ``(shapes, dtypes, attrs) -> (shape, dtype)`` on plain shapes; may complete
        attributes that follow from the shapes (conv's ``channels``, dense's ``units``).
    compute : callable
        ``(input tensors, attrs) -> Tensor``: the te computation (``compute_op``).
    reference : callable
        ``(attrs, out_shape, *arrays) -> array``: the numpy implementation
        (``tensorir.ops.reference``), the ground truth compiled code is checked against.
    fix : callable, optional
        Canonicalises attribute values (int padding -> 4-tuple, ...).
    """

    name: str
    inputs: tuple[str, ...]
    attrs: Mapping
    pattern: int
    shape_rule: Callable
    compute: Callable
    reference: Callable
    fix: Callable | None = None

    def __post_init__(self):
        object.__setattr__(self, "attrs", MappingProxyType(dict(self.attrs)))

    @property
    def variadic(self) -> bool:
        return self.inputs[:1] == ("*data",)

    @property
    def arity(self) -> int | None:
        """How many inputs the op takes (None: any number, at least one)."""
        return None if self.variadic else len(self.inputs)

    @property
    def defaults(self) -> Mapping:
        """The attribute defaults (the name the graph layer's OpDef used)."""
        return self.attrs

    @property
    def infer(self) -> Callable:
        """The shape rule (the name the graph layer's OpDef used)."""
        return self.shape_rule

    def input_names(self, nargs: int) -> list[str]:
        if self.variadic:
            return [f"data{i}" for i in range(nargs)]
        return list(self.inputs)

    def normalize(self, attrs: Mapping | None, nargs: int) -> dict:
        """Check the input count and attribute names, fill defaults, canonicalise values.

        The one attribute validation of ``compute_op`` and the graph's ``make_call``.

        Raises
        ------
        OpAttrError
            Wrong number of inputs, unknown attribute, missing required attribute or an
            attribute value of the wrong form (a layout the op does not take, ...).
        """
        if self.variadic:
            if nargs < 1:
                raise OpAttrError(f"{self.name}: takes at least 1 input(s), got {nargs}")
        elif nargs != len(self.inputs):
            raise OpAttrError(
                f"{self.name}: takes {len(self.inputs)} input(s) ({', '.join(self.inputs)}), "
                f"got {nargs}"
            )
        full = fill_attrs(self.name, self.attrs, attrs)
        if self.fix is not None:
            try:
                full = self.fix(full)
            except TypeError as e:  # the canonicalisers do not know the op's name
                raise OpAttrError(f"{self.name}: {e}") from None
        return full


def fill_attrs(op: str, table: Mapping, attrs: Mapping | None) -> dict:
    """``attrs`` completed with the defaults of ``table`` (``op``'s attribute table), after
    checking the names: the body of ``registry.op_attrs`` and :meth:`OpEntry.normalize`.

    Raises
    ------
    OpAttrError
        For an unknown attribute or a missing required attribute.
    """
    attrs = dict(attrs or {})
    unknown = sorted(set(attrs) - set(table))
    if unknown:
        raise OpAttrError(
            f"{op}: unknown attribute(s) {unknown}; {op} takes {sorted(table) or 'no attributes'}"
        )
    out = {}
    for name, default in table.items():
        if name in attrs:
            out[name] = attrs[name]
        elif default is REQUIRED:
            raise OpAttrError(f"{op}: attribute {name!r} is required")
        else:
            out[name] = default
    for name, value in out.items():  # defaults that depend on other attributes
        if callable(value):
            out[name] = value(out)
    return out


def unary_entry(
    name, compute, reference, attrs=None, rule=rules.unary_rule, pattern=rules.ELEMWISE
):
    """A one-input entry (``data``); element-wise unless ``pattern`` says otherwise."""
    if attrs is None:  # attribute-free: the compute and reference take the input alone
        compute, reference = on_first(compute), ref.unary_ref(reference)
    return OpEntry(name, ("data",), attrs or {}, pattern, rule, compute, reference)


def on_first(f):
    """``f`` of the first input, as an entry's compute ``(inputs, attrs) -> Tensor``."""
    return lambda ins, a: f(ins[0])


def binary_entry(name, compute, reference):
    """A broadcasting two-input arithmetic op (``lhs``, ``rhs``)."""
    return OpEntry(
        name,
        ("lhs", "rhs"),
        {},
        rules.BROADCAST,
        rules.binary_rule,
        lambda ins, a: compute(ins[0], ins[1]),
        ref.binary_ref(reference),
    )


def predicate_entry(name, compute, reference):
    """A broadcasting two-input op with a bool result (comparisons, logical and/or)."""
    rule = rules.logical_rule if name.startswith("logical") else rules.compare_rule
    return OpEntry(
        name,
        ("lhs", "rhs"),
        {},
        rules.BROADCAST,
        rule,
        lambda ins, a: compute(ins[0], ins[1]),
        reference,
    )
