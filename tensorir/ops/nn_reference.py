"""Numpy implementations of conv2d_transpose, group / instance norm and image.resize2d
(issue 26's ops), written independently of their te computes: the transposed
convolution scatters each input pixel through the kernel, the resize computes its source
coordinates in float64 from ONNX's formulas, the norms reduce in float64. Same contract as
:mod:`tensorir.ops.reference`."""

from __future__ import annotations

import numpy as np

__all__ = [
    "conv2d_transpose_ref", "group_norm_ref", "instance_norm_ref", "resize2d_ref",
]  # fmt: skip


def conv2d_transpose_ref(a, shape, x, w):
    """out[n, o, i*s + k*d - pad] += x[n, c, i] * w[c, o, k], per group, then crop."""
    dl, kl, g = a["data_layout"], a["kernel_layout"], a["groups"]
    x = x.transpose([dl.index(c) for c in "NCHW"]).astype(np.float64)
    w = w.transpose([kl.index(c) for c in "IOHW"]).astype(np.float64)
    n, ci, h, wd = x.shape
    _, cog, kh, kw = w.shape
    (sh, sw), (dh, dw), (oph, opw) = a["strides"], a["dilation"], a["output_padding"]
    top, left, bottom, right = a["padding"]
    full_h = (h - 1) * sh + (kh - 1) * dh + 1 + oph
    full_w = (wd - 1) * sw + (kw - 1) * dw + 1 + opw
    full = np.zeros((n, g * cog, full_h, full_w))
    cig = ci // g
    for grp in range(g):
        xs = x[:, grp * cig : (grp + 1) * cig]
        ws = w[grp * cig : (grp + 1) * cig]
        for ky in range(kh):
            for kx in range(kw):
                contrib = np.einsum("nchw,co->nohw", xs, ws[:, :, ky, kx])
                rows = slice(ky * dh, ky * dh + (h - 1) * sh + 1, sh)
                cols = slice(kx * dw, kx * dw + (wd - 1) * sw + 1, sw)
                full[:, grp * cog : (grp + 1) * cog, rows, cols] += contrib
    out = full[:, :, top : full_h - bottom, left : full_w - right]
    return out.transpose(["NCHW".index(c) for c in dl])


def _group_norm(x, gamma, beta, groups, axis, eps, center, scale):
    ax = axis % x.ndim
    xc = np.moveaxis(x.astype(np.float64), ax, 1)
    n, c = xc.shape[:2]
    grouped = xc.reshape(n, groups, -1)
    mean = grouped.mean(axis=2, keepdims=True)
    var = ((grouped - mean) ** 2).mean(axis=2, keepdims=True)
    out = ((grouped - mean) / np.sqrt(var + eps)).reshape(xc.shape)
    bshape = (1, c) + (1,) * (x.ndim - 2)
    if scale:
        out = out * gamma.reshape(bshape)
    if center:
        out = out + beta.reshape(bshape)
    return np.moveaxis(out, 1, ax)


def group_norm_ref(a, shape, x, gamma, beta):
    return _group_norm(x, gamma, beta, a["num_groups"], a["axis"], a["epsilon"], a["center"],
                       a["scale"])  # fmt: skip


def instance_norm_ref(a, shape, x, gamma, beta):
    c = x.shape[a["axis"] % x.ndim]
    return _group_norm(x, gamma, beta, c, a["axis"], a["epsilon"], a["center"], a["scale"])


def _coordinates(mode, out_size, in_size, scale):
    o = np.arange(out_size, dtype=np.float64)
    s = out_size / in_size if scale is None else float(scale)
    if mode == "asymmetric":
        return o / s
    if mode == "tf_half_pixel_for_nn":
        return (o + 0.5) / s
    if mode == "half_pixel" or (mode == "pytorch_half_pixel" and out_size > 1):
        return (o + 0.5) / s - 0.5
    if mode == "pytorch_half_pixel" or out_size == 1:
        return np.zeros_like(o)
    return o * (in_size - 1) / (out_size - 1)  # align_corners


_ROUND = {
    "floor": np.floor,
    "ceil": np.ceil,
    "round_prefer_floor": lambda x: np.ceil(x - 0.5),
    "round_prefer_ceil": lambda x: np.floor(x + 0.5),
    "": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
    "round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
}


def _axis_matrix(a, out_size, in_size, scale):
    """The (out, in) interpolation matrix of one dim: resizing is separable."""
    x = _coordinates(a["coordinate_transformation_mode"], out_size, in_size, scale)
    m = np.zeros((out_size, in_size))
    rows = np.arange(out_size)
    if a["method"] == "nearest_neighbor":
        idx = np.clip(_ROUND[a["rounding_method"]](x).astype(np.int64), 0, in_size - 1)
        m[rows, idx] = 1.0
        return m
    if a["method"] == "linear":
        x = np.clip(x, 0, in_size - 1)
        lo = np.floor(x).astype(np.int64)
        t = x - lo
        np.add.at(m, (rows, lo), 1 - t)
        np.add.at(m, (rows, np.minimum(lo + 1, in_size - 1)), t)
        return m
    A = a["cubic_alpha"]  # cubic: Keys' kernel over taps -1..2, edge indices clamped
    lo = np.floor(x).astype(np.int64)
    t = x - lo
    for k in (-1, 0, 1, 2):
        d = np.abs(t - k)
        wk = np.where(d <= 1, ((A + 2) * d - (A + 3)) * d * d + 1,
                      ((A * d - 5 * A) * d + 8 * A) * d - 4 * A)  # fmt: skip
        np.add.at(m, (rows, np.clip(lo + k, 0, in_size - 1)), wk)
    return m


def resize2d_ref(a, shape, x):
    layout = a["layout"]
    hi, wi = layout.index("H"), layout.index("W")
    scales = a["scales"] or (None, None)
    mh = _axis_matrix(a, shape[hi], x.shape[hi], scales[0])
    mw = _axis_matrix(a, shape[wi], x.shape[wi], scales[1])
    xc = np.moveaxis(x.astype(np.float64), (hi, wi), (-2, -1))
    out = np.einsum("oh,...hw,pw->...op", mh, xc, mw)
    return np.moveaxis(out, (-2, -1), (hi, wi))
