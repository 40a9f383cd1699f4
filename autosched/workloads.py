"""Seed workloads: the operators of the tutorials, built from the operator library.

Each function returns the tensor list for :class:`tensorir.ComputeDAG` (inputs first, then
outputs), so ``ComputeDAG(matmul(512, 512, 512))`` is a task. The operators come from
:mod:`tensorir.ops` (TVM's topi), so stage and axis names follow TVM (``T_dense``,
``PaddedInput``, ``Conv2dOutput``, ``T_add``, ``T_relu``...) and a seed DAG is the DAG a
network's fused group of the same ops makes. Placeholders get descriptive unique names
(``data``, ``kernel``, ``bias``) where TVM calls them all ``placeholder``. Only ``matmul`` is
written here with ``te``: it is the tutorials' own user-written compute, not a library op.
"""

from __future__ import annotations

import numpy as np

from tensorir import ops, te
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


def matmul(n: int, m: int, k: int, dtype: str = "float32"):
    """``C[i, j] = sum_k A[i, k] * B[k, j]`` with A ``[n, k]`` and B ``[k, m]``."""
    A = te.placeholder((n, k), dtype, name="A")
    B = te.placeholder((k, m), dtype, name="B")
    rk = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, rk] * B[rk, j], axis=rk), name="C")
    return [A, B, C]


def matmul_relu(n: int, m: int, k: int, dtype: str = "float32"):
    """``relu(A @ B)``: a matmul followed by an elementwise stage."""
    A, B, C = matmul(n, m, k, dtype)
    return [A, B, ops.relu(C)]


def dense_bias(batch: int, in_dim: int, out_dim: int, dtype: str = "float32"):
    """``T_add = data @ weight^T + bias`` as in Relay's dense + bias_add."""
    data = te.placeholder((batch, in_dim), dtype, name="data")
    weight = te.placeholder((out_dim, in_dim), dtype, name="weight")
    bias = te.placeholder((out_dim,), dtype, name="bias")
    return [data, weight, bias, ops.add(ops.dense(data, weight), bias)]


def softmax(n: int, m: int, dtype: str = "float32"):
    """Softmax over the last axis in four stages, named as topi names them."""
    x = te.placeholder((n, m), dtype, name="placeholder")
    return [x, ops.softmax(x)]


def _bias_relu(out, bias):
    return ops.relu(ops.add(out, bias))


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
    data, kernel, conv = conv2d_nhwc(N, H, W, CI, CO, KH, KW, stride, pad, dtype)
    bias = te.placeholder((1, 1, 1, CO), dtype, name="bias")
    return [data, kernel, bias, _bias_relu(conv, bias)]


def conv2d_nhwc(N: int, H: int, W: int, CI: int, CO: int, KH: int = 3, KW: int = 3,
                stride: int = 1, pad: int = 1, dtype: str = "float32"):  # fmt: skip
    """Plain NHWC conv2d (kernel HWIO), no bias or activation."""
    data = te.placeholder((N, H, W, CI), dtype, name="data")
    kernel = te.placeholder((KH, KW, CI, CO), dtype, name="kernel")
    return [data, kernel, ops.conv2d(data, kernel, stride, pad, data_layout="NHWC")]


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
    out = ops.conv2d(data, kernel, stride, pad, groups=C, data_layout="NHWC", kernel_layout="HWOI")
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
    pooled = ops.pool(data, "max", kernel, stride, pad, layout="NHWC")
    return [data, bias, _bias_relu(pooled, bias)]


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
    return [data, kernel, ops.conv2d(data, kernel, stride, pad)]


# ----------------------------------------------------------------------------- winograd

winograd_matrices = _ops_winograd.winograd_matrices


def winograd_kernel_pack(kernel_hwio: np.ndarray, tile_size: int = 2) -> np.ndarray:
    """Pre-transform an HWIO 3x3 kernel to ``[alpha, alpha, CI, CO]`` (the bgemm weight)."""
    return _ops_winograd.winograd_weight_transform_np(kernel_hwio, tile_size)


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
    ``[alpha, alpha, CI, CO]`` (see :func:`winograd_kernel_pack`), the layout of
    :func:`tensorir.ops.winograd_weight_transform`; otherwise it is an HWIO kernel and a
    ``kernel_pack`` stage transforms it. ``bias_relu`` appends ``T_add`` (bias
    ``[1, 1, 1, CO]``) and ``T_relu``.
    """
    alpha = tile_size + 2
    data = te.placeholder((N, H, W, CI), dtype, name="data")
    if pre_computed:
        weight = te.placeholder((alpha, alpha, CI, CO), dtype, name="kernel_pack")
        kernel_pack = weight
    else:
        weight = te.placeholder((3, 3, CI, CO), dtype, name="kernel")
        kernel_pack = ops.winograd_weight_transform(weight, tile_size)
    out = ops.conv2d_winograd_nhwc_without_weight_transform(data, kernel_pack, tile_size, pad)
    if not bias_relu:
        return [data, weight, out]
    bias = te.placeholder((1, 1, 1, CO), dtype, name="bias")
    return [data, weight, bias, _bias_relu(out, bias)]
