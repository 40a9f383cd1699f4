"""The network IR: a Relay-like graph of operator calls over typed tensors.

Nodes are frozen dataclasses compared and hashed by identity (as Relay's are): a
subexpression used twice is one shared ``Call`` object, and two ``Var`` objects with the same
name are still two variables. Every node knows its ``shape`` and ``dtype``; a ``Call`` gets them
from the op's shape rule when it is built (``make_call``), so a graph that exists is well typed.

Transforms are pure functions ``Function -> Function``; ``rewrite`` is the one post-order
rebuild (with a memo, so sharing survives) that passes are written with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..dtype import check_dtype
from . import shapes

Shape = tuple[int, ...]


class Attrs(Mapping):
    """A frozen, hashable mapping of attribute name -> plain value (int, float, str, tuple).

    Lists are turned into tuples (recursively) so that the whole mapping hashes; the order of
    names is kept as given (the op's declaration order), which is the order the printer uses.
    """

    __slots__ = ("_items", "_dict", "_hash")

    def __init__(self, items: Mapping | Iterable[tuple[str, object]] = ()):
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items = tuple((str(k), _freeze(v)) for k, v in pairs)
        self._dict = dict(self._items)
        self._hash = hash(self._items)

    def __getitem__(self, key: str):
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        if isinstance(other, Attrs):
            return self._dict == other._dict
        return isinstance(other, Mapping) and self._dict == dict(other)

    def replace(self, **changes) -> Attrs:
        """A copy with some values changed (names must exist) or added."""
        merged = dict(self._items)
        merged.update(changes)
        return Attrs(merged)

    def __repr__(self) -> str:
        return "Attrs(" + ", ".join(f"{k}={v!r}" for k, v in self._items) + ")"


def _freeze(value):
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


class Expr:
    """Base of graph expressions; every expression has ``shape`` and ``dtype``."""

    shape: Shape
    dtype: str

    def __str__(self) -> str:
        from .printer import astext

        return astext(self)

    def __repr__(self) -> str:
        # Short on purpose: a Call's args are whole subgraphs.
        return f"<{type(self).__name__} {describe(self)}>"


@dataclass(frozen=True, eq=False, repr=False)
class Var(Expr):
    """A graph input or weight: ``Var("data", (1, 224, 224, 3))``."""

    name: str
    shape: Shape
    dtype: str = "float32"

    def __post_init__(self):
        object.__setattr__(self, "shape", _as_shape(self.shape, f"Var {self.name!r}"))
        check_dtype(self.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class Constant(Expr):
    """A constant tensor baked into the graph (e.g. a folded weight, or a scalar).

    ``value`` is stored as a read-only numpy array; ``shape`` and ``dtype`` come from it.
    """

    value: np.ndarray
    name: str = ""

    def __post_init__(self):
        arr = np.array(self.value)  # a copy: the graph must not change under the caller
        arr.setflags(write=False)
        object.__setattr__(self, "value", arr)

    @property
    def shape(self) -> Shape:
        return tuple(int(d) for d in self.value.shape)

    @property
    def dtype(self) -> str:
        return str(self.value.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    """One operator call. Build it with ``make_call`` (or the op constructors), which fills
    the default attributes and infers ``shape``/``dtype``; the constructor itself checks
    nothing, so only use it directly when you already have the inferred type."""

    op: str
    args: tuple[Expr, ...]
    attrs: Attrs
    shape: Shape
    dtype: str


@dataclass(frozen=True, eq=False)
class Function:
    """A network: ``params`` (the input and weight Vars, in order) and a ``body``.

    ``body`` is one expression, or a tuple of expressions for several outputs.
    """

    params: tuple[Var, ...]
    body: Expr | tuple[Expr, ...]
    name: str = "main"

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))
        if isinstance(self.body, list):
            object.__setattr__(self, "body", tuple(self.body))
        missing = [v.name for v in free_vars(self.body) if v not in set(self.params)]
        if missing:
            raise ValueError(f"Function body uses variables that are not parameters: {missing}")

    @property
    def outputs(self) -> tuple[Expr, ...]:
        """The output expressions (one for a single-output function)."""
        return self.body if isinstance(self.body, tuple) else (self.body,)

    @property
    def shape(self):
        """The output shape, or a tuple of shapes for several outputs."""
        outs = tuple(o.shape for o in self.outputs)
        return outs if isinstance(self.body, tuple) else outs[0]

    def param(self, name: str) -> Var:
        """The parameter called ``name`` (KeyError listing the names if there is none)."""
        for v in self.params:
            if v.name == name:
                return v
        raise KeyError(f"no parameter {name!r}; parameters are {[v.name for v in self.params]}")

    def __str__(self) -> str:
        from .printer import astext

        return astext(self)


@dataclass(frozen=True, eq=False)
class Module:
    """A tiny stand-in for Relay's IRModule: ``mod["main"]`` is the network's Function."""

    functions: dict = field(default_factory=dict)

    @staticmethod
    def from_function(func: Function) -> Module:
        return Module({func.name: func})

    @staticmethod
    def from_expr(func: Function) -> Module:
        """Relay's ``IRModule.from_expr(func)``: the module whose ``"main"`` is ``func``."""
        if not isinstance(func, Function):
            raise TypeError(
                f"IRModule.from_expr: expected a network Function, got {type(func).__name__}"
            )
        return Module({"main": func})

    def __getitem__(self, name: str) -> Function:
        return self.functions[name]

    def __str__(self) -> str:
        return "\n".join(str(f) for f in self.functions.values())


def main_function(mod, what: str) -> Function:
    """The network's Function: ``mod["main"]`` of a Module, or ``mod`` itself.

    Raises
    ------
    TypeError
        For anything else, naming ``what`` (the caller, e.g. ``"quantize"``).
    """
    if isinstance(mod, Module):
        return mod["main"]
    if isinstance(mod, Function):
        return mod
    raise TypeError(
        f"{what}: mod must be a network (tensorir.graph Module or Function, e.g. from "
        f"networks.get_network or from_onnx), got {type(mod).__name__}"
    )


def _as_shape(shape, what: str) -> Shape:
    try:
        out = tuple(int(d) for d in shape)
    except TypeError as e:
        raise TypeError(f"{what}: shape must be a tuple of ints, got {shape!r}") from e
    if any(d < 0 for d in out):
        raise ValueError(f"{what}: shape has a negative dimension: {out}")
    return out


def describe(expr: Expr) -> str:
    """A short human name for an expression, for error messages."""
    if isinstance(expr, Var):
        return f"%{expr.name}: {expr.shape} {expr.dtype}"
    if isinstance(expr, Constant):
        label = f"constant {expr.name!r}" if expr.name else "constant"
        return f"{label}: {expr.shape} {expr.dtype}"
    # Name the op's weight Vars, if any, so the node can be found in a big network.
    weights = ", ".join(f"%{a.name}" for a in expr.args if isinstance(a, Var))
    where = f" (with {weights})" if weights else ""
    return f"output of {expr.op}{where}: {expr.shape} {expr.dtype}"


def make_call(op: str, args: Iterable[Expr], attrs: Mapping | None = None) -> Call:
    """Build a call of ``op``: check the attribute names, fill the defaults, infer the type.

    Raises
    ------
    KeyError
        ``op`` is not a known operator.
    TypeError
        An attribute name the op does not have, or the wrong number of inputs.
    ValueError
        The input shapes or dtypes do not fit the op; the message names the op, each input
        and what was expected.
    """
    args = tuple(args)
    for a in args:
        if not isinstance(a, Expr):
            raise TypeError(f"{op}: inputs must be graph expressions, got {type(a).__name__}")
    opdef = shapes.get_op(op)
    full = opdef.normalize(dict(attrs or {}), len(args))
    try:
        shape, dtype = opdef.infer([a.shape for a in args], [a.dtype for a in args], full)
    except shapes.ShapeError as e:
        inputs = "; ".join(f"{n}={describe(a)}" for n, a in zip(opdef.input_names(len(args)), args))
        raise ValueError(f"{op}: {e} (inputs: {inputs})") from None
    return Call(op, args, Attrs(full), tuple(shape), dtype)


# --- traversal -----------------------------------------------------------------------------


def _roots(expr) -> tuple[Expr, ...]:
    if isinstance(expr, Function):
        return expr.outputs
    if isinstance(expr, tuple | list):
        return tuple(expr)
    return (expr,)


def post_order(expr) -> list[Expr]:
    """Every node reachable from ``expr`` (an Expr, a tuple of them, or a Function), once,
    inputs before users. Iterative, so deep networks do not hit the recursion limit."""
    order: list[Expr] = []
    seen: set[int] = set()
    for root in _roots(expr):
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in seen:
                continue
            if expanded or not isinstance(node, Call):
                seen.add(id(node))
                order.append(node)
                continue
            stack.append((node, True))
            for a in reversed(node.args):
                if id(a) not in seen:
                    stack.append((a, False))
    return order


def calls(expr) -> list[Call]:
    """The calls of ``expr`` in topological order (inputs first)."""
    return [n for n in post_order(expr) if isinstance(n, Call)]


def free_vars(expr) -> list[Var]:
    """The Vars ``expr`` uses, in order of first use."""
    return [n for n in post_order(expr) if isinstance(n, Var)]


def users(func: Function) -> dict[Expr, list[Call]]:
    """For each node, the calls that take it as an input (in topological order)."""
    out: dict[Expr, list[Call]] = {n: [] for n in post_order(func)}
    for c in calls(func):
        for a in c.args:
            if c not in out[a]:
                out[a].append(c)
    return out


# --- rebuilding ----------------------------------------------------------------------------

Visitor = Callable[[Expr, tuple[Expr, ...]], "Expr | None"]


def rewrite(func: Function, visit: Visitor) -> Function:
    """Rebuild ``func`` bottom-up, letting ``visit`` replace nodes.

    ``visit(node, new_args)`` is called once per node in post order; ``new_args`` are the
    already rewritten inputs (``()`` for Vars and Constants). It returns the replacement, or
    None to keep the node: then a Call whose inputs changed is rebuilt with ``make_call`` (so
    its type is inferred again) and an unchanged one is kept as the same object. Shared nodes
    stay shared. The new Function keeps the old params still used, in order, followed by any
    new Vars in order of first use.
    """
    memo: dict[int, Expr] = {}
    for node in post_order(func):
        new_args = tuple(memo[id(a)] for a in node.args) if isinstance(node, Call) else ()
        out = visit(node, new_args)
        if out is None:
            if isinstance(node, Call) and any(n is not o for n, o in zip(new_args, node.args)):
                out = make_call(node.op, new_args, node.attrs)
            else:
                out = node
        memo[id(node)] = out
    body = tuple(memo[id(o)] for o in func.outputs)
    body = body if isinstance(func.body, tuple) else body[0]
    used = free_vars(body)
    used_set = set(used)
    params = [p for p in func.params if p in used_set]
    params += [v for v in used if v not in set(params)]
    return Function(tuple(params), body, func.name)


def bind_params(func: Function, params: Mapping[str, np.ndarray]) -> Function:
    """Replace the parameters named in ``params`` by Constants holding those arrays (what
    relay.build does with ``params=``). Shapes and dtypes must match the Vars."""

    def visit(node, _args):
        if isinstance(node, Var) and node.name in params:
            value = np.asarray(params[node.name])
            if tuple(value.shape) != node.shape or str(value.dtype) != node.dtype:
                raise ValueError(
                    f"bind_params: %{node.name} is {node.shape} {node.dtype}, "
                    f"the array given is {tuple(value.shape)} {value.dtype}"
                )
            return Constant(value, node.name)
        return None

    return rewrite(func, visit)
