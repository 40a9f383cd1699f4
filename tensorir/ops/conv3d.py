"""3-D convolution: NCDHW (kernel OIDHW) and NDHWC (kernel DHWIO), as topi."""

from __future__ import annotations

from .. import te
from ..tensor import Tensor, TensorError
from ._util import add, as_tuple, cast_to, compute, mul, pad, spatial_padding, tap
from .conv2d import conv_out_size

__all__ = ["conv3d"]


def conv3d(
    data: Tensor,
    weight: Tensor,
    strides=(1, 1, 1),
    padding=(0, 0, 0, 0, 0, 0),
    dilation=(1, 1, 1),
    groups: int = 1,
    data_layout: str = "NCDHW",
    kernel_layout: str = "",
    out_dtype: str = "",
) -> Tensor:
    """Relay's ``nn.conv3d``.

    Parameters
    ----------
    data : Tensor
        NCDHW ``(N, CI, D, H, W)`` or NDHWC ``(N, D, H, W, CI)``.
    weight : Tensor
        OIDHW ``(CO, CI/groups, KD, KH, KW)`` or DHWIO ``(KD, KH, KW, CI/groups, CO)``.
    strides, dilation : int or tuple of 3 ints
    padding : int or tuple of int
        (front, top, left, back, bottom, right), or 1 / 3 values.
    groups : int
    data_layout, kernel_layout : str
        "NCDHW"/"OIDHW" or "NDHWC"/"DHWIO"; an empty kernel layout means the default.
    out_dtype : str
        Accumulation/output dtype (empty: the input dtype).

    Returns
    -------
    Tensor
        ``conv3d_ncdhw`` (reading ``pad_temp``) or ``Conv3dOutput`` (reading ``PaddedInput``).
    """
    op = "nn.conv3d"
    default = {"NCDHW": "OIDHW", "NDHWC": "DHWIO"}
    if data_layout not in default:
        raise TensorError(
            f"{op}: data_layout {data_layout!r} is not supported; use 'NCDHW' or 'NDHWC'"
        )
    if kernel_layout not in ("", default[data_layout]):
        raise TensorError(
            f"{op}: kernel_layout {kernel_layout!r} does not go with "
            f"{data_layout}; use {default[data_layout]!r}"
        )
    s = as_tuple(strides, 3, op, "strides")
    d = as_tuple(dilation, 3, op, "dilation")
    before, after = spatial_padding(padding, 3, op)
    ncdhw = data_layout == "NCDHW"
    if ncdhw:
        N, CI, *sizes = data.shape
        CO, WCI, *ks = weight.shape
    else:
        N, *sizes, CI = data.shape
        *ks, WCI, CO = weight.shape
    if groups < 1 or CI % groups or CO % groups or WCI * groups != CI:
        raise TensorError(
            f"{op}: groups={groups} does not fit {CI} input / {CO} output channels "
            f"and weight {list(weight.shape)}"
        )
    out = [
        conv_out_size(n, k, st, dl, b + a)
        for n, k, st, dl, b, a in zip(sizes, ks, s, d, before, after)
    ]
    out_dtype = out_dtype or data.dtype
    rc = te.reduce_axis((0, WCI), name="rc")
    rz = te.reduce_axis((0, ks[0]), name="rz")
    ry = te.reduce_axis((0, ks[1]), name="ry")
    rx = te.reduce_axis((0, ks[2]), name="rx")
    cog = CO // groups

    def chan(ff):
        return rc if groups == 1 else add(mul(ff // cog, WCI), rc)

    def sp(zz, yy, xx):
        return tuple(tap(o, r, st, dl) for o, r, st, dl in zip((zz, yy, xx), (rz, ry, rx), s, d))

    def rd(t, idx):
        return cast_to(t[idx], out_dtype)

    if ncdhw:
        padded = pad(data, (0, 0) + before, (0, 0) + after, 0.0, "pad_temp", "i")
        return compute(
            (N, CO, *out),
            lambda nn, ff, zz, yy, xx: te.sum(
                rd(padded, (nn, chan(ff)) + sp(zz, yy, xx)) * rd(weight, (ff, rc, rz, ry, rx)),
                axis=[rc, rz, ry, rx],
            ),
            "conv3d_ncdhw",
            ["nn", "ff", "zz", "yy", "xx"],
            tag="conv3d_ncdhw",
        )
    padded = pad(data, (0,) + before + (0,), (0,) + after + (0,), 0.0, "PaddedInput", "i")
    return compute(
        (N, *out, CO),
        lambda nn, zz, yy, xx, ff: te.sum(
            rd(padded, (nn,) + sp(zz, yy, xx) + (chan(ff),)) * rd(weight, (rz, ry, rx, rc, ff)),
            axis=[rz, ry, rx, rc],
        ),
        "Conv3dOutput",
        ["nn", "zz", "yy", "xx", "ff"],
        tag="conv3d_ndhwc",
    )
