"""The ONNX node converters of ``onnx_frontend.from_onnx``: one function per ONNX op type,
each turning a node into graph calls (docs/graph-ops.md) or, for the shape arithmetic torch
exports (Shape -> Gather -> Unsqueeze -> Concat -> Reshape), into values known at import time.

Nothing here imports onnx: the frontend parses attributes into plain Python values (strings,
ints, floats, tuples, numpy arrays for tensors) before a converter sees them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import nn, op
from .ir import Expr
from .shapes import reshape_shape, window_out


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


# --- windows: conv and pools -----------------------------------------------------------------

_AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _pads(node: Node, in_sizes, kernel, strides, dilations) -> tuple[int, ...]:
    """(before per spatial dim, then after per dim), ONNX's ``pads`` order and Relay's too."""
    n = len(in_sizes)
    mode = node.attr("auto_pad", "NOTSET")
    if mode == "NOTSET":
        pads = node.ints("pads", 2 * n, 0)
        if any(p < 0 for p in pads):
            node.fail(f"negative pads {list(pads)} are not supported")
        return pads
    if mode == "VALID":
        return (0,) * (2 * n)
    if mode not in _AUTO_PAD:
        node.unsupported("auto_pad", mode, _AUTO_PAD)
    before, after = [], []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        before.append(small if mode == "SAME_UPPER" else big)
        after.append(big if mode == "SAME_UPPER" else small)
    return tuple(before + after)


def _spatial(node: Node, x: Expr) -> int:
    nsp = len(x.shape) - 2
    if nsp not in (2, 3):
        node.fail(
            f"{nsp}-D spatial input (shape {x.shape}) is not supported; supported: 4-D (NCHW) "
            "and 5-D (NCDHW) tensors"
        )
    return nsp


@_register("Conv", "auto_pad dilations group kernel_shape pads strides")
def _conv(node: Node):
    x, w = node.expr(0), node.expr(1)
    nsp = _spatial(node, x)
    kernel = tuple(w.shape[2:])
    given = node.attr("kernel_shape")
    if given is not None and tuple(given) != kernel:
        node.fail(f"kernel_shape={list(given)} does not match the weight's {kernel}")
    strides = node.positive_ints("strides", nsp, 1)
    dil = node.positive_ints("dilations", nsp, 1)
    pads = _pads(node, x.shape[2:], kernel, strides, dil)
    conv = nn.conv2d if nsp == 2 else nn.conv3d
    y = conv(x, w, strides=strides, padding=pads, dilation=dil, groups=node.attr("group", 1),
             data_layout="NCHW" if nsp == 2 else "NCDHW")  # fmt: skip
    if node.has(2):
        y = nn.bias_add(y, node.expr(2), axis=1)
    return y


def _onnx_ceil_mode(node: Node, sizes, kernel, strides, dil, pads, counts_pad: bool):
    """Our (ceil_mode, pads) for ONNX's ceil_mode=1.

    ONNX (and torch) drop a last window that would start in the end padding; ceil_mode here
    keeps it. Where every dim drops one, floor mode gives ONNX's sizes; where only some do,
    the others get extra end padding, which neither max nor an average that does not count
    padding can see.
    """
    n = len(sizes)
    floor, ceil, want = [], [], []
    for j in range(n):
        b, e = pads[j], pads[j + n]
        ceil.append(window_out(sizes[j], kernel[j], strides[j], dil[j], b, e, True))
        floor.append(window_out(sizes[j], kernel[j], strides[j], dil[j], b, e, False))
        drop = (ceil[j] - 1) * strides[j] >= sizes[j] + b
        want.append(ceil[j] - 1 if drop else ceil[j])
    if want == floor:
        return False, pads
    if want == ceil:
        return True, pads
    if counts_pad:
        node.fail(
            "ceil_mode=1 with count_include_pad=1 where only some dims drop ONNX's last window "
            f"(input {tuple(sizes)}, kernel_shape {kernel}, strides {strides}, pads "
            f"{list(pads)}) is not supported"
        )
    pads = list(pads)
    for j in range(n):
        if want[j] > floor[j]:
            span = (kernel[j] - 1) * dil[j] + 1
            pads[j + n] += (want[j] - 1) * strides[j] + span - (sizes[j] + pads[j] + pads[j + n])
    return False, tuple(pads)


def _pool(kind: str):
    def convert(node: Node):
        x = node.expr(0)
        nsp = _spatial(node, x)
        if node.attr("kernel_shape") is None:
            node.fail(f"kernel_shape must give {nsp} sizes, got None")
        kernel = node.positive_ints("kernel_shape", nsp, 1)
        strides = node.positive_ints("strides", nsp, 1)
        dil = node.positive_ints("dilations", nsp, 1)
        if node.attr("storage_order", 0) != 0:
            node.unsupported("storage_order", node.attr("storage_order"), [0])
        pads = _pads(node, x.shape[2:], kernel, strides, dil)
        ceil = bool(node.attr("ceil_mode", 0))
        include = bool(node.attr("count_include_pad", 0))
        if ceil:
            ceil, pads = _onnx_ceil_mode(node, x.shape[2:], kernel, strides, dil, pads,
                                         kind == "avg" and include)  # fmt: skip
        layout = "NCHW" if nsp == 2 else "NCDHW"
        kw = dict(pool_size=kernel, strides=strides, padding=pads, dilation=dil, layout=layout,
                  ceil_mode=ceil)  # fmt: skip
        if kind == "max":
            return (nn.max_pool2d if nsp == 2 else nn.max_pool3d)(x, **kw)
        return (nn.avg_pool2d if nsp == 2 else nn.avg_pool3d)(x, count_include_pad=include, **kw)

    return convert


_WINDOW = "auto_pad ceil_mode dilations kernel_shape pads strides"
_register("MaxPool", _WINDOW + " storage_order")(_pool("max"))
_register("AveragePool", _WINDOW + " count_include_pad")(_pool("avg"))


def _global_pool(kind: str):
    def convert(node: Node):
        x = node.expr(0)
        nsp = _spatial(node, x)
        if nsp == 2:
            return (nn.global_avg_pool2d if kind == "avg" else nn.global_max_pool2d)(x)
        pool = nn.avg_pool3d if kind == "avg" else nn.max_pool3d
        return pool(x, pool_size=x.shape[2:], layout="NCDHW")

    return convert


_register("GlobalAveragePool")(_global_pool("avg"))
_register("GlobalMaxPool")(_global_pool("max"))


@_register("BatchNormalization", "epsilon momentum spatial training_mode")
def _batch_norm(node: Node):
    if node.attr("training_mode", 0):
        node.unsupported("training_mode", node.attr("training_mode"), [0])
    if node.attr("spatial", 1) != 1:
        node.unsupported("spatial", node.attr("spatial"), [1])
    args = [node.expr(i) for i in range(5)]
    return nn.batch_norm(*args, axis=1, epsilon=float(node.attr("epsilon", 1e-5)))


# --- elementwise -----------------------------------------------------------------------------

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


# --- dense -----------------------------------------------------------------------------------


def _transposed_weight(node: Node, i: int, axes) -> Expr:
    """Input ``i`` with its dims permuted: folded into a new parameter ``<name>_T`` (or a
    Constant) when it is known at import time, a transpose call otherwise."""
    v = node.value(i)
    if v.static is None:
        return op.transpose(v.expr, axes)
    return node.imp.derived(v, "_T", np.ascontiguousarray(v.static.transpose(axes)))


@_register("Gemm", "alpha beta transA transB")
def _gemm(node: Node):
    a = node.expr(0)
    if len(a.shape) != 2 or len(node.value(1).shape) != 2:
        node.fail(f"A and B must be 2-D, got {a.shape} and {node.value(1).shape}")
    if node.attr("transA", 0):
        a = op.transpose(a, (1, 0))
    w = node.expr(1) if node.attr("transB", 0) else _transposed_weight(node, 1, (1, 0))
    y = nn.dense(a, w)
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if alpha != 1.0:
        y = op.multiply(y, alpha)
    if not node.has(2) or beta == 0.0:
        return y
    c = node.value(2)
    if beta != 1.0:
        if c.static is not None:
            cexpr = node.imp.derived(c, "_scaled", (c.static * beta).astype(c.static.dtype))
        else:
            cexpr = op.multiply(c.expr, beta)
    else:
        cexpr = node.imp.expr(c)
    if tuple(cexpr.shape) == (y.shape[1],):
        return nn.bias_add(y, cexpr, axis=1)
    return op.add(y, cexpr)


def _rhs_transposed(node: Node, one_d: bool) -> Expr:
    """MatMul's right operand (..., K, N) as (..., N, K); a 1-D one is (K,) -> (1, K)."""
    v = node.value(1)
    if v.static is not None:
        w = v.static.reshape(1, -1) if one_d else np.swapaxes(v.static, -1, -2)
        return node.imp.derived(v, "_T", np.ascontiguousarray(w))
    if one_d:
        return op.reshape(v.expr, (1, v.shape[0]))
    nd = len(v.shape)
    return op.transpose(v.expr, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _to_batch(x: Expr, batch: tuple[int, ...], full: tuple[int, ...]) -> Expr:
    """(*batch, R, C) -> (B, R, C), where B is prod(full), or 1 when batch is all ones (then
    batch_matmul broadcasts it); batch dims that need it are broadcast to ``full`` first."""
    rows = tuple(x.shape[-2:])
    if math.prod(batch) == 1:
        return x if len(x.shape) == 3 and x.shape[0] == 1 else op.reshape(x, (1,) + rows)
    if tuple(batch) != tuple(full):
        x = op.broadcast_to(x, tuple(full) + rows)
    return x if len(x.shape) == 3 else op.reshape(x, (math.prod(full),) + rows)


@_register("MatMul")
def _matmul(node: Node):
    av, bv = node.value(0), node.value(1)
    ashape, bshape = tuple(av.shape), tuple(bv.shape)
    if not ashape or not bshape:
        node.fail(f"0-D operands are not supported (shapes {ashape}, {bshape})")
    if av.static is not None and bv.static is not None:
        return np.matmul(av.static, bv.static)
    a = node.expr(0)
    k = ashape[-1]
    if k != bshape[-2 if len(bshape) > 1 else 0]:
        node.fail(f"the inner dims of {ashape} x {bshape} differ")
    # numpy's rule for 1-D operands: a (K,) is (1, K), b (K,) is (K, 1); the dim goes again
    out_tail = ashape[-2:-1] if len(ashape) > 1 else ()
    out_tail += bshape[-1:] if len(bshape) > 1 else ()
    if len(ashape) == 1:
        a, ashape = op.reshape(a, (1, k)), (1, k)
    bt = _rhs_transposed(node, len(bshape) == 1)
    bshape = tuple(bt.shape[:-2]) + (k, bt.shape[-2])
    try:
        batch = tuple(np.broadcast_shapes(ashape[:-2], bshape[:-2]))
    except ValueError:
        node.fail(f"the batch dims of {av.shape} x {bv.shape} do not broadcast")
    out_shape = batch + out_tail
    if len(bshape) == 2:  # one weight matrix: a dense over every row of a
        y = nn.dense(a if len(ashape) == 2 else op.reshape(a, (-1, k)), bt)
    else:
        y = nn.batch_matmul(_to_batch(a, ashape[:-2], batch), _to_batch(bt, bshape[:-2], batch))
    return y if tuple(y.shape) == out_shape else op.reshape(y, out_shape)


@_register("Softmax", "axis")
def _softmax(node: Node):
    x = node.expr(0)
    nd = len(x.shape)
    if node.opset >= 13:
        return nn.softmax(x, axis=int(node.attr("axis", -1)))
    # Before opset 13 the input is coerced to 2-D at ``axis`` (default 1): the softmax runs
    # over all the dims from ``axis`` on.
    axis = int(node.attr("axis", 1))
    axis = axis + nd if axis < 0 else axis
    if not 0 <= axis < nd:
        node.fail(f"axis={axis} is out of range for a {nd}-D input")
    if all(d == 1 for d in x.shape[axis + 1 :]):
        return nn.softmax(x, axis=axis)
    flat = op.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
    return op.reshape(nn.softmax(flat, axis=-1), x.shape)


# --- shapes and data movement ----------------------------------------------------------------


@_register("Flatten", "axis")
def _flatten(node: Node):
    v = node.value(0)
    nd = len(v.shape)
    axis = int(node.attr("axis", 1))
    axis = axis + nd if axis < 0 else axis
    if not 0 <= axis <= nd:
        node.fail(f"axis={axis} is out of range for a {nd}-D input")
    newshape = (math.prod(v.shape[:axis]), math.prod(v.shape[axis:]))
    if v.static is not None:
        return v.static.reshape(newshape)
    if axis == 1:
        return nn.batch_flatten(v.expr)
    return op.reshape(v.expr, newshape)


@_register("Reshape", "allowzero")
def _reshape(node: Node):
    v = node.value(0)
    target = tuple(int(d) for d in node.static(1, "shape"))
    if node.attr("allowzero", 0) and 0 in target:
        node.unsupported("allowzero", 1, [0])
    try:
        newshape = reshape_shape(v.shape, target)
    except ValueError as e:
        node.fail(str(e))
    if v.static is not None:
        return v.static.reshape(newshape)
    return op.reshape(v.expr, newshape)


@_register("Transpose", "perm")
def _transpose(node: Node):
    v = node.value(0)
    perm = node.attr("perm")
    perm = tuple(reversed(range(len(v.shape)))) if perm is None else tuple(int(p) for p in perm)
    if v.static is not None:
        return v.static.transpose(perm)
    return op.transpose(v.expr, perm)


@_register("Concat", "axis")
def _concat(node: Node):
    axis = node.attr("axis")
    if axis is None:
        node.fail("attribute axis is required")
    names = [i for i in range(node.n_inputs) if node.has(i)]
    return _static_or(
        node,
        lambda *a: np.concatenate(a, axis=axis),
        lambda: op.concatenate([node.expr(i) for i in names], axis=int(axis)),
    )


def _axes(node: Node, what: str):
    """The ``axes`` of Squeeze/Unsqueeze/Pad: an attribute before opset 13, an input after."""
    if node.has(1):
        return [int(a) for a in node.static(1, what).reshape(-1)]
    axes = node.attr("axes")
    return None if axes is None else [int(a) for a in axes]


@_register("Squeeze", "axes")
def _squeeze(node: Node):
    v = node.value(0)
    nd = len(v.shape)
    axes = _axes(node, "axes")
    if axes is None:
        axes = [i for i, d in enumerate(v.shape) if d == 1]
    axes = sorted(a + nd if a < 0 else a for a in axes)
    bad = [a for a in axes if not 0 <= a < nd or v.shape[a] != 1]
    if bad:
        node.fail(f"cannot squeeze axes {bad} of shape {v.shape}")
    if v.static is not None:
        return v.static.squeeze(tuple(axes))
    return op.squeeze(v.expr, tuple(axes))


@_register("Unsqueeze", "axes")
def _unsqueeze(node: Node):
    v = node.value(0)
    axes = _axes(node, "axes")
    if axes is None:
        node.fail("needs axes (attribute before opset 13, input from 13 on)")
    nd = len(v.shape) + len(axes)
    axes = sorted(a + nd if a < 0 else a for a in axes)
    if len(set(axes)) != len(axes) or any(not 0 <= a < nd for a in axes):
        node.fail(f"bad axes {axes} for a {len(v.shape)}-D input")
    dims = iter(v.shape)
    newshape = tuple(1 if i in axes else next(dims) for i in range(nd))
    if v.static is not None:
        return v.static.reshape(newshape)
    return op.reshape(v.expr, newshape)


_PAD_MODES = ("constant",)


@_register("Pad", "mode pads value")
def _pad(node: Node):
    mode = node.attr("mode", "constant")
    if mode not in _PAD_MODES:
        node.unsupported("mode", mode, _PAD_MODES)
    x = node.expr(0)
    nd = len(x.shape)
    if node.has(1):
        pads = [int(p) for p in node.static(1, "pads").reshape(-1)]
    else:
        pads = node.attr("pads")  # opset < 11
        if pads is None:
            node.fail("needs pads (attribute before opset 11, input from 11 on)")
        pads = [int(p) for p in pads]
    value = float(node.attr("value", 0.0))
    if node.has(2):
        value = float(node.static(2, "constant_value").reshape(-1)[0])
    axes = list(range(nd))
    if node.has(3):
        axes = [int(a) % nd for a in node.static(3, "axes").reshape(-1)]
    if len(pads) != 2 * len(axes):
        node.fail(f"pads {pads} must have 2 values per padded axis ({len(axes)} axes)")
    if any(p < 0 for p in pads):
        node.fail(f"negative pads {pads} (cropping) are not supported")
    width = [[0, 0] for _ in range(nd)]
    for j, a in enumerate(axes):
        width[a] = [pads[j], pads[j + len(axes)]]
    return nn.pad(x, tuple(tuple(p) for p in width), pad_value=value)


@_register("Identity")
def _identity(node: Node):
    return node.value(0)


@_register("Dropout", "ratio seed")
def _dropout(node: Node):
    if node.has(2) and bool(node.static(2, "training_mode").reshape(-1)[0]):
        node.fail("training_mode=True is not supported (inference only)")
    return node.value(0)


@_register(
    "Constant",
    "value value_float value_floats value_int value_ints sparse_value value_string value_strings",
)
def _constant(node: Node):
    a = node.attrs
    if "value" in a:
        return np.asarray(a["value"])
    if "value_float" in a:
        return np.asarray(a["value_float"], dtype=np.float32)
    if "value_floats" in a:
        return np.asarray(a["value_floats"], dtype=np.float32)
    if "value_int" in a:
        return np.asarray(a["value_int"], dtype=np.int64)
    if "value_ints" in a:
        return np.asarray(a["value_ints"], dtype=np.int64)
    attr = next(iter(a), None)
    node.fail(f"attribute {attr} is not supported; supported: value, value_float(s), value_int(s)")


@_register("Cast", "to saturate round_mode")
def _cast(node: Node):
    dtype = node.imp.dtype_of(node.attr("to"), node)
    v = node.value(0)
    if v.static is not None:
        return v.static.astype(dtype)
    if v.expr.dtype == dtype:
        return v.expr
    return op.cast(v.expr, dtype)


@_register("Shape", "start end")
def _shape(node: Node):
    shape = np.asarray(node.value(0).shape, dtype=np.int64)
    start, end = node.attr("start", 0), node.attr("end")
    return shape[start:end]
