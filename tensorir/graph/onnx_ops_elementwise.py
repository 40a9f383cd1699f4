"""ONNX converters of the core elementwise ops: the unary and binary arithmetic tables
(folded with numpy when every input is known) and Clip."""

from __future__ import annotations

import numpy as np

from . import nn, op
from .onnx_node import Node, _register, _static_or

_UNARY = {
    "Relu": (nn.relu, lambda a: np.maximum(a, 0)),
    "Sigmoid": (op.sigmoid, lambda a: 1 / (1 + np.exp(-a))),
    "Tanh": (op.tanh, np.tanh),
    "Exp": (op.exp, np.exp),
    "Sqrt": (op.sqrt, np.sqrt),
    "Neg": (op.negative, np.negative),
}


def _unary(build, fold):
    return lambda node: _static_or(node, fold, lambda: build(node.expr(0)))


for _t, (_build, _fold) in _UNARY.items():
    _register(_t)(_unary(_build, _fold))


def _int_div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        return (np.trunc(a / b)).astype(a.dtype)
    return a / b


_BINARY = {
    "Add": (op.add, np.add),
    "Sub": (op.subtract, np.subtract),
    "Mul": (op.multiply, np.multiply),
    "Div": (op.divide, _int_div),
    "Max": (op.maximum, np.maximum),
    "Min": (op.minimum, np.minimum),
}


def _binary(build, fold):
    def convert(node: Node):
        names = [n for n in node.proto.input if n]
        if not names:
            node.fail("needs at least one input")
        if node.op_type in ("Add", "Sub", "Mul", "Div") and len(names) != 2:
            node.fail(f"takes 2 inputs, got {len(names)}")

        def fold_all(*arrs):
            out = arrs[0]
            for a in arrs[1:]:
                out = fold(out, a).astype(np.result_type(out, a))
            return out

        def build_all():
            out = node.expr(0)
            for i in range(1, len(names)):
                out = build(out, node.expr(i))
            return out

        return _static_or(node, fold_all, build_all)

    return convert


for _t, (_build, _fold) in _BINARY.items():
    _register(_t)(_binary(_build, _fold))


def _limits(dtype: str):
    info = np.finfo(dtype) if np.issubdtype(np.dtype(dtype), np.floating) else np.iinfo(dtype)
    return float(info.min), float(info.max)


@_register("Clip", "min max")
def _clip(node: Node):
    lo, hi = node.attr("min"), node.attr("max")  # opset < 11
    if node.has(1):
        lo = float(node.static(1, "min").reshape(-1)[0])
    if node.has(2):
        hi = float(node.static(2, "max").reshape(-1)[0])
    x = node.value(0)
    dmin, dmax = _limits(x.dtype)
    lo = dmin if lo is None else float(lo)
    hi = dmax if hi is None else float(hi)
    if x.static is not None:
        return np.clip(x.static, lo, hi)
    if lo == 0.0 and hi == dmax:
        return nn.relu(node.expr(0))
    return op.clip(node.expr(0), lo, hi)
