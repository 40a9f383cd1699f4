"""Numpy implementations of every operator: the ground truth compiled networks are checked
against (through ``tensorir.graph.evaluate``).

They share nothing with the te computations of this package: convolutions are im2col via
``sliding_window_view`` plus one float32 BLAS matmul per group, pools reduce over the same
windows, winograd runs the real tile algorithm with its own transform matrices. Each op's entry
in the operator table (:mod:`tensorir.ops.registry`) names its implementation here,
``impl(attrs, out_shape, *arrays) -> array``, with the attributes already completed and the
output shape already inferred by the op's shape rule.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .winograd_reference import winograd_matrices

# --- layouts: every windowed op runs channels-last (N, *spatial, C) -----------------------------


def _to_channels_last(x, layout):
    perm = [layout.index("N")] + [layout.index(c) for c in layout if c not in "NC"]
    return x.transpose(perm + [layout.index("C")])


def _from_channels_last(x, layout):
    canonical = "N" + "".join(c for c in layout if c not in "NC") + "C"
    return x.transpose([canonical.index(c) for c in layout])


def _pad_spatial(x, pads, ndim, value):
    """Pad the spatial dims of a channels-last array; ``pads`` is (before..., after...)."""
    width = [(0, 0)] + [(pads[i], pads[i + ndim]) for i in range(ndim)] + [(0, 0)]
    if not any(b or e for b, e in width):
        return x
    return np.pad(x, width, constant_values=value)


def _windows(x, ksize, strides, dilation):
    """(N, *S, C) -> (N, *out, C, *ksize) views of every window."""
    ndim = len(ksize)
    spans = [(k - 1) * d + 1 for k, d in zip(ksize, dilation)]
    w = sliding_window_view(x, spans, axis=tuple(range(1, ndim + 1)))
    index = (slice(None),) + tuple(slice(None, None, s) for s in strides) + (slice(None),)
    index += tuple(slice(None, None, d) for d in dilation)
    return w[index]


# --- convolution ---------------------------------------------------------------------------


def int_exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b)``; integer operands whose sums provably fit in int32 (int8 data of
    quantized networks, widened to int32) go through float64 BLAS, which is exact below 2**53,
    instead of numpy's unvectorised integer loop (tens of times slower)."""
    if a.dtype.kind not in "iu" or b.dtype.kind not in "iu" or not a.size or not b.size:
        return np.matmul(a, b)

    def magnitude(x):  # in Python ints: np.abs of int8 -128 is -128
        return max(abs(int(x.min())), abs(int(x.max())))

    bound = magnitude(a) * magnitude(b) * a.shape[-1]
    if bound >= 2**31:
        return np.matmul(a, b)  # may wrap: keep numpy's integer semantics
    out = np.matmul(a.astype(np.float64), b.astype(np.float64))
    return out.astype(np.result_type(a.dtype, b.dtype))


def conv_nd(x, w, strides, padding, dilation, groups, data_layout, kernel_layout):
    """N-d grouped convolution (2-D or 3-D) in any of the supported layouts."""
    ndim = len(strides)
    spatial = [c for c in kernel_layout if c not in "OI"]
    xc = _pad_spatial(_to_channels_last(x, data_layout), padding, ndim, 0)
    wc = w.transpose([kernel_layout.index(c) for c in spatial + ["I", "O"]])  # (*K, I, O)
    ksize = wc.shape[:ndim]
    cin_g, cout = wc.shape[ndim], wc.shape[ndim + 1]
    cout_g = cout // groups
    win = _windows(xc, ksize, strides, dilation)  # (N, *out, C, *K)
    n, out_sp = win.shape[0], win.shape[1 : 1 + ndim]
    rows = n * int(np.prod(out_sp))
    win = win.reshape((n, *out_sp, groups, cin_g, *ksize))
    # (G, rows, I*K) @ (G, I*K, O/G): one matmul per group, a single GEMM when groups == 1.
    perm = [1 + ndim] + list(range(1 + ndim)) + list(range(2 + ndim, 3 + 2 * ndim))
    lhs = win.transpose(perm).reshape(groups, rows, cin_g * int(np.prod(ksize)))
    wg = wc.reshape((*ksize, cin_g, groups, cout_g))
    rhs = wg.transpose([ndim + 1, ndim] + list(range(ndim)) + [ndim + 2])
    rhs = rhs.reshape(groups, cin_g * int(np.prod(ksize)), cout_g)
    out = int_exact_matmul(lhs, rhs)  # (G, rows, O/G)
    out = out.transpose(1, 0, 2).reshape((n, *out_sp, cout))
    return _from_channels_last(out, data_layout)


def conv_ref(a, shape, x, w):
    return conv_nd(x, w, a["strides"], a["padding"], a["dilation"], a["groups"],
                   a["data_layout"], a["kernel_layout"])  # fmt: skip


def winograd_weight_transform(w, tile_size):
    """HWIO (3, 3, CI, CO) -> (alpha, alpha, CI, CO) = G g G^T per (ci, co)."""
    _, _, G = winograd_matrices(tile_size, 3)
    return np.einsum("ah,hwio,bw->abio", G, w.astype(np.float64), G).astype(w.dtype)


def winograd_conv(x, u, tile_size, padding):
    """NHWC 3x3 stride-1 convolution with a transformed weight, by the tile algorithm."""
    A, B, _ = winograd_matrices(tile_size, 3)
    m, alpha = tile_size, tile_size + 2
    n, h, wd, _ = x.shape
    oh = h + padding[0] + padding[2] - 2
    ow = wd + padding[1] + padding[3] - 2
    th, tw = -(-oh // m), -(-ow // m)
    # Pad so that every tile (stride m, size alpha) lies inside the array.
    extra_h = th * m + 2 - (h + padding[0] + padding[2])
    extra_w = tw * m + 2 - (wd + padding[1] + padding[3])
    xp = np.pad(x, [(0, 0), (padding[0], padding[2] + extra_h),
                    (padding[1], padding[3] + extra_w), (0, 0)])  # fmt: skip
    tiles = sliding_window_view(xp, (alpha, alpha), axis=(1, 2))[:, ::m, ::m]  # n th tw c a b
    v = np.einsum("ae,nhwcab,bf->efnhwc", B, tiles, B, optimize=True).astype(x.dtype)
    v = v.reshape(alpha * alpha, n * th * tw, -1)
    prod = np.matmul(v, u.reshape(alpha * alpha, u.shape[2], u.shape[3]))  # (aa, P, CO)
    prod = prod.reshape(alpha, alpha, n, th, tw, -1)
    y = np.einsum("ai,abnhwk,bj->nhiwjk", A, prod, A, optimize=True)  # (n, th, m, tw, m, co)
    y = y.reshape(n, th * m, tw * m, -1)
    return y[:, :oh, :ow].astype(x.dtype)


def winograd_conv_ref(a, shape, x, u):
    return winograd_conv(x, u, a["tile_size"], a["padding"])


# --- pooling -----------------------------------------------------------------------------


def pool_nd(x, kind, pool_size, strides, padding, dilation, layout, ceil_mode, include_pad):
    """Max or average pooling with topi's semantics (see nn.avg_pool2d)."""
    ndim = len(pool_size)
    xc = _to_channels_last(x, layout)
    sizes = xc.shape[1 : 1 + ndim]
    # ceil_mode can need cells past the explicit padding: pad those too, never count them.
    extra = []
    for j in range(ndim):
        span = (pool_size[j] - 1) * dilation[j] + 1
        total = sizes[j] + padding[j] + padding[j + ndim] - span
        out = (total + (strides[j] - 1 if ceil_mode else 0)) // strides[j] + 1
        extra.append(max(0, (out - 1) * strides[j] + span - (total + span)))
    pads = tuple(padding[:ndim]) + tuple(p + e for p, e in zip(padding[ndim:], extra))
    if kind == "max":
        fill = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
        win = _windows(_pad_spatial(xc, pads, ndim, fill), pool_size, strides, dilation)
        out = win.max(axis=tuple(range(-ndim, 0)))
    else:
        win = _windows(_pad_spatial(xc, pads, ndim, 0), pool_size, strides, dilation)
        total = win.sum(axis=tuple(range(-ndim, 0)), dtype=np.float64)
        mask = np.ones((1, *sizes, 1))
        if include_pad:
            mask = _pad_spatial(mask, padding, ndim, 1)
            mask = _pad_spatial(mask, (0,) * ndim + tuple(extra), ndim, 0)
        else:
            mask = _pad_spatial(mask, pads, ndim, 0)
        count = _windows(mask, pool_size, strides, dilation).sum(axis=tuple(range(-ndim, 0)))
        out = total / np.maximum(count, 1)
    return _from_channels_last(out.astype(x.dtype), layout)


def pool_ref(kind):
    def pool(a, shape, x):
        return pool_nd(x, kind, a["pool_size"], a["strides"], a["padding"], a["dilation"],
                       a["layout"], a["ceil_mode"], a.get("count_include_pad", False))  # fmt: skip

    return pool


def global_pool_ref(reduce):
    def impl(a, shape, x):
        layout = a["layout"]
        axes = (layout.index("H"), layout.index("W"))
        return reduce(x, axis=axes, keepdims=True)

    return impl


def adaptive_avg_pool2d(x, out_hw, layout):
    """TVM's adaptive windows: [floor(i*H/oh), ceil((i+1)*H/oh))."""
    hi, wi = layout.index("H"), layout.index("W")
    xc = np.moveaxis(x, (hi, wi), (-2, -1))
    h, w = xc.shape[-2:]
    oh, ow = out_hw
    out = np.empty(xc.shape[:-2] + (oh, ow), dtype=np.float64)
    for i in range(oh):
        h0, h1 = (i * h) // oh, -(-((i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            out[..., i, j] = xc[..., h0:h1, w0:w1].mean(axis=(-2, -1), dtype=np.float64)
    return np.moveaxis(out, (-2, -1), (hi, wi)).astype(x.dtype)


def adaptive_avg_pool2d_ref(a, shape, x):
    layout = a["layout"]
    out_hw = (shape[layout.index("H")], shape[layout.index("W")])
    return adaptive_avg_pool2d(x, out_hw, layout)


# --- the rest ------------------------------------------------------------------------------


def _along(v, axis, ndim):
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)


def batch_norm_ref(a, shape, x, gamma, beta, mean, var):
    ax = a["axis"] % x.ndim
    scale = 1.0 / np.sqrt(var.astype(np.float64) + a["epsilon"])
    if a["scale"]:
        scale = scale * gamma
    out = (x - _along(mean, ax, x.ndim)) * _along(scale.astype(x.dtype), ax, x.ndim)
    if a["center"]:
        out = out + _along(beta, ax, x.ndim)
    return out


def softmax_ref(a, shape, x):
    ax = a["axis"]
    e = np.exp(x - x.max(axis=ax, keepdims=True))
    return e / e.sum(axis=ax, keepdims=True)


def layout_transform_ref(a, shape, x):
    src, dst = a["src_layout"], a["dst_layout"]
    return x.transpose([src.index(c) for c in dst])


def winograd_weight_transform_ref(a, shape, w):
    return winograd_weight_transform(w, a["tile_size"])


def dense_ref(a, shape, x, w):
    return int_exact_matmul(x, w.T)


def batch_matmul_ref(a, shape, x, y):
    # transpose_b (Relay's default): y is (B, N, K); otherwise (B, K, N).
    return np.matmul(x, y.transpose(0, 2, 1) if a["transpose_b"] else y)


def bias_add_ref(a, shape, x, b):
    return x + _along(b, a["axis"] % x.ndim, x.ndim)


def unary_ref(f):
    """The implementation of a one-input, attribute-free op computed by ``f(x)``."""
    return lambda a, shape, x: f(x)


def binary_ref(f):
    """The implementation of a broadcasting two-input op computed by ``f(lhs, rhs)``."""
    return lambda a, shape, lhs, rhs: f(lhs, rhs)


def relu(x):
    return np.maximum(x, 0)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def clip_ref(a, shape, x):
    out = np.clip(x, a["a_min"], a["a_max"])
    if out.dtype.kind == "f":
        # Compiled clip is topi's max(min(x, hi), lo) with ordered compares, so NaN becomes
        # a_max; numpy would keep it (and a quantized network's int8 of NaN would differ).
        out = np.where(np.isnan(out), out.dtype.type(a["a_max"]), out)
    return out


def concatenate_ref(a, shape, *xs):
    return np.concatenate(xs, axis=a["axis"])


def pad_ref(a, shape, x):
    return np.pad(x, a["pad_width"], constant_values=a["pad_value"])


def reshape_ref(a, shape, x):
    """reshape, batch_flatten, squeeze: the shape rule already computed the new shape."""
    return x.reshape(shape)


def transpose_ref(a, shape, x):
    return x.transpose(a["axes"])


def cast_ref(a, shape, x):
    return x.astype(a["dtype"])


# --- ONNX import: reductions, logic, math (issue 26) ---


def erf(x):
    """erf in float64 (scipy's when installed, else math.erf element by element)."""
    from ..interp import _erf

    return _erf(x)


def where_ref(a, shape, cond, x, y):
    return np.where(cond.astype(bool), x, y)


def logical_ref(f):
    return lambda a, shape, lhs, rhs: f(lhs.astype(bool), rhs.astype(bool))


def reduce_ref(f):
    """sum / mean / max / min over the attributes' axes (float64 accumulation for sums)."""

    def impl(a, shape, x):
        nd = x.ndim
        axes = range(nd) if a["axis"] is None else [int(i) % nd for i in a["axis"]]
        axes = set(axes)
        if a["exclude"]:
            axes = set(range(nd)) - axes
        if not axes:
            return x.copy()
        kw = {"dtype": np.float64} if f in (np.sum, np.mean) and x.dtype.kind == "f" else {}
        return f(x, axis=tuple(sorted(axes)), keepdims=True, **kw).reshape(shape)

    return impl


def layer_norm_ref(a, shape, x, gamma, beta):
    ax = a["axis"] % x.ndim
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=ax, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=ax, keepdims=True)
    out = (x64 - mean) / np.sqrt(var + a["epsilon"])
    if a["scale"]:
        out = out * _along(gamma, ax, x.ndim)
    if a["center"]:
        out = out + _along(beta, ax, x.ndim)
    return out


def cumsum_ref(a, shape, x):
    ax = a["axis"] % x.ndim
    src = np.flip(x, ax) if a["reverse"] else x
    out = np.cumsum(src, axis=ax, dtype=np.float64 if x.dtype.kind == "f" else x.dtype)
    if a["exclusive"]:
        out = out - src
    return np.flip(out, ax) if a["reverse"] else out


def strided_slice_ref(a, shape, x):
    from .shape_rules import full_slice

    begin, end, step = full_slice(x.shape, a)
    return x[tuple(slice(b, e, s) for b, e, s in zip(begin, end, step))]


def broadcast_to_ref(a, shape, x):
    return np.broadcast_to(x, shape).copy()


def trilu_ref(a, shape, x):
    return (np.triu if a["upper"] else np.tril)(x, a["k"])
