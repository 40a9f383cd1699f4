"""Constructors of the ``nn.*`` ops, like ``relay.nn``: ``nn.conv2d(data, weight, ...)``.

Each returns a ``Call`` with its attributes filled in and its type inferred (see
docs/graph-ops.md for the attribute meanings). Attribute defaults are Relay's.
"""

from __future__ import annotations

from .ir import Call, Expr, make_call


def _attrs(**kw):
    # Attributes left at None mean "the op's default"; passing them through would override it.
    return {k: v for k, v in kw.items() if v is not None}


def conv2d(
    data: Expr,
    weight: Expr,
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    groups: int = 1,
    channels: int | None = None,
    kernel_size=None,
    data_layout: str = "NCHW",
    kernel_layout: str = "",
    out_dtype: str = "",
) -> Call:
    """2-D convolution.

    Parameters
    ----------
    data, weight : Expr
        ``data`` in ``data_layout`` ("NCHW" or "NHWC"); ``weight`` in ``kernel_layout``.
    strides, dilation : int or (int, int)
    padding : int, (pad_h, pad_w) or (top, left, bottom, right)
    groups : int
        ``groups == channels == in_channels`` is depthwise.
    channels, kernel_size : optional
        Checked against the weight when given; filled from it otherwise.
    kernel_layout : str
        Default "OIHW" for NCHW and "HWIO" for NHWC (depthwise NHWC nets use "HWOI").
    out_dtype : str
        "" means the input dtype.
    """
    return make_call(
        "nn.conv2d",
        (data, weight),
        dict(
            strides=strides, padding=padding, dilation=dilation, groups=groups,
            channels=channels, kernel_size=kernel_size, data_layout=data_layout,
            kernel_layout=kernel_layout, out_dtype=out_dtype,
        ),
    )  # fmt: skip


def conv3d(
    data: Expr,
    weight: Expr,
    strides=(1, 1, 1),
    padding=(0, 0, 0, 0, 0, 0),
    dilation=(1, 1, 1),
    groups: int = 1,
    channels: int | None = None,
    kernel_size=None,
    data_layout: str = "NCDHW",
    kernel_layout: str = "",
    out_dtype: str = "",
) -> Call:
    """3-D convolution; like ``conv2d`` with a depth dim. Padding is an int, (d, h, w) or
    (front, top, left, back, bottom, right); kernel_layout defaults to "OIDHW" / "DHWIO"."""
    return make_call(
        "nn.conv3d",
        (data, weight),
        dict(
            strides=strides, padding=padding, dilation=dilation, groups=groups,
            channels=channels, kernel_size=kernel_size, data_layout=data_layout,
            kernel_layout=kernel_layout, out_dtype=out_dtype,
        ),
    )  # fmt: skip


def contrib_conv2d_winograd_weight_transform(weight: Expr, tile_size: int) -> Call:
    """The winograd kernel transform G g G^T of a 3x3 HWIO weight: (alpha, alpha, CI, CO),
    alpha = tile_size + 2."""
    return make_call(
        "nn.contrib_conv2d_winograd_weight_transform", (weight,), {"tile_size": tile_size}
    )


def contrib_conv2d_winograd_without_weight_transform(
    data: Expr,
    weight: Expr,
    tile_size: int,
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    channels: int | None = None,
    kernel_size=(3, 3),
    data_layout: str = "NHWC",
    out_dtype: str = "",
) -> Call:
    """3x3 stride-1 NHWC convolution with an already transformed weight (alpha, alpha, CI, CO)."""
    return make_call(
        "nn.contrib_conv2d_winograd_without_weight_transform",
        (data, weight),
        dict(
            tile_size=tile_size, strides=strides, padding=padding, dilation=dilation,
            channels=channels, kernel_size=kernel_size, data_layout=data_layout,
            out_dtype=out_dtype,
        ),
    )  # fmt: skip


def dense(data: Expr, weight: Expr, units: int | None = None, out_dtype: str = "") -> Call:
    """``data (N, K) x weight (units, K)^T -> (N, units)``."""
    return make_call("nn.dense", (data, weight), {"units": units, "out_dtype": out_dtype})


def batch_matmul(x: Expr, y: Expr, out_dtype: str = "") -> Call:
    """``x (B, M, K) x y (B, N, K)^T -> (B, M, N)`` (a batch of 1 broadcasts)."""
    return make_call("nn.batch_matmul", (x, y), {"out_dtype": out_dtype})


def bias_add(data: Expr, bias: Expr, axis: int = 1) -> Call:
    """Add a (C,) bias along ``axis``."""
    return make_call("nn.bias_add", (data, bias), {"axis": axis})


def batch_norm(
    data: Expr,
    gamma: Expr,
    beta: Expr,
    moving_mean: Expr,
    moving_var: Expr,
    axis: int = 1,
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
) -> Call:
    """Inference batch norm along ``axis``. Unlike Relay's it has one output (no ``[0]``)."""
    return make_call(
        "nn.batch_norm",
        (data, gamma, beta, moving_mean, moving_var),
        {"axis": axis, "epsilon": epsilon, "center": center, "scale": scale},
    )


def relu(data: Expr) -> Call:
    """max(x, 0)."""
    return make_call("nn.relu", (data,))


def _pool(op, data, pool_size, strides, padding, dilation, layout, ceil_mode, **extra):
    attrs = dict(pool_size=pool_size, strides=strides, padding=padding, dilation=dilation,
                 layout=layout, ceil_mode=ceil_mode, **extra)  # fmt: skip
    return make_call(op, (data,), attrs)


def max_pool2d(data, pool_size=(1, 1), strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
               layout="NCHW", ceil_mode=False) -> Call:  # fmt: skip
    """2-D max pooling (padding as in ``conv2d``; padded cells never win)."""
    return _pool("nn.max_pool2d", data, pool_size, strides, padding, dilation, layout, ceil_mode)


def avg_pool2d(data, pool_size=(1, 1), strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
               layout="NCHW", ceil_mode=False, count_include_pad=False) -> Call:  # fmt: skip
    """2-D average pooling; ``count_include_pad`` counts the explicit padding (never the
    extra cells ``ceil_mode`` adds) in the divisor, as topi does."""
    return _pool("nn.avg_pool2d", data, pool_size, strides, padding, dilation, layout, ceil_mode,
                 count_include_pad=count_include_pad)  # fmt: skip


def max_pool3d(data, pool_size=(1, 1, 1), strides=(1, 1, 1), padding=(0,) * 6, dilation=(1, 1, 1),
               layout="NCDHW", ceil_mode=False) -> Call:  # fmt: skip
    """3-D max pooling."""
    return _pool("nn.max_pool3d", data, pool_size, strides, padding, dilation, layout, ceil_mode)


def avg_pool3d(data, pool_size=(1, 1, 1), strides=(1, 1, 1), padding=(0,) * 6, dilation=(1, 1, 1),
               layout="NCDHW", ceil_mode=False, count_include_pad=False) -> Call:  # fmt: skip
    """3-D average pooling."""
    return _pool("nn.avg_pool3d", data, pool_size, strides, padding, dilation, layout, ceil_mode,
                 count_include_pad=count_include_pad)  # fmt: skip


def global_avg_pool2d(data: Expr, layout: str = "NCHW") -> Call:
    """Mean over H and W (kept as size-1 dims)."""
    return make_call("nn.global_avg_pool2d", (data,), {"layout": layout})


def global_max_pool2d(data: Expr, layout: str = "NCHW") -> Call:
    """Max over H and W (kept as size-1 dims)."""
    return make_call("nn.global_max_pool2d", (data,), {"layout": layout})


def adaptive_avg_pool2d(data: Expr, output_size=None, layout: str = "NCHW") -> Call:
    """Average pooling to a fixed ``output_size`` (h, w); window i spans
    [floor(i*H/oh), ceil((i+1)*H/oh))."""
    return make_call(
        "nn.adaptive_avg_pool2d", (data,), _attrs(output_size=output_size, layout=layout)
    )


def softmax(data: Expr, axis: int = -1) -> Call:
    """exp(x - max) / sum(exp(x - max)) along ``axis``."""
    return make_call("nn.softmax", (data,), {"axis": axis})


def pad(data: Expr, pad_width, pad_value: float = 0.0) -> Call:
    """Constant padding; ``pad_width`` is one (before, after) pair per dim."""
    return make_call("nn.pad", (data,), {"pad_width": pad_width, "pad_value": pad_value})


def batch_flatten(data: Expr) -> Call:
    """(N, ...) -> (N, prod(...))."""
    return make_call("nn.batch_flatten", (data,))


def layer_norm(data: Expr, gamma: Expr, beta: Expr, axis: int = -1, epsilon: float = 1e-5,
               center: bool = True, scale: bool = True) -> Call:  # fmt: skip
    """``(x - mean) / sqrt(var + epsilon) * gamma + beta`` over ``axis``; gamma and beta are
    (C,)."""
    return make_call(
        "nn.layer_norm",
        (data, gamma, beta),
        {"axis": axis, "epsilon": float(epsilon), "center": center, "scale": scale},
    )


# --- issue 26: ops of modern ONNX exports ----------------------------------------------------


def conv2d_transpose(
    data: Expr,
    weight: Expr,
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    output_padding=(0, 0),
    dilation=(1, 1),
    groups: int = 1,
    channels: int | None = None,
    kernel_size=None,
    data_layout: str = "NCHW",
    kernel_layout: str = "",
    out_dtype: str = "",
) -> Call:
    """Transposed 2-D convolution (ONNX's ConvTranspose).

    ``weight`` is IOHW ``(CI, CO/groups, KH, KW)`` for NCHW data (ONNX's layout) and HWIO
    ``(KH, KW, CI, CO/groups)`` for NHWC. ``padding`` (top, left, bottom, right) crops the full
    output; ``output_padding`` adds rows / columns at the bottom / right. Output size per dim:
    ``stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - pad_before - pad_after``.
    """
    return make_call(
        "nn.conv2d_transpose",
        (data, weight),
        dict(
            strides=strides, padding=padding, output_padding=output_padding, dilation=dilation,
            groups=groups, channels=channels, kernel_size=kernel_size, data_layout=data_layout,
            kernel_layout=kernel_layout, out_dtype=out_dtype,
        ),
    )  # fmt: skip


def group_norm(data: Expr, gamma: Expr, beta: Expr, num_groups: int, axis: int = 1,
               epsilon: float = 1e-5, center: bool = True, scale: bool = True) -> Call:  # fmt: skip
    """Normalize each sample over each group of ``num_groups`` channel groups (channels on
    ``axis``) and every other non-batch dim; ``gamma``/``beta`` are (C,)."""
    attrs = dict(num_groups=num_groups, axis=axis, epsilon=epsilon, center=center, scale=scale)
    return make_call("nn.group_norm", (data, gamma, beta), attrs)


def instance_norm(data: Expr, gamma: Expr, beta: Expr, axis: int = 1, epsilon: float = 1e-5,
                  center: bool = True, scale: bool = True) -> Call:  # fmt: skip
    """``group_norm`` with one channel per group."""
    attrs = dict(axis=axis, epsilon=epsilon, center=center, scale=scale)
    return make_call("nn.instance_norm", (data, gamma, beta), attrs)
