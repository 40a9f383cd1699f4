"""Relay's ``strided_slice`` with static bounds: ``data[begin:end:strides]`` on some axes."""

from __future__ import annotations

from ..tensor import Tensor
from ._util import compute

__all__ = ["slice_axes", "strided_slice"]


def slice_axes(shape, begin, end, strides=None, axes=None) -> list[tuple[int, int, int]]:
    """(start, stop, step) per dim of ``shape`` (Python slice semantics: negative indices count
    from the end, out-of-range bounds clamp); ``axes`` None means begin/end cover dims 0, 1, ..."""
    nd = len(shape)
    axes = list(range(len(begin))) if axes is None else [int(a) % nd for a in axes]
    if len(begin) != len(axes) or len(end) != len(axes):
        raise ValueError(
            f"begin {tuple(begin)} and end {tuple(end)} need one value per axis {axes}"
        )
    strides = [1] * len(axes) if strides is None else list(strides)
    if len(strides) == 1 and len(axes) > 1:
        strides = strides * len(axes)
    if len(strides) != len(axes) or 0 in strides:
        raise ValueError(f"strides {tuple(strides)} need one non-zero value per axis {axes}")
    out = [(0, n, 1) for n in shape]
    for a, b, e, s in zip(axes, begin, end, strides):
        out[a] = slice(int(b), int(e), int(s)).indices(shape[a])
    return out


def strided_slice(data: Tensor, begin, end, strides=None, axes=None) -> Tensor:
    """``T_strided_slice``: output index ``i`` reads ``start + i * step`` on each dim."""
    bounds = slice_axes(data.shape, begin, end, strides, axes)
    shape = tuple(max(0, len(range(*b))) for b in bounds)

    def f(*i):
        idx = []
        for k, (start, _, step) in zip(i, bounds):
            e = k * step if step != 1 else k
            idx.append(e + start if start else e)
        return data[tuple(idx)]

    return compute(shape, f, "T_strided_slice", "ax", tag="injective")
