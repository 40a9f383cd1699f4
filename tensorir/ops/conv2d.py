"""2-D convolution in NCHW (kernel OIHW) and NHWC (kernel HWIO or OHWI; depthwise HWOI), as topi."""

from __future__ import annotations

from .. import te
from ..tensor import Tensor, TensorError
from ._util import add, as_tuple, cast_to, compute, mul, pad, spatial_padding, tap

__all__ = ["conv2d", "conv2d_nchw", "conv2d_nhwc", "conv_out_size"]


def conv_out_size(size: int, kernel: int, stride: int, dilation: int, pad_total: int) -> int:
    """Output length of a convolution/pool window along one dimension."""
    return (size + pad_total - ((kernel - 1) * dilation + 1)) // stride + 1


def conv2d(
    data: Tensor,
    weight: Tensor,
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    groups: int = 1,
    data_layout: str = "NCHW",
    kernel_layout: str = "",
    out_dtype: str = "",
) -> Tensor:
    """Relay's ``nn.conv2d``: dispatch on the layout.

    Parameters
    ----------
    data : Tensor
        NCHW ``(N, CI, H, W)`` or NHWC ``(N, H, W, CI)``.
    weight : Tensor
        OIHW ``(CO, CI/groups, KH, KW)`` for NCHW; HWIO ``(KH, KW, CI/groups, CO)`` or OHWI
        ``(CO, KH, KW, CI/groups)`` (the tensor-core implicit GEMM's K-major form) for NHWC,
        or HWOI ``(KH, KW, CI, multiplier)`` for a depthwise NHWC conv (groups == CI).
    strides, padding, dilation : int or tuple of int
        Padding is (top, left, bottom, right), or one / two values.
    groups : int
        Channel groups; ``groups == CI`` with one input channel per group is depthwise.
    data_layout, kernel_layout : str
        "NCHW"/"OIHW" or "NHWC"/"HWIO" or "OHWI" (or "HWOI" for depthwise NHWC). An empty kernel
        layout means the default of the data layout.
    out_dtype : str
        Accumulation and output dtype; empty means the input dtype. Operands are cast to it
        first, so int8 inputs accumulate in int32.

    Returns
    -------
    Tensor
        NCHW ``(N, CO, OH, OW)`` or NHWC ``(N, OH, OW, CO)``.
    """
    if data_layout == "NCHW":
        if kernel_layout not in ("", "OIHW"):
            raise TensorError(
                f"nn.conv2d: kernel_layout {kernel_layout!r} with data_layout "
                "'NCHW' is not supported; use 'OIHW'"
            )
        return conv2d_nchw(data, weight, strides, padding, dilation, groups, out_dtype)
    if data_layout == "NHWC":
        if kernel_layout not in ("", "HWIO", "HWOI", "OHWI"):
            raise TensorError(
                f"nn.conv2d: kernel_layout {kernel_layout!r} with data_layout "
                "'NHWC' is not supported; use 'HWIO', 'OHWI' or 'HWOI'"
            )
        return conv2d_nhwc(
            data, weight, strides, padding, dilation, groups, out_dtype, kernel_layout or "HWIO"
        )
    raise TensorError(
        f"nn.conv2d: data_layout {data_layout!r} is not supported; use 'NCHW' or 'NHWC'"
    )


def _params(strides, padding, dilation):
    s = as_tuple(strides, 2, "nn.conv2d", "strides")
    d = as_tuple(dilation, 2, "nn.conv2d", "dilation")
    before, after = spatial_padding(padding, 2, "nn.conv2d")
    if min(s) < 1 or min(d) < 1:
        raise TensorError(f"nn.conv2d: strides {s} and dilation {d} must be positive")
    return s, d, before, after


def _check_groups(ci: int, co: int, wci: int, groups: int, layout: str):
    if groups < 1 or ci % groups or co % groups or wci * groups != ci:
        raise TensorError(
            f"nn.conv2d ({layout}): groups={groups} does not fit {ci} input channels, {co} "
            f"output channels and a weight with {wci} input channels per group"
        )


def conv2d_nchw(
    data: Tensor,
    weight: Tensor,
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    groups: int = 1,
    out_dtype: str = "",
) -> Tensor:
    """NCHW conv2d with an OIHW kernel: ``conv2d_nchw``, ``group_conv2d_nchw`` or
    ``DepthwiseConv2d`` (groups == CI, weight ``(CI*multiplier, 1, KH, KW)``) reading
    ``pad_temp``. See :func:`conv2d` for the parameters."""
    (sh, sw), (dh, dw), before, after = _params(strides, padding, dilation)
    N, CI, H, W = data.shape
    CO, WCI, KH, KW = weight.shape
    _check_groups(CI, CO, WCI, groups, "NCHW")
    out_dtype = out_dtype or data.dtype
    OH = conv_out_size(H, KH, sh, dh, before[0] + after[0])
    OW = conv_out_size(W, KW, sw, dw, before[1] + after[1])
    padded = pad(data, (0, 0) + before, (0, 0) + after, 0.0, "pad_temp", "i")

    def rd(t, idx):
        return cast_to(t[idx], out_dtype)

    if groups == CI and WCI == 1 and groups > 1:
        mult = CO // CI
        di = te.reduce_axis((0, KH), name="di")
        dj = te.reduce_axis((0, KW), name="dj")
        return compute(
            (N, CO, OH, OW),
            lambda b, c, i, j: te.sum(
                rd(
                    padded,
                    (b, c if mult == 1 else c // mult, tap(i, di, sh, dh), tap(j, dj, sw, dw)),
                )
                * rd(weight, (c, 0, di, dj)),
                axis=[di, dj],
            ),
            "DepthwiseConv2d",
            ["b", "c", "i", "j"],
            tag="depthwise_conv2d_nchw",
        )
    rc = te.reduce_axis((0, WCI), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    cog = CO // groups

    def chan(ff):
        return rc if groups == 1 else add(mul(ff // cog, WCI), rc)

    return compute(
        (N, CO, OH, OW),
        lambda nn, ff, yy, xx: te.sum(
            rd(padded, (nn, chan(ff), tap(yy, ry, sh, dh), tap(xx, rx, sw, dw)))
            * rd(weight, (ff, rc, ry, rx)),
            axis=[rc, ry, rx],
        ),
        "conv2d_nchw" if groups == 1 else "group_conv2d_nchw",
        ["nn", "ff", "yy", "xx"],
        tag="conv2d_nchw" if groups == 1 else "group_conv2d_nchw",
    )


def conv2d_nhwc(
    data: Tensor,
    weight: Tensor,
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    groups: int = 1,
    out_dtype: str = "",
    kernel_layout: str = "HWIO",
) -> Tensor:
    """NHWC conv2d: ``Conv2dOutput`` (HWIO or OHWI), ``group_conv2d_nhwc`` or ``DepthwiseConv2d``
    (HWOI weight ``(KH, KW, CI, multiplier)``) reading ``PaddedInput``. See :func:`conv2d`."""
    (sh, sw), (dh, dw), before, after = _params(strides, padding, dilation)
    N, H, W, CI = data.shape
    out_dtype = out_dtype or data.dtype
    padded = pad(data, (0,) + before + (0,), (0,) + after + (0,), 0.0, "PaddedInput", "i")

    def rd(t, idx):
        return cast_to(t[idx], out_dtype)

    if kernel_layout == "HWOI":
        KH, KW, WC, mult = weight.shape
        if groups != CI or WC != CI:
            raise TensorError(
                f"nn.conv2d (NHWC, HWOI): a depthwise conv needs groups == channels == weight "
                f"dim 2; got groups={groups}, {CI} channels, weight {list(weight.shape)}"
            )
        OH = conv_out_size(H, KH, sh, dh, before[0] + after[0])
        OW = conv_out_size(W, KW, sw, dw, before[1] + after[1])
        di = te.reduce_axis((0, KH), name="di")
        dj = te.reduce_axis((0, KW), name="dj")

        def widx(c):
            return (c, 0) if mult == 1 else (c // mult, c % mult)

        return compute(
            (N, OH, OW, CI * mult),
            lambda b, i, j, c: te.sum(
                rd(
                    padded,
                    (
                        b,
                        tap(i, di, sh, dh),
                        tap(j, dj, sw, dw),
                        c if mult == 1 else c // mult,
                    ),
                )
                * rd(weight, (di, dj) + widx(c)),
                axis=[di, dj],
            ),
            "DepthwiseConv2d",
            ["b", "i", "j", "c"],
            tag="depthwise_conv2d_nhwc",
        )
    if kernel_layout not in ("HWIO", "OHWI"):
        raise TensorError(
            f"nn.conv2d: kernel_layout {kernel_layout!r} is not supported for "
            "NHWC; use 'HWIO', 'OHWI' or 'HWOI'"
        )
    ohwi = kernel_layout == "OHWI"
    if ohwi:
        CO, KH, KW, WCI = weight.shape
    else:
        KH, KW, WCI, CO = weight.shape
    _check_groups(CI, CO, WCI, groups, "NHWC")
    OH = conv_out_size(H, KH, sh, dh, before[0] + after[0])
    OW = conv_out_size(W, KW, sw, dw, before[1] + after[1])
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    rc = te.reduce_axis((0, WCI), name="rc")
    cog = CO // groups

    def chan(ff):
        return rc if groups == 1 else add(mul(ff // cog, WCI), rc)

    return compute(
        (N, OH, OW, CO),
        lambda nn, yy, xx, ff: te.sum(
            rd(padded, (nn, tap(yy, ry, sh, dh), tap(xx, rx, sw, dw), chan(ff)))
            * rd(weight, (ff, ry, rx, rc) if ohwi else (ry, rx, rc, ff)),
            axis=[ry, rx, rc],
        ),
        "Conv2dOutput" if groups == 1 else "group_conv2d_nhwc",
        ["nn", "yy", "xx", "ff"],
        tag="conv2d_nhwc" if groups == 1 else "group_conv2d_nhwc",
    )
