"""Seed workloads: the operators of the tutorials, written with ``te`` as TVM's topi writes them.

Each function returns the tensor list for :class:`tensorir.ComputeDAG` (inputs first, then
outputs), so ``ComputeDAG(matmul(512, 512, 512))`` is a task. Stage and axis names follow TVM
(``T_dense``, ``PaddedInput``, ``Conv2dOutput``, ``T_add``, ``T_relu``...) so the printed DAGs
read like the seed printouts; placeholders get descriptive unique names (``data``, ``kernel``,
``bias``) because a DAG's op names must be unique here, where TVM calls them all
``placeholder``. Like TVM's arithmetic, trivial index terms (``x*1``, ``x + 0``) are not built.
"""

from __future__ import annotations

import numpy as np

from tensorir import te
from tensorir.ops import winograd as _ops_winograd

__all__ = [
    "conv2d_nchw",
    "conv2d_nhwc",
    "conv2d_nhwc_bias_relu",
    "dense_bias",
    "depthwise_conv2d_nhwc",
    "matmul",
    "matmul_relu",
    "max_pool_bias_relu",
    "softmax",
    "winograd_conv2d_nhwc_3x3",
    "winograd_kernel_pack",
    "winograd_matrices",
]

FLOAT32_LOWEST = -3.4028234663852886e38  # TVM's min_value("float32"): the pooling pad value


def _mul(x, c: int):
    return x if c == 1 else x * c


def _add(x, y):
    return x if isinstance(y, int) and y == 0 else x + y


def matmul(n: int, m: int, k: int, dtype: str = "float32"):
    """``C[i, j] = sum_k A[i, k] * B[k, j]`` with A ``[n, k]`` and B ``[k, m]``."""
    A = te.placeholder((n, k), dtype, name="A")
    B = te.placeholder((k, m), dtype, name="B")
    rk = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, rk] * B[rk, j], axis=rk), name="C")
    return [A, B, C]


def _relu(x, name: str = "T_relu"):
    zero = te.const(0, x.dtype)
    return te.compute(x.shape, lambda *ax: te.max(x[ax], zero), name=name, tag="elemwise")


def matmul_relu(n: int, m: int, k: int, dtype: str = "float32"):
    """``relu(A @ B)``: a matmul followed by an elementwise stage."""
    A, B, C = matmul(n, m, k, dtype)
    return [A, B, _relu(C)]


def dense_bias(batch: int, in_dim: int, out_dim: int, dtype: str = "float32"):
    """``T_add = data @ weight^T + bias`` as in Relay's dense + bias_add."""
    data = te.placeholder((batch, in_dim), dtype, name="data")
    weight = te.placeholder((out_dim, in_dim), dtype, name="weight")
    bias = te.placeholder((out_dim,), dtype, name="bias")
    k = te.reduce_axis((0, in_dim), name="k")
    dense = te.compute(
        (batch, out_dim),
        lambda i, j: te.sum(data[i, k] * weight[j, k], axis=k),
        name="T_dense",
        tag="dense",
    )
    out = te.compute(
        (batch, out_dim),
        lambda ax0, ax1: dense[ax0, ax1] + bias[ax1],
        name="T_add",
        tag="broadcast",
    )
    return [data, weight, bias, out]


def softmax(n: int, m: int, dtype: str = "float32"):
    """Softmax over the last axis in four stages, named as topi names them."""
    x = te.placeholder((n, m), dtype, name="placeholder")
    k1 = te.reduce_axis((0, m), name="k")
    maxelem = te.compute((n,), lambda i0: te.max(x[i0, k1], axis=k1), name="T_softmax_maxelem")
    ex = te.compute((n, m), lambda i0, i1: te.exp(x[i0, i1] - maxelem[i0]), name="T_softmax_exp")
    k2 = te.reduce_axis((0, m), name="k")
    expsum = te.compute((n,), lambda i0: te.sum(ex[i0, k2], axis=k2), name="T_softmax_expsum")
    norm = te.compute(
        (n, m),
        lambda i0, i1: ex[i0, i1] / expsum[i0],
        name="T_softmax_norm",
        attrs={"axis": 1},
    )
    return [x, norm]


def _pad(data, before, after, value, name: str, axis_names: str):
    """topi's pad (``tensorir.ops``' own, so the hand-written workloads print the same)."""
    from tensorir.ops._util import pad

    return pad(data, before, after, value, name=name, axis_names=axis_names)


def _bias_relu(out, bias):
    def add(ax0, ax1, ax2, ax3):
        # As topi's broadcast: bias's batch dimension (extent 1) is read at 0 unless the
        # output's batch is 1 too (then topi prints ax0); reading it at ax0 > 0 is out of range.
        n = ax0 if out.shape[0] == 1 else 0
        return out[ax0, ax1, ax2, ax3] + bias[n, 0, 0, ax3]

    t_add = te.compute(
        out.shape,
        add,
        name="T_add",
        tag="broadcast",
    )
    return _relu(t_add)


def conv2d_nhwc_bias_relu(
    N: int,
    H: int,
    W: int,
    CI: int,
    CO: int,
    KH: int = 3,
    KW: int = 3,
    stride: int = 1,
    pad: int = 1,
    dtype: str = "float32",
):
    """NHWC conv2d (kernel HWIO) + bias ``[1, 1, 1, CO]`` + relu, as Relay fuses it."""
    data = te.placeholder((N, H, W, CI), dtype, name="data")
    kernel = te.placeholder((KH, KW, CI, CO), dtype, name="kernel")
    bias = te.placeholder((1, 1, 1, CO), dtype, name="bias")
    conv = _conv2d_nhwc(data, kernel, stride, pad)
    return [data, kernel, bias, _bias_relu(conv, bias)]


def conv2d_nhwc(N: int, H: int, W: int, CI: int, CO: int, KH: int = 3, KW: int = 3,
                stride: int = 1, pad: int = 1, dtype: str = "float32"):  # fmt: skip
    """Plain NHWC conv2d (kernel HWIO), no bias or activation."""
    data = te.placeholder((N, H, W, CI), dtype, name="data")
    kernel = te.placeholder((KH, KW, CI, CO), dtype, name="kernel")
    return [data, kernel, _conv2d_nhwc(data, kernel, stride, pad)]


def _conv2d_nhwc(data, kernel, stride: int, pad: int):
    N, H, W, CI = data.shape
    KH, KW, _, CO = kernel.shape
    padded = _pad(data, (0, pad, pad, 0), (0, pad, pad, 0), 0.0, "PaddedInput", "i")
    OH = (H + 2 * pad - KH) // stride + 1
    OW = (W + 2 * pad - KW) // stride + 1
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    rc = te.reduce_axis((0, CI), name="rc")
    return te.compute(
        (N, OH, OW, CO),
        lambda nn, yy, xx, ff: te.sum(
            padded[nn, _mul(yy, stride) + ry, _mul(xx, stride) + rx, rc] * kernel[ry, rx, rc, ff],
            axis=[ry, rx, rc],
        ),
        name="Conv2dOutput",
        tag="conv2d_nhwc",
    )


def depthwise_conv2d_nhwc(
    N: int,
    H: int,
    W: int,
    C: int,
    KH: int = 3,
    KW: int = 3,
    stride: int = 1,
    pad: int = 1,
    dtype: str = "float32",
):
    """Depthwise NHWC conv2d with kernel ``[KH, KW, C, 1]`` (channel multiplier 1)."""
    data = te.placeholder((N, H, W, C), dtype, name="data")
    kernel = te.placeholder((KH, KW, C, 1), dtype, name="kernel")
    padded = _pad(data, (0, pad, pad, 0), (0, pad, pad, 0), 0.0, "PaddedInput", "i")
    OH = (H + 2 * pad - KH) // stride + 1
    OW = (W + 2 * pad - KW) // stride + 1
    di = te.reduce_axis((0, KH), name="di")
    dj = te.reduce_axis((0, KW), name="dj")
    out = te.compute(
        (N, OH, OW, C),
        lambda b, i, j, c: te.sum(
            padded[b, _mul(i, stride) + di, _mul(j, stride) + dj, c] * kernel[di, dj, c, 0],
            axis=[di, dj],
        ),
        name="DepthwiseConv2d",
        tag="depthwise_conv2d_nhwc",
    )
    return [data, kernel, out]


def max_pool_bias_relu(
    N: int,
    H: int,
    W: int,
    C: int,
    kernel: int = 3,
    stride: int = 2,
    pad: int = 1,
    dtype: str = "float32",
):
    """NHWC max-pool (pad value = lowest float) + bias ``[1, 1, 1, C]`` + relu."""
    data = te.placeholder((N, H, W, C), dtype, name="data")
    bias = te.placeholder((1, 1, 1, C), dtype, name="bias")
    padded = _pad(data, (0, pad, pad, 0), (0, pad, pad, 0), FLOAT32_LOWEST, "pad_temp", "ax")
    OH = (H + 2 * pad - kernel) // stride + 1
    OW = (W + 2 * pad - kernel) // stride + 1
    dh = te.reduce_axis((0, kernel), name="dh")
    dw = te.reduce_axis((0, kernel), name="dw")
    pool = te.compute(
        (N, OH, OW, C),
        lambda ax0, ax1, ax2, ax3: te.max(
            padded[ax0, _mul(ax1, stride) + dh, _mul(ax2, stride) + dw, ax3], axis=[dh, dw]
        ),
        name="tensor",
        tag="pool_max",
    )
    return [data, bias, _bias_relu(pool, bias)]


def conv2d_nchw(
    N: int,
    CI: int,
    H: int,
    W: int,
    CO: int,
    KH: int = 3,
    KW: int = 3,
    stride: int = 1,
    pad: int = 1,
    dtype: str = "float32",
):
    """Plain NCHW conv2d with kernel OIHW (no bias, no activation)."""
    data = te.placeholder((N, CI, H, W), dtype, name="data")
    kernel = te.placeholder((CO, CI, KH, KW), dtype, name="kernel")
    padded = _pad(data, (0, 0, pad, pad), (0, 0, pad, pad), 0.0, "pad_temp", "i")
    OH = (H + 2 * pad - KH) // stride + 1
    OW = (W + 2 * pad - KW) // stride + 1
    rc = te.reduce_axis((0, CI), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    out = te.compute(
        (N, CO, OH, OW),
        lambda nn, ff, yy, xx: te.sum(
            padded[nn, rc, _mul(yy, stride) + ry, _mul(xx, stride) + rx] * kernel[ff, rc, ry, rx],
            axis=[rc, ry, rx],
        ),
        name="conv2d_nchw",
        tag="conv2d_nchw",
    )
    return [data, kernel, out]


# ----------------------------------------------------------------------------- winograd

# The Cook-Toom matrices come from the operator library: one implementation of topi's table.
winograd_matrices = _ops_winograd.winograd_matrices


def winograd_kernel_pack(kernel_hwio: np.ndarray, tile_size: int = 2) -> np.ndarray:
    """Pre-transform an HWIO 3x3 kernel to ``[alpha, alpha, CO, CI]`` (the bgemm weight)."""
    _, _, G = winograd_matrices(tile_size, kernel_hwio.shape[0])
    k = kernel_hwio.astype(np.float64)
    packed = np.einsum("ea,nb,abio->enoi", G, G, k)
    return packed.astype(kernel_hwio.dtype)


def _const_matrix(mat: np.ndarray, name: str, dtype: str):
    """topi's const_matrix: a nest of selects on ``(i % rows, j % cols)``, (0, 0) innermost."""
    rows, cols = mat.shape

    def select_array(i, j):
        now = te.const(0.0, dtype)
        for ii in range(rows):
            for jj in range(cols):
                now = te.select(
                    te.all(te.equal(te.floormod(i, rows), ii), te.equal(te.floormod(j, cols), jj)),
                    te.const(float(mat[ii][jj]), dtype),
                    now,
                )
        return now

    return te.compute(mat.shape, select_array, name=name, attrs={"const_matrix": True})


def winograd_conv2d_nhwc_3x3(
    N: int,
    H: int,
    W: int,
    CI: int,
    CO: int,
    pad: int = 1,
    tile_size: int = 2,
    bias_relu: bool = True,
    pre_computed: bool = True,
    dtype: str = "float32",
):
    """Winograd NHWC conv2d, stride 1, 3x3 kernel, as topi's ``_conv2d_winograd_nhwc_impl``.

    With ``pre_computed`` (the seed form) the weight input is the transformed kernel
    ``[alpha, alpha, CO, CI]`` (see :func:`winograd_kernel_pack`); otherwise it is an HWIO
    kernel and a ``kernel_pack`` stage transforms it. ``bias_relu`` appends ``T_add`` (bias
    ``[1, 1, 1, CO]``) and ``T_relu``.
    """
    m, r = tile_size, 3
    alpha = m + r - 1
    A_np, B_np, G_np = winograd_matrices(m, r)
    data = te.placeholder((N, H, W, CI), dtype, name="data")
    if pre_computed:
        weight = te.placeholder((alpha, alpha, CO, CI), dtype, name="kernel_pack")
        kernel_pack = weight
    else:
        weight = te.placeholder((r, r, CI, CO), dtype, name="kernel")
        G = _const_matrix(G_np, "G", dtype)
        r_kh = te.reduce_axis((0, r), name="r_kh")
        r_kw = te.reduce_axis((0, r), name="r_kw")
        kernel_pack = te.compute(
            (alpha, alpha, CO, CI),
            lambda eps, nu, co, ci: te.sum(
                weight[r_kh, r_kw, ci, co] * G[eps, r_kh] * G[nu, r_kw], axis=[r_kh, r_kw]
            ),
            name="kernel_pack",
        )
    OH = H + 2 * pad - r + 1
    OW = W + 2 * pad - r + 1
    nH, nW = (OH + m - 1) // m, (OW + m - 1) // m
    P = N * nH * nW
    # topi computes one pad_extra from nW and H (square inputs); per dimension covers H != W.
    extra_h = max(0, (nH - 1) * m + alpha - (OH + 2 * pad))
    extra_w = max(0, (nW - 1) * m + alpha - (OW + 2 * pad))
    data_pad = _pad(
        data, (0, pad, pad, 0), (0, pad + extra_h, pad + extra_w, 0), 0.0, "data_pad", "i"
    )
    input_tile = te.compute(
        (alpha, alpha, P, CI),
        lambda eps, nu, p, ci: data_pad[
            p // (nH * nW), _mul((p // nW) % nH, m) + eps, _mul(p % nW, m) + nu, ci
        ],
        name="input_tile",
    )
    B = _const_matrix(B_np, "B", dtype)
    r_a = te.reduce_axis((0, alpha), name="r_a")
    r_b = te.reduce_axis((0, alpha), name="r_b")
    data_pack = te.compute(
        (alpha, alpha, P, CI),
        lambda eps, nu, p, ci: te.sum(
            input_tile[r_a, r_b, p, ci] * B[r_a, eps] * B[r_b, nu], axis=[r_a, r_b]
        ),
        name="data_pack",
        attrs={"auto_scheduler_simplify_const_tensor_indices": ["eps", "nu", "r_a", "r_b"]},
    )
    ci = te.reduce_axis((0, CI), name="ci")
    bgemm = te.compute(
        (alpha, alpha, P, CO),
        lambda eps, nu, p, co: te.sum(
            data_pack[eps, nu, p, ci] * kernel_pack[eps, nu, co, ci], axis=[ci]
        ),
        name="bgemm",
    )
    A = _const_matrix(A_np, "A", dtype)
    r_a2 = te.reduce_axis((0, alpha), name="r_a")
    r_b2 = te.reduce_axis((0, alpha), name="r_b")
    inverse = te.compute(
        (m, m, P, CO),
        lambda vh, vw, p, co: te.sum(
            bgemm[r_a2, r_b2, p, co] * A[r_a2, vh] * A[r_b2, vw], axis=[r_a2, r_b2]
        ),
        name="inverse",
        attrs={"auto_scheduler_simplify_const_tensor_indices": ["vh", "vw", "r_a", "r_b"]},
    )
    out = te.compute(
        (N, OH, OW, CO),
        lambda n, h, w, co: inverse[
            h % m, w % m, _mul(_mul(n, nH), nW) + _mul(h // m, nW) + w // m, co
        ],
        name="conv2d_winograd",
    )
    if not bias_relu:
        return [data, weight, out]
    bias = te.placeholder((1, 1, 1, CO), dtype, name="bias")
    return [data, weight, bias, _bias_relu(out, bias)]
