"""ONNX converters for the ops today's exporters write around the layers (issue 26):
reductions (global average pooling arrives as ReduceMean), LayerNormalization, Erf and the
Gelu forms, the activation zoo, comparisons and logic, Where, Expand, Slice, Split, CumSum,
Trilu, and the all-static ops (ConstantOfShape, Range) that shape subgraphs fold through.

Each converter folds with numpy when every input is known at import time (``_static_or``),
so the shape arithmetic torch writes (Shape -> Gather -> Unsqueeze -> Concat -> Reshape /
Expand, ConstantOfShape -> Equal -> Where) never reaches the graph. The list of the ONNX op
types this module adds, with their attributes, is docs/onnx-ops.md.
"""

from __future__ import annotations

import math

import numpy as np

from . import nn, op
from .ir import Constant, Expr
from .onnx_ops import MULTI_OUTPUT, Node, _axes, _register, _static_or

_SQRT1_2 = 1.0 / math.sqrt(2.0)


def _np_erf(a):
    from ..ops.reference import erf

    return erf(a).astype(a.dtype)


def _scalar(v: np.ndarray) -> float:
    return float(np.asarray(v).reshape(-1)[0])


def _const_like(value, x: Expr) -> Constant:
    """A scalar Constant of ``x``'s dtype (the float constants of Gelu, HardSigmoid ...)."""
    return op.const(value, x.dtype)


# --- elementwise math ------------------------------------------------------------------------


def _gelu(x: Expr, approximate: str) -> Expr:
    """Gelu as the exporters write it: ``x * 0.5 * (1 + erf(x / sqrt 2))``, or the tanh form
    ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``; elementwise calls fuse into one
    loop with their producer."""
    half = op.multiply(x, _const_like(0.5, x))
    if approximate == "tanh":
        cube = op.multiply(op.multiply(x, x), x)
        inner = op.add(x, op.multiply(cube, _const_like(0.044715, x)))
        t = op.tanh(op.multiply(inner, _const_like(math.sqrt(2.0 / math.pi), x)))
        return op.multiply(half, op.add(t, _const_like(1.0, x)))
    e = op.erf(op.multiply(x, _const_like(_SQRT1_2, x)))
    return op.multiply(half, op.add(e, _const_like(1.0, x)))


def _np_gelu(a, approximate):
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (a + 0.044715 * a**3)
        return (0.5 * a * (1 + np.tanh(inner))).astype(a.dtype)
    return (0.5 * a * (1 + _np_erf(a * _SQRT1_2))).astype(a.dtype)


@_register("Gelu", "approximate")
def _gelu_op(node: Node):
    approximate = node.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        node.unsupported("approximate", approximate, ["none", "tanh"])
    return _static_or(
        node, lambda a: _np_gelu(a, approximate), lambda: _gelu(node.expr(0), approximate)
    )


def _softplus(x: Expr) -> Expr:
    # max(x, 0) + log(1 + exp(-|x|)): log(1 + exp(x)) without overflow for large x
    tail = op.log(op.add(op.exp(op.negative(op.abs(x))), _const_like(1.0, x)))
    return op.add(nn.relu(x), tail)


def _np_softplus(a):
    return (np.maximum(a, 0) + np.log1p(np.exp(-np.abs(a)))).astype(a.dtype)


def _hard_sigmoid(x: Expr, alpha: float, beta: float) -> Expr:
    lin = op.add(op.multiply(x, _const_like(alpha, x)), _const_like(beta, x))
    return op.clip(lin, 0.0, 1.0)


def _np_hard_sigmoid(a, alpha, beta):
    return np.clip(a * np.asarray(alpha, a.dtype) + np.asarray(beta, a.dtype), 0, 1)


_MATH = {
    "Erf": (op.erf, _np_erf),
    "Log": (op.log, np.log),
    "Abs": (op.abs, np.abs),
    "Reciprocal": (
        lambda x: op.divide(_const_like(1.0, x), x),
        lambda a: (np.asarray(1, a.dtype) / a).astype(a.dtype),
    ),
    "Softplus": (_softplus, _np_softplus),
    "Mish": (
        lambda x: op.multiply(x, op.tanh(_softplus(x))),
        lambda a: (a * np.tanh(_np_softplus(a))).astype(a.dtype),
    ),
    "IsNaN": (op.isnan, np.isnan),
    "Not": (op.logical_not, np.logical_not),
}


def _math(build, fold):
    return lambda node: _static_or(node, fold, lambda: build(node.expr(0)))


for _t, (_build, _fold) in _MATH.items():
    _register(_t)(_math(_build, _fold))


@_register("HardSigmoid", "alpha beta")
def _hard_sigmoid_op(node: Node):
    alpha, beta = float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5))
    return _static_or(
        node,
        lambda a: _np_hard_sigmoid(a, alpha, beta),
        lambda: _hard_sigmoid(node.expr(0), alpha, beta),
    )


@_register("HardSwish")
def _hard_swish(node: Node):
    # x * max(0, min(1, x / 6 + 1 / 2)): ONNX's alpha and beta are fixed
    return _static_or(
        node,
        lambda a: a * _np_hard_sigmoid(a, 1 / 6, 0.5),
        lambda: op.multiply(node.expr(0), _hard_sigmoid(node.expr(0), 1 / 6, 0.5)),
    )


@_register("IsInf", "detect_negative detect_positive")
def _isinf(node: Node):
    neg, pos = int(node.attr("detect_negative", 1)), int(node.attr("detect_positive", 1))
    if not (neg or pos):
        node.unsupported("detect_negative", neg, [1])
    inf = float("inf") if pos and not neg else float("-inf")

    def fold(a):
        return np.isinf(a) if neg and pos else a == inf

    def build():
        x = node.expr(0)
        return op.isinf(x) if neg and pos else op.equal(x, _const_like(inf, x))

    return _static_or(node, fold, build)


@_register("Pow")
def _pow(node: Node):
    x, y = node.value(0), node.value(1)
    if x.static is not None and y.static is not None:
        return np.power(x.static, y.static).astype(x.static.dtype)
    base = node.expr(0)
    if y.static is not None and y.static.size == 1:
        e = _scalar(y.static)
        if e == 1.0:
            return base
        if e == 2.0:  # Pow(x, 2) of exported variance / RMS norms: one multiply, exact
            return op.multiply(base, base)
        if e == 0.5:
            return op.sqrt(base)
    if y.static is not None:  # the exponent may have another dtype than the base in ONNX
        return op.power(base, Constant(y.static.astype(base.dtype)))
    yexpr = node.expr(1)
    if yexpr.dtype != base.dtype:
        yexpr = op.cast(yexpr, base.dtype)
    return op.power(base, yexpr)


# --- comparisons and logic -------------------------------------------------------------------

_PREDICATES = {
    "Equal": (op.equal, np.equal),
    "Less": (op.less, np.less),
    "LessOrEqual": (op.less_equal, np.less_equal),
    "Greater": (op.greater, np.greater),
    "GreaterOrEqual": (op.greater_equal, np.greater_equal),
    "And": (op.logical_and, np.logical_and),
    "Or": (op.logical_or, np.logical_or),
    "Xor": (op.not_equal, np.logical_xor),
}


def _predicate(build, fold):
    return lambda node: _static_or(node, fold, lambda: build(node.expr(0), node.expr(1)))


for _t, (_build, _fold) in _PREDICATES.items():
    _register(_t)(_predicate(_build, _fold))


@_register("Where")
def _where(node: Node):
    return _static_or(
        node,
        lambda c, x, y: np.where(c, x, y),
        lambda: op.where(node.expr(0), node.expr(1), node.expr(2)),
    )


# --- reductions ------------------------------------------------------------------------------


def _reduce_axes(node: Node, nd: int) -> tuple[int, ...] | None:
    """The reduced dims, sorted; None for "no reduction" (empty axes with
    noop_with_empty_axes). ``axes`` is an attribute before opset 18 (13 for ReduceSum) and an
    input from then on; either form is read."""
    axes = _axes(node, "axes") or []
    if not axes:
        return None if node.attr("noop_with_empty_axes", 0) else tuple(range(nd))
    bad = [a for a in axes if not -nd <= a < nd]
    if bad:
        node.fail(f"axes {axes} are out of range for a {nd}-D input")
    return tuple(sorted({a % nd for a in axes}))


_GLOBAL_POOL = {"mean": nn.global_avg_pool2d, "max": nn.global_max_pool2d}


def _reduce_call(kind: str, x: Expr, axes, keepdims: bool) -> Expr:
    """``kind`` over ``axes``. The mean or max over H and W of a 4-D tensor (dynamo's global
    average pooling) becomes the global pool, which convert_layout moves to NHWC and the
    pool schedules know; axes (1, 2) are H and W of an NHWC tensor. Over D, H and W of a 5-D
    tensor it becomes the 3-D pool over the whole volume."""
    nd = len(x.shape)
    if nd == 4 and kind in _GLOBAL_POOL and axes in ((2, 3), (1, 2)):
        y = _GLOBAL_POOL[kind](x, layout="NCHW" if axes == (2, 3) else "NHWC")
    elif nd == 5 and kind in _GLOBAL_POOL and axes == (2, 3, 4):  # 3-D CNNs: as GlobalAvgPool
        pool = nn.avg_pool3d if kind == "mean" else nn.max_pool3d
        y = pool(x, pool_size=x.shape[2:], layout="NCDHW")
    else:
        return getattr(op, kind)(x, axis=axes, keepdims=keepdims)
    if keepdims:
        return y
    return op.reshape(y, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def _np_reduce(kind: str, a, axes, keepdims):
    if kind == "prod":
        return np.prod(a, axis=axes, keepdims=keepdims)
    return getattr(np, kind)(a, axis=axes, keepdims=keepdims).astype(a.dtype)


# ONNX op -> (pre-map of x, reduction, post-map of the result), for the graph and numpy
_REDUCES = {
    "ReduceMean": ("mean", None, None),
    "ReduceSum": ("sum", None, None),
    "ReduceMax": ("max", None, None),
    "ReduceMin": ("min", None, None),
    "ReduceProd": ("prod", None, None),
    "ReduceL1": ("sum", "abs", None),
    "ReduceL2": ("sum", "square", "sqrt"),
    "ReduceSumSquare": ("sum", "square", None),
    "ReduceLogSum": ("sum", None, "log"),
}
_PRE = {"abs": (op.abs, np.abs), "square": (lambda x: op.multiply(x, x), np.square)}
_POST = {"sqrt": (op.sqrt, np.sqrt), "log": (op.log, np.log)}


def _reduce(op_type: str):
    kind, pre, post = _REDUCES[op_type]

    def convert(node: Node):
        x = node.value(0)
        nd = len(x.shape)
        axes = _reduce_axes(node, nd)
        keepdims = bool(node.attr("keepdims", 1))
        if x.static is not None:
            a = x.static
            if axes is None:
                return a
            a = _PRE[pre][1](a) if pre else a
            out = _np_reduce(kind, a, axes, keepdims)
            return (_POST[post][1](out) if post else out).astype(x.static.dtype)
        if axes is None:  # noop_with_empty_axes: the input itself (ReduceL2 etc. still map)
            y = node.expr(0)
            y = _PRE[pre][0](y) if pre else y
            return _POST[post][0](y) if post else y
        if kind == "prod":
            node.fail("ReduceProd is only supported on values known at import time")
        y = _PRE[pre][0](node.expr(0)) if pre else node.expr(0)
        y = _reduce_call(kind, y, axes, keepdims)
        return _POST[post][0](y) if post else y

    return convert


_REDUCE_ATTRS = "axes keepdims noop_with_empty_axes"
for _t in _REDUCES:
    _register(_t, _REDUCE_ATTRS)(_reduce(_t))


@_register("ReduceLogSumExp", _REDUCE_ATTRS)
def _reduce_log_sum_exp(node: Node):
    """log(sum(exp(x - max))) + max: no overflow for large inputs."""
    x = node.value(0)
    nd = len(x.shape)
    axes = _reduce_axes(node, nd)
    keepdims = bool(node.attr("keepdims", 1))
    if axes is None:
        return x.static if x.static is not None else node.expr(0)
    if x.static is not None:
        a = x.static.astype(np.float64)
        m = a.max(axis=axes, keepdims=True)
        out = np.log(np.exp(a - m).sum(axis=axes, keepdims=True)) + m
        return (out if keepdims else out.squeeze(axes)).astype(x.static.dtype)
    e = node.expr(0)
    m = op.max(e, axis=axes, keepdims=True)
    out = op.add(op.log(op.sum(op.exp(op.subtract(e, m)), axis=axes, keepdims=True)), m)
    if keepdims:
        return out
    return op.reshape(out, tuple(d for i, d in enumerate(x.shape) if i not in axes) or (1,))


# --- normalization ---------------------------------------------------------------------------


def _norm_vector(node: Node, i: int, norm_shape: tuple[int, ...], what: str) -> Expr:
    """LayerNormalization's scale or bias as a flat (prod(norm_shape),) vector: broadcast to
    the normalized shape and flattened at import when known, reshaped in the graph when its
    shape is the normalized shape already."""
    v = node.value(i)
    n = math.prod(norm_shape)
    if v.static is not None:
        try:
            flat = np.broadcast_to(v.static, norm_shape).reshape(n)
        except ValueError:
            node.fail(f"{what} shape {v.shape} does not broadcast to {norm_shape}")
        if tuple(v.shape) == (n,):
            return node.expr(i)
        return node.imp.derived(v, "_flat", np.ascontiguousarray(flat))
    if math.prod(v.shape) != n:
        node.fail(f"{what} shape {v.shape} must broadcast to the normalized shape {norm_shape}")
    return node.expr(i) if tuple(v.shape) == (n,) else op.reshape(node.expr(i), (n,))


@_register("LayerNormalization", "axis epsilon stash_type")
def _layer_norm(node: Node):
    x = node.expr(0)
    nd = len(x.shape)
    axis = int(node.attr("axis", -1))
    if not -nd <= axis < nd:
        node.fail(f"axis={axis} is out of range for a {nd}-D input")
    axis %= nd
    norm_shape = tuple(x.shape[axis:])
    gamma = _norm_vector(node, 1, norm_shape, "scale")
    center = node.has(2)
    n = math.prod(norm_shape)
    beta = _norm_vector(node, 2, norm_shape, "B") if center else op.const(np.zeros(n), x.dtype)
    eps = float(node.attr("epsilon", 1e-5))
    if axis == nd - 1:
        return [nn.layer_norm(x, gamma, beta, axis=-1, epsilon=eps, center=center)]
    # Over several trailing dims: flatten them into one, normalize, restore the shape.
    flat = op.reshape(x, tuple(x.shape[:axis]) + (n,))
    y = nn.layer_norm(flat, gamma, beta, axis=-1, epsilon=eps, center=center)
    return [op.reshape(y, x.shape)]


MULTI_OUTPUT.add("LayerNormalization")  # Mean and InvStdDev: refused only where read


# --- data movement ---------------------------------------------------------------------------


@_register("Expand")
def _expand(node: Node):
    v = node.value(0)
    target = tuple(int(d) for d in node.static(1, "shape").reshape(-1))
    try:
        shape = np.broadcast_shapes(v.shape, target)
    except ValueError:
        node.fail(f"input shape {v.shape} does not broadcast with shape {target}")
    if v.static is not None:
        return np.broadcast_to(v.static, shape).copy()
    if tuple(shape) == tuple(v.shape):
        return v.expr
    return op.broadcast_to(v.expr, shape)


def _ints(node: Node, i: int, what: str, attr: str | None = None):
    if node.has(i):
        return [int(a) for a in node.static(i, what).reshape(-1)]
    if attr is not None and node.attr(attr) is not None:
        return [int(a) for a in node.attr(attr)]
    return None


@_register("Slice", "axes ends starts")
def _slice(node: Node):
    v = node.value(0)
    nd = len(v.shape)
    starts = _ints(node, 1, "starts", "starts")  # attributes before opset 10
    ends = _ints(node, 2, "ends", "ends")
    if starts is None or ends is None:
        node.fail("needs starts and ends (attributes before opset 10, inputs from 10 on)")
    axes = _ints(node, 3, "axes", "axes")
    axes = list(range(len(starts))) if axes is None else axes
    steps = _ints(node, 4, "steps") or [1] * len(axes)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        node.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    if any(not -nd <= a < nd for a in axes) or len({a % nd for a in axes}) != len(axes):
        node.fail(f"axes {axes} are out of range or repeated for a {nd}-D input")
    if 0 in steps:
        node.fail(f"steps {steps} has a step of 0")
    begin, end, step = [0] * nd, list(v.shape), [1] * nd
    for a, b, e, s in zip(axes, starts, ends, steps):
        begin[a % nd], end[a % nd], step[a % nd] = b, e, s
    index = tuple(slice(b, e, s) for b, e, s in zip(begin, end, step))
    if v.static is not None:
        return v.static[index]
    out = tuple(len(range(*sl.indices(n))) for sl, n in zip(index, v.shape))
    if 0 in out:
        node.fail(f"the slice of {v.shape} is empty ({out}); empty tensors are not supported")
    if out == tuple(v.shape) and all(s == 1 for s in step):
        return v.expr
    return op.strided_slice(v.expr, begin, end, step)


@_register("Split", "axis num_outputs split")
def _split(node: Node):
    v = node.value(0)
    nd = len(v.shape)
    axis = int(node.attr("axis", 0))
    if not -nd <= axis < nd:
        node.fail(f"axis={axis} is out of range for a {nd}-D input")
    axis %= nd
    dim, n_out = v.shape[axis], len(node.proto.output)
    sizes = _ints(node, 1, "split", "split")
    if sizes is None:
        parts = int(node.attr("num_outputs", n_out))
        if parts != n_out:
            node.fail(f"num_outputs={parts} but the node has {n_out} outputs")
        chunk = -(-dim // parts)  # ONNX: equal chunks of ceil(dim / n), the last smaller
        sizes = [min(chunk, dim - k * chunk) for k in range(parts)]
        if min(sizes) <= 0:
            node.fail(f"cannot split a dim of {dim} into {parts} non-empty parts")
    if len(sizes) != n_out or sum(sizes) != dim or min(sizes) <= 0:
        node.fail(f"split {sizes} must give {n_out} positive sizes summing to the dim {dim}")
    outs, start = [], 0
    for size in sizes:
        index = tuple(slice(start, start + size) if d == axis else slice(None) for d in range(nd))
        if v.static is not None:
            outs.append(v.static[index])
        else:
            outs.append(op.strided_slice(v.expr, (start,), (start + size,), axes=(axis,)))
        start += size
    return outs


MULTI_OUTPUT.add("Split")


@_register("Trilu", "upper")
def _trilu(node: Node):
    upper = bool(node.attr("upper", 1))
    k = int(_scalar(node.static(1, "k"))) if node.has(1) else 0
    v = node.value(0)
    if v.static is not None:
        return (np.triu if upper else np.tril)(v.static, k)
    return op.trilu(v.expr, k, upper)


@_register("CumSum", "exclusive reverse")
def _cumsum(node: Node):
    v = node.value(0)
    nd = len(v.shape)
    axis = int(_scalar(node.static(1, "axis")))
    if not -nd <= axis < nd:
        node.fail(f"axis={axis} is out of range for a {nd}-D input")
    exclusive, reverse = bool(node.attr("exclusive", 0)), bool(node.attr("reverse", 0))
    if v.static is not None:
        a = np.flip(v.static, axis) if reverse else v.static
        out = np.cumsum(a, axis=axis, dtype=a.dtype)
        out = out - a if exclusive else out
        return np.flip(out, axis) if reverse else out
    return op.cumsum(v.expr, axis % nd, exclusive, reverse)


# --- values known at import time -------------------------------------------------------------


@_register("ConstantOfShape", "value")
def _constant_of_shape(node: Node):
    shape = tuple(int(d) for d in node.static(0, "shape").reshape(-1))
    value = node.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return np.full(shape, value[0], dtype=value.dtype)


@_register("Range")
def _range(node: Node):
    start, limit, delta = (node.static(i, w) for i, w in enumerate(("start", "limit", "delta")))
    return np.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)
