"""``fold_scale_axis``: fold per-channel scales into convolution / dense weights.

What is left of a batch norm after ``simplify_inference`` is ``add(multiply(x, scale),
shift)``. Relay's FoldScaleAxis removes the multiply in two directions (backward first):

- backward: ``multiply(conv(x, W), c)`` -> ``conv(x, W * c)`` (c scales the output channels),
  also through a per-channel constant add in between: ``multiply(add(conv, b), c)`` ->
  ``add(conv(x, W * c), b * c)``; likewise for ``nn.dense`` (c scales the weight's rows).
- forward: ``multiply(x, s)`` followed by per-channel constant adds and relus whose result
  only feeds convolutions -> the convolutions' weights scaled on the input channel axis and
  the adds' constants divided by ``s``. Through a relu this needs ``s > 0`` (relu(s * y) =
  s * relu(y)), which Relay checks too. It is what turns a pre-activation resnet's ``bn ->
  relu -> conv`` into ``add -> relu -> conv``.

This is the subset of Relay's pass that the zoo's networks exercise. Relay also folds
backward through relu (positive scales) and through an add whose both sides are scalable
(``multiply(add(conv1, conv2), c)``), and forward into depthwise/grouped layouts with split
channel axes; none of these shapes occurs after ``simplify_inference`` on our networks
(a residual sum that a batch norm follows has either a second user or an unscalable side).

A value used anywhere else (a second user, a function output) blocks the fold, so the network
computes the same numbers.
"""

from __future__ import annotations

import numpy as np

from ...dtype import is_float
from .. import op
from ..ir import Call, Constant, Expr, Function, make_call, rewrite, users
from .fold import fold_constant

__all__ = ["fold_scale_axis"]

_CONVS = ("nn.conv2d", "nn.conv3d")


def _split_const(call: Call):
    """``(index of the non-constant arg, the constant)`` for a binary op whose one side is a
    Constant that does not grow the other side's shape; else None."""
    if len(call.args) != 2:
        return None
    a, b = call.args
    for i, (x, c) in enumerate(((a, b), (b, a))):
        if isinstance(c, Constant) and not isinstance(x, Constant) and x.shape == call.shape:
            return i, c
    return None


def _channel_vector(c: Constant, shape, axis: int) -> np.ndarray | None:
    """``c`` as a (shape[axis],) vector, if it only varies along ``axis`` of ``shape``."""
    v = c.value
    if v.ndim > len(shape):
        return None
    full = (1,) * (len(shape) - v.ndim) + v.shape
    if any(full[d] != 1 for d in range(len(shape)) if d != axis):
        return None
    if full[axis] not in (1, shape[axis]):
        return None
    return np.broadcast_to(v.reshape(-1), (shape[axis],))


def _along(vec: np.ndarray, ndim: int, axis: int, dtype) -> Constant:
    shape = [1] * ndim
    shape[axis] = vec.shape[0]
    return Constant(np.asarray(vec, dtype=dtype).reshape(shape))


def _out_axes(call: Expr):
    """(output channel axis, weight axis of output channels) of a scalable anchor."""
    if not isinstance(call, Call):
        return None
    if call.op in _CONVS:
        return call.attrs["data_layout"].index("C"), call.attrs["kernel_layout"].index("O")
    if call.op == "nn.dense":
        return len(call.shape) - 1, 0
    return None


def _scale_weight(conv: Call, vec: np.ndarray, waxis: int) -> Call:
    data, w = conv.args
    return make_call(conv.op, (data, op.multiply(w, _along(vec, len(w.shape), waxis, w.dtype))),
                     conv.attrs)  # fmt: skip


def _backward(func: Function) -> Function:
    use = users(func)
    outputs = set(func.outputs)

    def single(x):
        return x not in outputs and len(use.get(x, ())) == 1

    plans = {}
    for m in use:
        if not (isinstance(m, Call) and m.op == "multiply") or not is_float(m.dtype):
            continue  # integer scales (quantized networks) would not fold exactly
        split = _split_const(m)
        if split is None:
            continue
        xi, c = split
        x = m.args[xi]
        bias = None
        inner = x
        if isinstance(x, Call) and x.op == "add" and single(x) and _split_const(x):
            bi, b = _split_const(x)
            bias = (bi, b)
            inner = x.args[bi]
        axes = _out_axes(inner)
        if axes is None or not single(inner):
            continue
        vec = _channel_vector(c, m.shape, axes[0])
        if vec is None or (bias and _channel_vector(bias[1], m.shape, axes[0]) is None):
            continue
        plans[m] = (xi, bias, axes, vec)

    def visit(node, args):
        if node not in plans:
            return None
        xi, bias, (oaxis, waxis), vec = plans[node]
        x = args[xi]
        if bias is None:
            return _scale_weight(x, vec, waxis)
        bi, b = bias
        conv = _scale_weight(x.args[bi], vec, waxis)
        nb = Constant(
            (b.value * _along(vec, len(node.shape), oaxis, b.dtype).value).astype(b.dtype)
        )
        return op.add(conv, nb) if bi == 0 else op.add(nb, conv)

    return rewrite(func, visit)


def _conv_input_scale(conv: Call, vec: np.ndarray):
    """(weight axis, per-weight-slice vector) scaling ``conv``'s input channels by ``vec``, or
    None when the conv is grouped but not depthwise (Relay folds neither)."""
    kl = conv.attrs["kernel_layout"]
    groups = conv.attrs["groups"]
    w = conv.args[1]
    if groups == 1:
        return kl.index("I"), vec
    cin = conv.args[0].shape[conv.attrs["data_layout"].index("C")]
    if groups == cin and w.shape[kl.index("I")] == 1:
        out_ch = w.shape[kl.index("O")]
        return kl.index("O"), np.repeat(vec, out_ch // cin)
    return None


def _forward(func: Function) -> Function:
    use = users(func)
    outputs = set(func.outputs)
    plans: dict[Call, tuple] = {}
    for m in use:
        if not (isinstance(m, Call) and m.op == "multiply") or m in plans or not is_float(m.dtype):
            continue
        split = _split_const(m)
        if split is None:
            continue
        xi, s = split
        chain, cur = [], m
        while cur not in outputs and len(use[cur]) == 1:
            nxt = use[cur][0]
            if nxt.op == "nn.relu":
                chain.append((nxt, None))
            elif nxt.op == "add" and _split_const(nxt) and nxt.args[_split_const(nxt)[0]] is cur:
                chain.append((nxt, _split_const(nxt)))
            else:
                break
            cur = nxt
        consumers = use[cur]
        if cur in outputs or not consumers:
            continue
        if any(node.op == "nn.relu" for node, _ in chain) and not np.all(s.value > 0):
            continue  # relu(s * y) = s * relu(y) only for s > 0 (Relay's require_positive)
        if not all(c.op in _CONVS and c.args[0] is cur and c.args[1] is not cur for c in consumers):
            continue
        axes = {c.attrs["data_layout"].index("C") for c in consumers}
        if len(axes) != 1:
            continue
        axis = axes.pop()
        vec = _channel_vector(s, m.shape, axis)
        if vec is None:
            continue
        scales = [_conv_input_scale(c, vec) for c in consumers]
        biases = [b for _, b in chain if b is not None]
        if any(sc is None for sc in scales) or any(
            _channel_vector(b[1], m.shape, axis) is None for b in biases
        ):
            continue
        plans[m] = ("drop", xi)
        for node, b in chain:
            if b is not None:
                bi, bc = b
                full = _along(vec.astype(np.float64), len(m.shape), axis, np.float64).value
                plans[node] = ("bias", bi, Constant((bc.value / full).astype(bc.dtype)))
        for c, sc in zip(consumers, scales):
            plans[c] = ("weight",) + sc

    def visit(node, args):
        plan = plans.get(node)
        if plan is None:
            return None
        if plan[0] == "drop":
            return args[plan[1]]
        if plan[0] == "bias":
            _, bi, nb = plan
            x = args[bi]
            return op.add(x, nb) if bi == 0 else op.add(nb, x)
        _, waxis, vec = plan
        call = make_call(node.op, args, node.attrs)
        return _scale_weight(call, vec, waxis)

    return rewrite(func, visit)


def fold_scale_axis(func: Function) -> Function:
    """Fold per-channel constant scales into conv/dense weights (backward, then forward), then
    fold the scaled weights (``fold_constant``)."""
    return fold_constant(_forward(_backward(func)))
