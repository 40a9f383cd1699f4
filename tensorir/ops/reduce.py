"""Reductions over axes (sum / mean / max / min), layer norm and cumsum, as topi's."""

from __future__ import annotations

import math

from .. import te
from ..dtype import is_float
from ..tensor import Tensor, TensorError
from ._util import compute

__all__ = ["cumsum", "layer_norm", "reduce", "reduce_axes"]

_REDUCERS = {"sum": te.sum, "mean": te.sum, "max": te.max, "min": te.min}


def reduce_axes(ndim: int, axis, exclude: bool = False, op: str = "reduce") -> tuple[int, ...]:
    """Relay's reduction axes: ``axis`` None means all dims; ``exclude`` reduces the others."""
    if axis is None:
        axes = set(range(ndim))
    else:
        axes = set()
        for a in (axis,) if isinstance(axis, int) else axis:
            if not -ndim <= int(a) < ndim:
                raise TensorError(f"{op}: axis {a} is out of range for {ndim} dims")
            axes.add(int(a) % ndim)
    if exclude:
        axes = set(range(ndim)) - axes
    return tuple(sorted(axes))


def reduce(data: Tensor, kind: str, axis=None, keepdims: bool = False, exclude: bool = False):
    """Relay's ``sum`` / ``mean`` / ``max`` / ``min`` over ``axis``.

    One reduction stage ``T_<kind>_red`` (topi's ``<data>_red``); ``mean`` divides it by the
    element count in a second, elementwise stage ``T_divide``. A reduction over every dim
    keeps one size-1 dim (our tensors are never 0-d), as ``keepdims`` would.
    """
    op = kind
    if kind not in _REDUCERS:
        raise TensorError(f"reduce: kind {kind!r} is not one of {sorted(_REDUCERS)}")
    nd = data.ndim
    axes = reduce_axes(nd, axis, exclude, op)
    if not axes:  # nothing to reduce: a copy
        return compute(data.shape, lambda *i: data[i], f"T_{kind}_red", "ax", tag="elemwise")
    rvs = {d: te.reduce_axis((0, data.shape[d]), name=f"k{d}") for d in axes}
    keep = [d for d in range(nd) if d not in axes]
    if keepdims:
        shape = tuple(1 if d in axes else data.shape[d] for d in range(nd))
    else:
        shape = tuple(data.shape[d] for d in keep) or (1,)

    def read(i):
        if keepdims:
            return tuple(rvs[d] if d in axes else i[d] for d in range(nd))
        pos = {d: k for k, d in enumerate(keep)}
        return tuple(rvs[d] if d in axes else i[pos[d]] for d in range(nd))

    reducer = _REDUCERS[kind]
    red = compute(
        shape,
        lambda *i: reducer(data[read(i)], axis=[rvs[d] for d in axes]),
        f"T_{kind}_red",
        "ax",
        tag="comm_reduce",
    )
    if kind != "mean":
        return red
    count = math.prod(data.shape[d] for d in axes)
    div = te.const(float(count) if is_float(data.dtype) else count, data.dtype)
    return compute(shape, lambda *i: red[i] / div, "T_divide", "ax", tag="elemwise")


def layer_norm(data: Tensor, gamma: Tensor, beta: Tensor, axis: int = -1, epsilon=1e-5,
               center: bool = True, scale: bool = True) -> Tensor:  # fmt: skip
    """Relay's ``nn.layer_norm`` over one axis:
    ``(x - mean) / sqrt(var + eps) * gamma + beta``, ``gamma`` and ``beta`` of shape (C,).

    Two passes as topi's generic schedule: ``T_layer_norm_mean``, ``T_layer_norm_var`` (the
    mean of the squared deviations, more accurate than E[x^2] - E[x]^2), then the
    elementwise ``T_layer_norm``.
    """
    nd = data.ndim
    if not -nd <= axis < nd:
        raise TensorError(f"nn.layer_norm: axis {axis} is out of range for {nd} dims")
    if not is_float(data.dtype):
        raise TensorError(f"nn.layer_norm: data dtype {data.dtype} must be a float type")
    ax = axis % nd
    c = data.shape[ax]
    for t, n in ((gamma, "gamma"), (beta, "beta")):
        if t.shape != (c,):
            raise TensorError(f"nn.layer_norm: {n} shape {list(t.shape)} must be [{c}]")
    red_shape = tuple(s for d, s in enumerate(data.shape) if d != ax) or (1,)

    def full(i, k):
        rest = list(i) if nd > 1 else []
        return tuple(rest[:ax]) + (k,) + tuple(rest[ax:])

    def drop(i):
        return tuple(v for d, v in enumerate(i) if d != ax) if nd > 1 else (0,)

    inv_n = te.const(1.0 / c, data.dtype)
    k1 = te.reduce_axis((0, c), name="k")
    total = compute(red_shape, lambda *i: te.sum(data[full(i, k1)], axis=k1), "T_layer_norm_sum",
                    "i", tag="comm_reduce")  # fmt: skip
    mean = compute(red_shape, lambda *i: total[i] * inv_n, "T_layer_norm_mean", "i")
    k2 = te.reduce_axis((0, c), name="k")

    def sq(*i):
        d = data[full(i, k2)] - mean[i]
        return te.sum(d * d, axis=k2)

    sqsum = compute(red_shape, sq, "T_layer_norm_sqsum", "i", tag="comm_reduce")
    eps = te.const(float(epsilon), data.dtype)

    def norm(*i):
        r = drop(i)
        v = (data[i] - mean[r]) / te.sqrt(sqsum[r] * inv_n + eps)
        if scale:
            v = v * gamma[i[ax]]
        if center:
            v = v + beta[i[ax]]
        return v

    return compute(data.shape, norm, "T_layer_norm", "i", tag="injective", attrs={"axis": ax})


def cumsum(data: Tensor, axis: int = 0, exclusive: bool = False, reverse: bool = False):
    """``T_cumsum``: running sums along ``axis`` (ONNX CumSum: ``exclusive`` leaves the
    element itself out, ``reverse`` sums from the end). One reduction over the whole axis
    masked by ``where``: quadratic in the axis length, fine for the short axes (positions,
    masks) exported models take cumsums of."""
    nd = data.ndim
    if not -nd <= axis < nd:
        raise TensorError(f"cumsum: axis {axis} is out of range for {nd} dims")
    ax = axis % nd
    k = te.reduce_axis((0, data.shape[ax]), name="k")

    def f(*i):
        src = tuple(k if d == ax else v for d, v in enumerate(i))
        if reverse:
            cond = k > i[ax] if exclusive else k >= i[ax]
        else:
            cond = k < i[ax] if exclusive else k <= i[ax]
        return te.sum(data[src], axis=k, where=cond)

    return compute(data.shape, f, "T_cumsum", "ax", tag="comm_reduce")
