"""``simplify_inference`` (batch_norm -> multiply + add) and ``canonicalize_ops``
(bias_add -> add), as Relay's SimplifyInference and CanonicalizeOps."""

from __future__ import annotations

import numpy as np

from .. import op
from ..ir import Call, Constant, Expr, Function, rewrite

__all__ = ["canonicalize_ops", "simplify_inference"]


def _channel_shape(ndim: int, axis: int, c: int) -> tuple[int, ...]:
    shape = [1] * ndim
    shape[axis] = c
    return tuple(shape)


def _along_axis(vec: Expr, ndim: int, axis: int) -> Expr:
    """A (C,) vector reshaped to rank ``ndim`` with C on ``axis``: (1, 1, 1, C) for NHWC.

    Relay keeps (C,) for a last axis and (C, 1, 1) for NCHW; we always expand to the full
    rank so that a fused group reads the value as ``placeholder[ax0, 0, 0, ax3]``, as the
    tasks TVM extracts print it.
    """
    shape = _channel_shape(ndim, axis, vec.shape[0])
    if isinstance(vec, Constant):
        return Constant(vec.value.reshape(shape), vec.name)
    return op.reshape(vec, shape)


def _bn_scale_shift(args, a):
    data, gamma, beta, mean, var = args
    dtype = data.dtype
    if all(isinstance(x, Constant) for x in (gamma, beta, mean, var)):
        # Bound weights: compute in float64 once, as the numpy reference does.
        scale = 1.0 / np.sqrt(var.value.astype(np.float64) + a["epsilon"])
        if a["scale"]:
            scale = scale * gamma.value
        shift = -mean.value * scale
        if a["center"]:
            shift = shift + beta.value
        return Constant(scale.astype(dtype)), Constant(shift.astype(dtype))
    # Unbound weights: build Relay's expression; fold_constant cannot fold it, but it is right.
    scale = op.divide(op.const(1.0, dtype), op.sqrt(op.add(var, op.const(a["epsilon"], dtype))))
    if a["scale"]:
        scale = op.multiply(scale, gamma)
    shift = op.multiply(op.negative(mean), scale)
    if a["center"]:
        shift = op.add(shift, beta)
    return scale, shift


def simplify_inference(func: Function) -> Function:
    """Replace every ``nn.batch_norm`` by ``add(multiply(data, scale), shift)``.

    ``scale = gamma / sqrt(var + eps)`` and ``shift = beta - mean * scale`` are Constants of
    shape (1, ..., C, ..., 1) when the BN weights are bound (``bind_params`` first), else
    expressions of the weight Vars.
    """

    def visit(node, args):
        if not (isinstance(node, Call) and node.op == "nn.batch_norm"):
            return None
        data = args[0]
        ndim = len(data.shape)
        axis = node.attrs["axis"] % ndim
        scale, shift = _bn_scale_shift(args, node.attrs)
        out = op.multiply(data, _along_axis(scale, ndim, axis))
        return op.add(out, _along_axis(shift, ndim, axis))

    return rewrite(func, visit)


def canonicalize_ops(func: Function) -> Function:
    """``nn.bias_add(x, b, axis)`` -> ``add(x, b expanded to x's rank on axis)``.

    Relay's CanonicalizeOps does this before fusion, which is why TVM's dense task reads
    ``T_dense + placeholder[ax1]`` as a ``T_add``.
    """

    def visit(node, args):
        if not (isinstance(node, Call) and node.op == "nn.bias_add"):
            return None
        data, bias = args
        ndim = len(data.shape)
        axis = node.attrs["axis"] % ndim
        if axis == ndim - 1:
            return op.add(data, bias)  # (C,) already broadcasts on the last axis
        return op.add(data, _along_axis(bias, ndim, axis))

    return rewrite(func, visit)
