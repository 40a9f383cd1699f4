"""Injective data-movement ops: concatenate, pad, reshape, flatten, transpose, squeeze, layout."""

from __future__ import annotations

import math

from .. import te
from ..tensor import Tensor, TensorError
from ._util import add, compute, mul
from ._util import pad as _pad

__all__ = [
    "batch_flatten",
    "concatenate",
    "layout_transform",
    "pad",
    "reshape",
    "reshape_shape",
    "squeeze",
    "transpose",
]

_LAYOUT_PERMS = {  # (src, dst) -> for each dst dim, the src dim it reads
    ("NCHW", "NHWC"): (0, 2, 3, 1),
    ("NHWC", "NCHW"): (0, 3, 1, 2),
    ("NCDHW", "NDHWC"): (0, 2, 3, 4, 1),
    ("NDHWC", "NCDHW"): (0, 4, 1, 2, 3),
}


def _axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < ndim:
        raise TensorError(f"{op}: attribute 'axis' = {axis} is out of range for {ndim} dims")
    return axis % ndim


def concatenate(tensors, axis: int = 0) -> Tensor:
    """``T_concat``: the inputs joined along ``axis`` (a chain of if_then_else, as topi)."""
    tensors = list(tensors)
    if not tensors:
        raise TensorError("concatenate: needs at least one input")
    nd = tensors[0].ndim
    ax = _axis(axis, nd, "concatenate")
    for t in tensors[1:]:
        if t.ndim != nd or any(
            a != b for d, (a, b) in enumerate(zip(t.shape, tensors[0].shape)) if d != ax
        ):
            raise TensorError(
                f"concatenate: shapes {[list(t.shape) for t in tensors]} differ outside axis {ax}"
            )
    offsets = [0]
    for t in tensors:
        offsets.append(offsets[-1] + t.shape[ax])
    shape = tuple(offsets[-1] if d == ax else s for d, s in enumerate(tensors[0].shape))

    def f(*i):
        def read(k):
            idx = list(i)
            idx[ax] = add(i[ax], -offsets[k]) if offsets[k] else i[ax]
            return tensors[k][tuple(idx)]

        out = read(len(tensors) - 1)
        for k in range(len(tensors) - 2, -1, -1):
            out = te.if_then_else(i[ax] < offsets[k + 1], read(k), out)
        return out

    return compute(shape, f, "T_concat", "ax", tag="injective")


def pad(data: Tensor, pad_width, pad_value=0.0) -> Tensor:
    """Relay's ``nn.pad`` (constant mode): ``pad_width`` is ((before, after), ...) per dim."""
    pw = [tuple(int(v) for v in p) for p in pad_width]
    if len(pw) != data.ndim or any(len(p) != 2 or min(p) < 0 for p in pw):
        raise TensorError(
            f"nn.pad: attribute 'pad_width' must hold {data.ndim} non-negative "
            f"(before, after) pairs, got {pad_width!r}"
        )
    return _pad(data, [p[0] for p in pw], [p[1] for p in pw], pad_value, "T_pad", "ax")


def reshape_shape(shape, newshape) -> tuple[int, ...]:
    """Relay's newshape rules: 0 copies the input dim at that position, -1 is inferred."""
    newshape = [int(v) for v in ([newshape] if isinstance(newshape, int) else newshape)]
    out = []
    for k, v in enumerate(newshape):
        if v == 0:
            if k >= len(shape):
                raise TensorError(
                    f"reshape: newshape {newshape} uses 0 at position {k} beyond "
                    f"the input's {len(shape)} dims"
                )
            out.append(shape[k])
        elif v == -1 or v > 0:
            out.append(v)
        else:
            raise TensorError(
                f"reshape: newshape value {v} is not supported; use positive ints, "
                "0 or -1 (Relay's -2/-3/-4 are not)"
            )
    total = math.prod(shape)
    if out.count(-1) > 1:
        raise TensorError(f"reshape: newshape {newshape} has more than one -1")
    if -1 in out:
        known = math.prod(v for v in out if v != -1)
        out[out.index(-1)] = total // known if known else 0
    if math.prod(out) != total:
        raise TensorError(f"reshape: cannot reshape {list(shape)} to {newshape}")
    return tuple(out)


def _flat_reshape(data: Tensor, shape, name: str, tag: str = "injective") -> Tensor:
    in_strides = [math.prod(data.shape[d + 1 :]) for d in range(data.ndim)]
    out_strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]

    def f(*i):
        flat = 0
        for idx, st, ext in zip(i, out_strides, shape):
            if ext != 1:
                flat = add(mul(idx, st), flat) if not isinstance(flat, int) else mul(idx, st)
        src = []
        for d, (st, ext) in enumerate(zip(in_strides, data.shape)):
            if ext == 1 or isinstance(flat, int):
                src.append(0)
                continue
            v = flat if st == 1 else te.floordiv(flat, st)
            src.append(v if d == 0 else te.floormod(v, ext))
        return data[tuple(src)]

    return compute(tuple(shape), f, name, "ax", tag=tag)


def reshape(data: Tensor, newshape) -> Tensor:
    """``T_reshape`` to ``newshape`` (Relay's 0 and -1 allowed), row-major order kept."""
    return _flat_reshape(data, reshape_shape(data.shape, newshape), "T_reshape")


def batch_flatten(data: Tensor) -> Tensor:
    """Relay's ``nn.batch_flatten``: ``(N, ...)`` to ``(N, prod(...))``, named ``tensor``."""
    return _flat_reshape(data, (data.shape[0], math.prod(data.shape[1:])), "tensor")


def transpose(data: Tensor, axes=None) -> Tensor:
    """``T_transpose``: output dim ``k`` is input dim ``axes[k]`` (reversed when None)."""
    nd = data.ndim
    axes = tuple(range(nd - 1, -1, -1)) if axes is None else tuple(int(a) % nd for a in axes)
    if sorted(axes) != list(range(nd)):
        raise TensorError(f"transpose: attribute 'axes' = {axes} is not a permutation of {nd} dims")
    return _permute(data, axes, "T_transpose")


def _permute(data: Tensor, axes, name: str) -> Tensor:
    inv = [axes.index(d) for d in range(data.ndim)]
    shape = tuple(data.shape[a] for a in axes)
    return compute(
        shape,
        lambda *i: data[tuple(i[inv[d]] for d in range(data.ndim))],
        name,
        "ax",
        tag="injective",
    )


def squeeze(data: Tensor, axis=None) -> Tensor:
    """``T_squeeze``: drop the size-1 dims in ``axis`` (all size-1 dims when None)."""
    nd = data.ndim
    if axis is None:
        drop = {d for d, s in enumerate(data.shape) if s == 1}
    else:
        drop = {_axis(int(a), nd, "squeeze") for a in ([axis] if isinstance(axis, int) else axis)}
        bad = [d for d in drop if data.shape[d] != 1]
        if bad:
            raise TensorError(
                f"squeeze: attribute 'axis' names dims {bad} of {list(data.shape)} that are not 1"
            )
    keep = [d for d in range(nd) if d not in drop]
    shape = tuple(data.shape[d] for d in keep) or (1,)

    def f(*i):
        pos = {d: k for k, d in enumerate(keep)}
        return data[tuple(i[pos[d]] if d in pos else 0 for d in range(nd))]

    return compute(shape, f, "T_squeeze", "ax", tag="injective")


def layout_transform(data: Tensor, src_layout: str, dst_layout: str) -> Tensor:
    """``T_layout_trans`` between NCHW and NHWC, or NCDHW and NDHWC."""
    perm = _LAYOUT_PERMS.get((src_layout, dst_layout))
    if perm is None:
        raise TensorError(
            f"layout_transform: {src_layout!r} -> {dst_layout!r} is not supported; "
            f"use one of {[f'{a}->{b}' for a, b in _LAYOUT_PERMS]}"
        )
    if data.ndim != len(perm):
        raise TensorError(
            f"layout_transform: data has {data.ndim} dims, {src_layout} needs {len(perm)}"
        )
    return _permute(data, perm, "T_layout_trans")
