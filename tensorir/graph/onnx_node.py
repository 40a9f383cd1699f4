"""What an ONNX converter works with (``onnx_frontend.from_onnx``): the import error, a tensor
during the import (``Value``), a node's attributes and inputs (``Node``), and the converter table
(``CONVERTERS``, ``_register``) every ``onnx_ops*.py`` module registers into.

Nothing here imports onnx: the frontend parses attributes into plain Python values (strings,
ints, floats, tuples, numpy arrays for tensors) before a converter sees them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .ir import Expr


class OnnxImportError(ValueError):
    """A model the frontend cannot import: an unsupported op, attribute value or input."""


@dataclass
class Value:
    """One ONNX tensor during the import: a graph expression, or a value known now.

    A known value (``static``) comes from an initializer (``param`` names it: used as a graph
    tensor it becomes that parameter's Var), a Constant node, or shape arithmetic; it becomes
    a graph node only when an op needs it as one (``Importer.expr``).
    """

    expr: Expr | None = None
    static: np.ndarray | None = None
    param: str | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.expr.shape if self.expr is not None else self.static.shape)

    @property
    def dtype(self) -> str:
        return self.expr.dtype if self.expr is not None else str(self.static.dtype)


class Node:
    """What a converter sees of one node: its attributes, inputs and a way to fail."""

    def __init__(self, importer, proto, index: int, attrs: dict, opset: int):
        self.imp, self.proto, self.index, self.attrs, self.opset = (
            importer, proto, index, attrs, opset,
        )  # fmt: skip
        self.op_type = proto.op_type

    @property
    def where(self) -> str:
        name = f"{self.proto.name!r}" if self.proto.name else f"#{self.index} (unnamed)"
        return f"node {name} ({self.op_type})"

    def fail(self, msg: str):
        raise OnnxImportError(f"{self.where}: {msg}")

    def unsupported(self, attr: str, value, supported):
        self.fail(f"attribute {attr}={value!r} is not supported; supported: {list(supported)}")

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default)

    def ints(self, name: str, n: int, default: int) -> tuple[int, ...]:
        v = self.attrs.get(name)
        if v is None:
            return (default,) * n
        if len(v) != n:
            self.fail(f"attribute {name}={list(v)} must have {n} values")
        return tuple(int(x) for x in v)

    def positive_ints(self, name: str, n: int, default: int) -> tuple[int, ...]:
        """``ints``, checked to be >= 1 (strides, dilations, window sizes: 0 would divide by
        zero or make an empty window)."""
        v = self.ints(name, n, default)
        if any(x < 1 for x in v):
            self.fail(f"attribute {name}={list(v)} must be positive (every value >= 1)")
        return v

    # --- inputs ---------------------------------------------------------------------------

    @property
    def n_inputs(self) -> int:
        return len(self.proto.input)

    def has(self, i: int) -> bool:
        return i < len(self.proto.input) and self.proto.input[i] != ""

    def value(self, i: int) -> Value:
        if not self.has(i):
            self.fail(f"input {i} is required")
        return self.imp.values[self.proto.input[i]]

    def expr(self, i: int) -> Expr:
        return self.imp.expr(self.value(i))

    def static(self, i: int, what: str) -> np.ndarray:
        v = self.value(i)
        if v.static is None:
            self.fail(
                f"input {i} ({what}, {self.proto.input[i]!r}) must be known at import time (an "
                "initializer, a Constant or shape arithmetic), but it is computed by the graph"
            )
        return v.static

    def all_static(self) -> bool:
        return all(self.imp.values[n].static is not None for n in self.proto.input if n)

    def check_single_output(self):
        extra = [o for o in self.proto.output[1:] if o]
        if extra:
            self.fail(f"only the first output is supported, but {extra} are asked for")


_Converter = Callable[[Node], object]
CONVERTERS: dict[str, tuple[_Converter, frozenset[str]]] = {}
# Op types whose converter may be given several outputs: it returns a list, one result per
# output it supports (Split: all of them; LayerNormalization: the first, and a later node
# that reads the others fails naming them; LSTM / GRU: Y, Y_h, Y_c).
MULTI_OUTPUT: set[str] = set()


def _register(op_types: str, attrs: str = ""):
    def deco(fn):
        for t in op_types.split():
            CONVERTERS[t] = (fn, frozenset(attrs.split()))
        return fn

    return deco


def _static_or(node: Node, fold, build):
    """Fold with numpy when every input is known, else build graph calls."""
    if node.all_static():
        return np.asarray(fold(*[node.imp.values[n].static for n in node.proto.input if n]))
    return build()
