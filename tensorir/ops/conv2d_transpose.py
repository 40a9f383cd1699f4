"""2-D transposed convolution (Relay's ``nn.conv2d_transpose``, ONNX's ConvTranspose) as topi
writes it: the input dilated by the strides and padded, then a stride-1 convolution with the
kernel flipped. The result is a conv-like reduction, so the auto-scheduler tunes it as it
tunes conv2d (the padding stage is inlined into the reduction's reads)."""

from __future__ import annotations

from .. import te
from ..tensor import Tensor, TensorError
from ._util import add, as_tuple, cast_to, compute, mul, spatial_padding

__all__ = ["conv2d_transpose", "conv_transpose_out_size"]

KERNEL_LAYOUTS = {"NCHW": "IOHW", "NHWC": "HWIO"}
"""The kernel layout of each data layout. ``I`` is the input channels (all of them), ``O``
the output channels of one group, as ONNX's (C, M/group, kH, kW) weight."""


def conv_transpose_out_size(
    size: int, kernel: int, stride: int, dilation: int, pad_total: int, output_padding: int
) -> int:
    """Output length of a transposed convolution along one dimension (ONNX's formula)."""
    return stride * (size - 1) + output_padding + (kernel - 1) * dilation + 1 - pad_total


def conv2d_transpose(
    data: Tensor,
    weight: Tensor,
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    output_padding=(0, 0),
    dilation=(1, 1),
    groups: int = 1,
    data_layout: str = "NCHW",
    kernel_layout: str = "",
    out_dtype: str = "",
) -> Tensor:
    """The gradient of conv2d with respect to its input, as an inference op.

    Parameters
    ----------
    data : Tensor
        NCHW ``(N, CI, H, W)`` or NHWC ``(N, H, W, CI)``.
    weight : Tensor
        IOHW ``(CI, CO/groups, KH, KW)`` for NCHW, HWIO ``(KH, KW, CI, CO/groups)`` for NHWC.
    strides, dilation, padding :
        As ONNX's ConvTranspose: ``padding`` (top, left, bottom, right) crops the full output.
    output_padding : (int, int)
        Extra rows / columns at the bottom / right of the output.
    groups : int
    out_dtype : str
        "" means the input dtype.

    Returns
    -------
    Tensor ``conv2d_transpose_nchw`` / ``conv2d_transpose_nhwc`` reading ``data_pad``:
    ``(N, CO, OH, OW)`` or ``(N, OH, OW, CO)`` with
    ``OH = SH * (H - 1) + OPH + (KH - 1) * DH + 1 - top - bottom``.
    """
    op = "nn.conv2d_transpose"
    if data_layout not in KERNEL_LAYOUTS:
        raise TensorError(f"{op}: data_layout {data_layout!r} is not supported; use NCHW or NHWC")
    kl = kernel_layout or KERNEL_LAYOUTS[data_layout]
    if kl != KERNEL_LAYOUTS[data_layout]:
        raise TensorError(
            f"{op}: kernel_layout {kl!r} with data_layout {data_layout!r} is not supported; use "
            f"{KERNEL_LAYOUTS[data_layout]!r}"
        )
    s = as_tuple(strides, 2, op, "strides")
    d = as_tuple(dilation, 2, op, "dilation")
    op_pad = as_tuple(output_padding, 2, op, "output_padding")
    before, after = spatial_padding(padding, 2, op)
    if min(s) < 1 or min(d) < 1:
        raise TensorError(f"{op}: strides {s} and dilation {d} must be positive")
    hw = [data_layout.index(c) for c in "HW"]
    cax = data_layout.index("C")
    N, CI = data.shape[0], data.shape[cax]
    sizes = [data.shape[a] for a in hw]
    WI = weight.shape[kl.index("I")]
    COG = weight.shape[kl.index("O")]
    ks = [weight.shape[kl.index(c)] for c in "HW"]
    if groups < 1 or WI != CI or CI % groups:
        raise TensorError(
            f"{op}: a weight {list(weight.shape)} ({kl}) with groups={groups} does not fit "
            f"{CI} input channels"
        )
    CIG, CO = CI // groups, COG * groups
    out_sizes = [
        conv_transpose_out_size(sizes[j], ks[j], s[j], d[j], before[j] + after[j], op_pad[j])
        for j in range(2)
    ]
    if min(out_sizes) < 1:
        raise TensorError(f"{op}: the padding {padding} leaves an empty output {out_sizes}")
    out_dtype = out_dtype or data.dtype
    # data_pad[p] = x[(p - off) / s] where that is a whole input index, else 0; off is the
    # flipped kernel's reach minus the crop (negative when the crop is larger).
    off = [(ks[j] - 1) * d[j] - before[j] for j in range(2)]
    psizes = [out_sizes[j] + (ks[j] - 1) * d[j] for j in range(2)]
    pshape = list(data.shape)
    for j, a in enumerate(hw):
        pshape[a] = psizes[j]
    zero = te.const(0.0, data.dtype)

    def fpad(*idx):
        conds, src = [], list(idx)
        for j, a in enumerate(hw):
            q = add(idx[a], -off[j])
            if off[j] > 0:
                conds.append(q >= 0)
            if psizes[j] - 1 - off[j] > (sizes[j] - 1) * s[j]:
                conds.append(q < (sizes[j] - 1) * s[j] + 1)
            if s[j] > 1:
                conds.append(te.equal(te.floormod(q, s[j]), 0))
                q = te.floordiv(q, s[j])
            src[a] = q
        if not conds:
            return data[tuple(src)]
        return te.if_then_else(te.all(*conds), data[tuple(src)], zero)

    padded = compute(tuple(pshape), fpad, "data_pad", "i", tag="injective,pad")
    rc = te.reduce_axis((0, CIG), name="rc")
    ry = te.reduce_axis((0, ks[0]), name="ry")
    rx = te.reduce_axis((0, ks[1]), name="rx")

    def body(n, co, y, x):
        ci = rc if groups == 1 else add(mul(co // COG, CIG), rc)
        pidx = [n, None, None, None]
        pidx[cax] = ci
        pidx[hw[0]] = add(y, mul(ry, d[0]))
        pidx[hw[1]] = add(x, mul(rx, d[1]))
        widx = {"I": ci, "O": co if groups == 1 else co % COG}
        widx["H"], widx["W"] = ks[0] - 1 - ry, ks[1] - 1 - rx
        w = weight[tuple(widx[c] for c in kl)]
        return te.sum(
            cast_to(padded[tuple(pidx)], out_dtype) * cast_to(w, out_dtype), axis=[rc, ry, rx]
        )

    if data_layout == "NCHW":
        return compute(
            (N, CO, out_sizes[0], out_sizes[1]),
            lambda n, co, y, x: body(n, co, y, x),
            "conv2d_transpose_nchw",
            ["nn", "ff", "yy", "xx"],
            tag="conv2d_transpose_nchw",
        )
    return compute(
        (N, out_sizes[0], out_sizes[1], CO),
        lambda n, y, x, co: body(n, co, y, x),
        "conv2d_transpose_nhwc",
        ["nn", "yy", "xx", "ff"],
        tag="conv2d_transpose_nhwc",
    )
