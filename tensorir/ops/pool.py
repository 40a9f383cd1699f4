"""Pooling: max/avg pool 2-D and 3-D, global pools and adaptive average pool (topi's names)."""

from __future__ import annotations

from .. import te
from ..dtype import is_float
from ..tensor import Tensor, TensorError
from ._util import (
    FLOAT32_LOWEST,
    add,
    as_tuple,
    check_layout,
    compute,
    mul,
    pad,
    spatial_padding,
    tap,
)

__all__ = ["adaptive_pool", "global_pool", "pool"]

_LAYOUTS = {2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def _spatial_dims(layout: str) -> list[int]:
    return [layout.index(c) for c in "DHW" if c in layout]


def _lowest(dtype: str):
    if dtype == "float32":
        return FLOAT32_LOWEST
    return te.min_value(dtype).value


def pool(
    data: Tensor,
    pool_type: str,
    pool_size,
    strides=None,
    padding=0,
    dilation=None,
    layout: str = "NCHW",
    ceil_mode: bool = False,
    count_include_pad: bool = False,
    op: str = "",
) -> Tensor:
    """Max or average pooling over 2 or 3 spatial dims (Relay's nn.max_pool2d/avg_pool3d...).

    Parameters
    ----------
    data : Tensor
        Layout ``layout``: "NCHW"/"NHWC" (2-D) or "NCDHW"/"NDHWC" (3-D).
    pool_type : str
        "max" or "avg".
    pool_size, strides, dilation : int or tuple of int
        Window, step (default 1) and dilation (default 1) per spatial dim.
    padding : int or tuple of int
        1, n or 2n values (all befores, then all afters).
    ceil_mode : bool
        Round the output size up (adds ``stride - 1`` padding after, as topi).
    count_include_pad : bool
        For "avg": divide by the taps inside the explicitly padded input (else only by the
        taps inside the data).

    Returns
    -------
    Tensor
        ``tensor`` (max: one ``max=`` stage over ``pad_temp``; avg: ``pool_sum`` then the
        division). ``pad_temp`` is left out when nothing is padded, as topi does.
    """
    nsp = 3 if len(layout) == 5 else 2
    op = op or f"nn.{pool_type}_pool{nsp}d"
    check_layout(layout, _LAYOUTS.get(nsp, ()), op, "layout")
    if data.ndim != len(layout):
        raise TensorError(f"{op}: data has {data.ndim} dims, layout {layout} needs {len(layout)}")
    if pool_type not in ("max", "avg"):
        raise TensorError(f"{op}: pool type {pool_type!r} is not 'max' or 'avg'")
    ks = as_tuple(pool_size, nsp, op, "pool_size")
    st = as_tuple(strides if strides is not None else 1, nsp, op, "strides")
    dl = as_tuple(dilation if dilation is not None else 1, nsp, op, "dilation")
    before, after = spatial_padding(padding, nsp, op)
    sp = _spatial_dims(layout)
    sizes = [data.shape[d] for d in sp]
    extra = [s - 1 if ceil_mode else 0 for s in st]
    out = [
        (n + b + a + e - ((k - 1) * d + 1)) // s + 1
        for n, b, a, e, k, d, s in zip(sizes, before, after, extra, ks, dl, st)
    ]
    if min(out) < 1:
        raise TensorError(f"{op}: the window {ks} does not fit the padded input {sizes}")
    full_before = [0] * data.ndim
    full_after = [0] * data.ndim
    for k, d in enumerate(sp):
        full_before[d], full_after[d] = before[k], after[k] + extra[k]
    value = _lowest(data.dtype) if pool_type == "max" else 0.0
    src = data
    if any(full_before) or any(full_after):
        src = pad(data, full_before, full_after, value, "pad_temp", "ax")
    rnames = ["dd", "dh", "dw"][-nsp:] if pool_type == "max" else ["rv0", "rv1", "rv2"][:nsp]
    rv = [te.reduce_axis((0, k), name=n) for k, n in zip(ks, rnames)]
    shape = list(data.shape)
    for k, d in enumerate(sp):
        shape[d] = out[k]

    def window(idx):
        idx = list(idx)
        for k, d in enumerate(sp):
            idx[d] = tap(idx[d], rv[k], st[k], dl[k])
        return src[tuple(idx)]

    if pool_type == "max":
        return compute(
            tuple(shape), lambda *i: te.max(window(i), axis=rv), "tensor", "ax", tag="pool_max"
        )
    pool_sum = compute(
        tuple(shape), lambda *i: te.sum(window(i), axis=rv), "pool_sum", "ax", tag="pool_sum"
    )

    def count(o, k):
        # Taps t in [0, K) of the window at o with lo <= o*stride - before + t*dil < hi:
        # t >= ceil((lo + before - o*stride) / dil), t <= floor((hi - 1 + before - o*stride) / dil).
        base = mul(o, st[k])
        lo, hi = (-before[k], sizes[k] + after[k]) if count_include_pad else (0, sizes[k])
        d = dl[k]
        first = (lo + before[k]) - base
        last = (hi - 1 + before[k]) - base
        if d != 1:
            first, last = te.floordiv(first + (d - 1), d), te.floordiv(last, d)
        return te.max(te.min(last, ks[k] - 1) - te.max(first, 0) + 1, 1)

    def avg(*i):
        n = None
        for k, d in enumerate(sp):
            c = count(i[d], k)
            n = c if n is None else n * c
        div = te.cast(data.dtype, n) if is_float(data.dtype) else n
        return pool_sum[i] / div

    return compute(tuple(shape), avg, "tensor", "ax", tag="elemwise")


def adaptive_pool(
    data: Tensor,
    output_size,
    pool_type: str = "avg",
    layout: str = "NCHW",
    op: str = "nn.adaptive_avg_pool2d",
) -> Tensor:
    """Adaptive pooling: output cell ``o`` covers ``[floor(o*n/out), ceil((o+1)*n/out))``.

    Stages ``adaptive_pool_sum`` (or ``adaptive_pool_max``) and ``adaptive_pool_avg``.
    When the output size divides the input every window has the same size and no bounds
    check is built; otherwise the reduction runs over the largest window with an
    ``if_then_else`` masking the taps past each window's end.
    """
    check_layout(layout, _LAYOUTS[2] + _LAYOUTS[3], op, "layout")
    sp = _spatial_dims(layout)
    sizes = [data.shape[d] for d in sp]
    osz = as_tuple(output_size, len(sp), op, "output_size")
    if min(osz) < 1:
        raise TensorError(f"{op}: attribute 'output_size' = {output_size!r} must be positive")
    even = [n % o == 0 for n, o in zip(sizes, osz)]
    kmax = [
        n // o if ev else max(-(-(j + 1) * n // o) - (j * n // o) for j in range(o))
        for n, o, ev in zip(sizes, osz, even)
    ]
    rv = [te.reduce_axis((0, k), name=f"rv{j}") for j, k in enumerate(kmax)]
    shape = list(data.shape)
    for k, d in enumerate(sp):
        shape[d] = osz[k]

    def start(o, k):
        return mul(o, sizes[k] // osz[k]) if even[k] else te.floordiv(o * sizes[k], osz[k])

    def end(o, k):  # ceil((o + 1) * n / out)
        return te.floordiv(add((o + 1) * sizes[k], osz[k] - 1), osz[k])

    ident = te.const(0, data.dtype) if pool_type == "avg" else te.min_value(data.dtype)

    def body(*i):
        idx = list(i)
        conds = []
        for k, d in enumerate(sp):
            idx[d] = add(start(i[d], k), rv[k])
            if not even[k]:
                conds.append(idx[d] < end(i[d], k))
        v = data[tuple(idx)]
        if conds:
            v = te.if_then_else(te.all(*conds), v, ident)
        return te.sum(v, axis=rv) if pool_type == "avg" else te.max(v, axis=rv)

    name = "adaptive_pool_sum" if pool_type == "avg" else "adaptive_pool_max"
    red = compute(tuple(shape), body, name, "ax", tag=name)
    if pool_type == "max":
        return red

    def avg(*i):
        n = None
        for k, d in enumerate(sp):
            c = kmax[k] if even[k] else end(i[d], k) - start(i[d], k)
            n = c if n is None else n * c
        return red[i] / (
            te.const(float(n), data.dtype) if isinstance(n, int) else te.cast(data.dtype, n)
        )

    return compute(tuple(shape), avg, "adaptive_pool_avg", "ax", tag="elemwise")


def global_pool(data: Tensor, pool_type: str = "avg", layout: str = "NCHW") -> Tensor:
    """Relay's ``nn.global_avg_pool2d`` / ``nn.global_max_pool2d``: adaptive pool to 1x1."""
    op = f"nn.global_{pool_type}_pool2d"
    check_layout(layout, _LAYOUTS[2], op, "layout")
    return adaptive_pool(data, (1, 1), pool_type, layout, op)
