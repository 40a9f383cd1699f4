"""Index-mapping ops of exported models: strided_slice, broadcast_to and trilu (topi's)."""

from __future__ import annotations

from .. import te
from ..tensor import Tensor, TensorError
from ._util import add, compute, mul
from .broadcast import _reader, broadcast_shape

__all__ = ["broadcast_to", "slice_dims", "strided_slice", "trilu"]


def slice_dims(shape, begin, end, strides) -> list[tuple[int, int, int]]:
    """(start, step, length) per dim of a slice; ``begin``/``end``/``strides`` give every dim
    and are clamped as Python's (and ONNX's) slices are: negative values count from the end,
    values past either end (INT64_MAX as exporters write) stop at it."""
    if not len(begin) == len(end) == len(strides) == len(shape):
        raise TensorError(
            f"strided_slice: begin {list(begin)}, end {list(end)} and strides {list(strides)} "
            f"must each have one value per dim of {list(shape)}"
        )
    out = []
    for n, b, e, s in zip(shape, begin, end, strides):
        if int(s) == 0:
            raise TensorError(f"strided_slice: a step of 0 (strides {list(strides)})")
        start, stop, step = slice(int(b), int(e), int(s)).indices(n)
        out.append((start, step, len(range(start, stop, step))))
    return out


def strided_slice(data: Tensor, begin, end, strides) -> Tensor:
    """``T_strided_slice[i] = data[begin + i * strides]`` per dim (see :func:`slice_dims`)."""
    dims = slice_dims(data.shape, begin, end, strides)
    shape = tuple(n for _, _, n in dims)
    if 0 in shape:
        raise TensorError(f"strided_slice: the slice of {list(data.shape)} is empty ({shape})")
    return compute(
        shape,
        lambda *i: data[tuple(add(mul(v, s), b) for v, (b, s, _) in zip(i, dims))],
        "T_strided_slice",
        "ax",
        tag="injective",
    )


def broadcast_to(data: Tensor, shape) -> Tensor:
    """``T_broadcast_to``: ``data`` broadcast (numpy's rule) to ``shape``."""
    shape = tuple(int(d) for d in shape)
    if broadcast_shape(data.shape, shape, "broadcast_to") != shape:
        raise TensorError(f"broadcast_to: {list(data.shape)} does not broadcast to {list(shape)}")
    read = _reader(data, shape)
    return compute(shape, lambda *i: read(i), "T_broadcast_to", "ax", tag="broadcast")


def trilu(data: Tensor, k: int = 0, upper: bool = True) -> Tensor:
    """``T_trilu``: the upper (``j - i >= k``) or lower (``j - i <= k``) triangle of the last
    two dims, zero elsewhere."""
    if data.ndim < 2:
        raise TensorError(f"trilu: data must have at least 2 dims, got {list(data.shape)}")
    zero = te.const(0, data.dtype)

    def f(*i):
        row, col = i[-2], i[-1]
        keep = (col - row >= k) if upper else (col - row <= k)
        return te.select(keep, data[i], zero)

    return compute(data.shape, f, "T_trilu", "ax", tag="injective")
