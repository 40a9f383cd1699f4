"""Winograd 3x3 conv2d in NHWC, as topi's ``_conv2d_winograd_nhwc_impl`` (pre-computed weight).

``Y = A^T [(G g G^T) * (B^T d B)] A`` per output tile: the weight transform ``G g G^T`` is
done once (``winograd_weight_transform``, or its numpy twin when the graph layer folds
constants); the conv reads the transformed weight ``(alpha, alpha, CI, CO)`` (the layout of
docs/graph-ops.md; topi stores ``(alpha, alpha, CO, CI)``). The matrices A, B and G are
compute stages built from constants with nested selects, and ``data_pack`` / ``inverse`` carry
the ``auto_scheduler_simplify_const_tensor_indices`` attr, so the sketch rules unroll those
indices and the matrix entries fold into scalars.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .. import te
from ..dag import SIMPLIFY_CONST_TENSOR_INDICES
from ..tensor import Tensor, TensorError
from ._util import as_tuple, compute, mul, pad, spatial_padding

__all__ = [
    "conv2d_winograd_nhwc_without_weight_transform",
    "use_winograd",
    "winograd_matrices",
    "winograd_tile_size",
    "winograd_weight_transform",
    "winograd_weight_transform_np",
]

# Finite interpolation points by count (alpha - 1), as in topi's table.
_POINTS = {
    3: [0, -1, 1],
    4: [0, -1, 1, Fraction(1, 2)],
    5: [0, -1, 1, Fraction(1, 2), -2],
    6: [0, -1, 1, Fraction(1, 2), Fraction(-1, 2), 2],
}


def winograd_tile_size(height: int) -> int:
    """TVM's pick for the output tile: 4 when the height is a multiple of 8, else 2."""
    return 4 if height % 8 == 0 else 2


WINOGRAD_DEVICE_KINDS = ("cpu", "gpu")


def use_winograd(
    data_shape, weight_shape, strides, dilation, groups, layout, device_kind: str = "gpu"
) -> bool:
    """Whether TVM's auto-scheduler strategy would pick winograd for this conv2d.

    Both kinds need NHWC, a 3x3 HWIO kernel, stride 1, dilation 1 and no groups. On the CPU
    (``device_kind="cpu"``) TVM's x86 strategy also needs ``64 < CO < 512``, a rule from its
    profiling: with 64 output channels the transforms cost more than they save, and with 512
    the transformed weight (16/9 or 4x the direct one) streams from memory in every run.
    """
    if device_kind not in WINOGRAD_DEVICE_KINDS:
        raise ValueError(
            f"use_winograd: device_kind must be one of {WINOGRAD_DEVICE_KINDS}, got {device_kind!r}"
        )
    if layout != "NHWC" or int(groups) != 1 or len(weight_shape) != 4 or len(data_shape) != 4:
        return False
    kh, kw, ci, co = weight_shape
    if device_kind == "cpu" and not 64 < co < 512:
        return False
    return (
        (kh, kw) == (3, 3)
        and ci == data_shape[3]
        and as_tuple(strides, 2, "winograd", "strides") == (1, 1)
        and as_tuple(dilation, 2, "winograd", "dilation") == (1, 1)
    )


def _prod(values) -> Fraction:
    out = Fraction(1)
    for v in values:
        out *= v
    return out


def _poly_from_roots(roots) -> list[Fraction]:
    """Coefficients (lowest degree first) of prod (x - root)."""
    coef = [Fraction(1)]
    for rt in roots:
        nxt = [Fraction(0)] * (len(coef) + 1)
        for d, c in enumerate(coef):
            nxt[d + 1] += c
            nxt[d] -= rt * c
        coef = nxt
    return coef


def winograd_matrices(tile_size: int, kernel_size: int = 3):
    """The Cook-Toom matrices ``(A, B, G)`` of F(tile_size, kernel_size), as topi builds them.

    Shapes A ``(alpha, m)``, B ``(alpha, alpha)``, G ``(alpha, r)`` with
    ``alpha = m + r - 1``; computed exactly with fractions, returned as float64 arrays.
    """
    m, r = int(tile_size), int(kernel_size)
    alpha = m + r - 1
    pts = _POINTS.get(alpha - 1)
    if pts is None or r < 2 or m < 1:
        raise TensorError(f"winograd: tile_size {m} with kernel {r} is not supported; use 2 or 4")
    pts = [Fraction(p) for p in pts]
    n = alpha - 1  # finite points; the last row/column stands for the point at infinity

    def vandermonde(cols: int) -> list[list[Fraction]]:
        rows = [[pts[i] ** j for j in range(cols)] for i in range(n)]
        return rows + [[Fraction(int(j == cols - 1)) for j in range(cols)]]

    # f_i = prod_{k != i} (p_i - p_k), the Lagrange denominators; topi flips the sign of f_0.
    f = [_prod(pts[i] - pts[k] for k in range(n) if k != i) for i in range(n)]
    sign = [Fraction(-1) if (i == 0 and f[0] < 0) else Fraction(1) for i in range(n)]
    A = vandermonde(m)
    G = [[v / (f[i] * sign[i]) for v in row] for i, row in enumerate(vandermonde(r)[:n])]
    G.append(vandermonde(r)[n])
    B = [[Fraction(0)] * alpha for _ in range(alpha)]
    for i in range(n):
        lag = _poly_from_roots([pts[k] for k in range(n) if k != i])
        for d in range(n):
            B[d][i] = lag[d] * sign[i]
    full = _poly_from_roots(pts)
    for d in range(n):
        B[d][n] = full[d]
    B[n][n] = Fraction(1)
    return tuple(np.array(x, dtype=np.float64) for x in (A, B, G))


def _const_matrix(mat: np.ndarray, name: str, dtype: str) -> Tensor:
    """topi's const_matrix: nested selects on ``(i % rows, j % cols)``, (0, 0) innermost."""
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

    return compute(
        mat.shape, select_array, name, ["i", "j"], tag="const_matrix", attrs={"const_matrix": True}
    )


def _check_weight(weight_shape, op: str):
    if len(weight_shape) != 4 or tuple(weight_shape[:2]) != (3, 3):
        raise TensorError(
            f"{op}: the weight must be HWIO with a 3x3 kernel, got {list(weight_shape)}"
        )


def winograd_weight_transform(weight: Tensor, tile_size: int) -> Tensor:
    """``G g G^T`` for an HWIO 3x3 weight, as te: ``kernel_pack (alpha, alpha, CI, CO)``."""
    _check_weight(weight.shape, "nn.contrib_conv2d_winograd_weight_transform")
    _, _, G_np = winograd_matrices(tile_size, 3)
    alpha = G_np.shape[0]
    _, _, CI, CO = weight.shape
    G = _const_matrix(G_np, "G", weight.dtype)
    r_kh = te.reduce_axis((0, 3), name="r_kh")
    r_kw = te.reduce_axis((0, 3), name="r_kw")
    return compute(
        (alpha, alpha, CI, CO),
        lambda eps, nu, ci, co: te.sum(
            weight[r_kh, r_kw, ci, co] * G[eps, r_kh] * G[nu, r_kw], axis=[r_kh, r_kw]
        ),
        "kernel_pack",
        ["eps", "nu", "ci", "co"],
    )


def winograd_weight_transform_np(weight_hwio: np.ndarray, tile_size: int) -> np.ndarray:
    """numpy twin of :func:`winograd_weight_transform`: HWIO 3x3 -> ``(alpha, alpha, CI, CO)``."""
    _check_weight(weight_hwio.shape, "winograd_weight_transform_np")
    _, _, G = winograd_matrices(tile_size, 3)
    out = np.einsum("ea,nb,abio->enio", G, G, weight_hwio.astype(np.float64))
    return out.astype(weight_hwio.dtype)


def conv2d_winograd_nhwc_without_weight_transform(
    data: Tensor,
    transformed_weight: Tensor,
    tile_size: int,
    padding=(1, 1, 1, 1),
    strides=(1, 1),
    dilation=(1, 1),
    out_dtype: str = "",
) -> Tensor:
    """Relay's ``nn.contrib_conv2d_winograd_without_weight_transform`` in NHWC.

    Parameters
    ----------
    data : Tensor
        ``(N, H, W, CI)``.
    transformed_weight : Tensor
        ``(alpha, alpha, CI, CO)`` from :func:`winograd_weight_transform` (alpha = tile + 2).
    tile_size : int
        Output tile m: 2 (alpha 4) or 4 (alpha 6); see :func:`winograd_tile_size`.
    padding : int or tuple of int
        (top, left, bottom, right), or one / two values.
    strides, dilation : int or tuple of int
        Must be 1.

    Returns
    -------
    Tensor
        ``conv2d_winograd (N, OH, OW, CO)`` after the stages data_pad, input_tile, B,
        data_pack, bgemm, A, inverse.
    """
    op = "nn.contrib_conv2d_winograd_without_weight_transform"
    if as_tuple(strides, 2, op, "strides") != (1, 1) or as_tuple(dilation, 2, op, "dilation") != (
        1,
        1,
    ):
        raise TensorError(f"{op}: only strides (1, 1) and dilation (1, 1) are supported")
    if out_dtype not in ("", data.dtype):
        raise TensorError(f"{op}: out_dtype {out_dtype!r} differs from the data dtype {data.dtype}")
    m, r = int(tile_size), 3
    A_np, B_np, _ = winograd_matrices(m, r)
    alpha = m + r - 1
    N, H, W, CI = data.shape
    if transformed_weight.shape[:3] != (alpha, alpha, CI):
        raise TensorError(
            f"{op}: transformed weight {list(transformed_weight.shape)} must be "
            f"({alpha}, {alpha}, {CI}, CO) for tile_size {m}"
        )
    CO = transformed_weight.shape[3]
    (pt, pl), (pb, pr) = spatial_padding(padding, 2, op)
    OH, OW = H + pt + pb - r + 1, W + pl + pr - r + 1
    if min(OH, OW) < 1:
        raise TensorError(f"{op}: a 3x3 kernel does not fit the padded {H}x{W} input")
    nH, nW = (OH + m - 1) // m, (OW + m - 1) // m
    P = N * nH * nW
    # Pad so the last tile's alpha x alpha input window is in range (topi's pad_extra).
    extra_h = (nH - 1) * m + alpha - (H + pt + pb)
    extra_w = (nW - 1) * m + alpha - (W + pl + pr)
    data_pad = pad(data, (0, pt, pl, 0), (0, pb + extra_h, pr + extra_w, 0), 0.0, "data_pad", "i")
    input_tile = compute(
        (alpha, alpha, P, CI),
        lambda eps, nu, p, ci: data_pad[
            p // (nH * nW), mul((p // nW) % nH, m) + eps, mul(p % nW, m) + nu, ci
        ],
        "input_tile",
        ["eps", "nu", "p", "ci"],
    )
    B = _const_matrix(B_np, "B", data.dtype)
    r_a = te.reduce_axis((0, alpha), name="r_a")
    r_b = te.reduce_axis((0, alpha), name="r_b")
    data_pack = compute(
        (alpha, alpha, P, CI),
        lambda eps, nu, p, ci: te.sum(
            input_tile[r_a, r_b, p, ci] * B[r_a, eps] * B[r_b, nu], axis=[r_a, r_b]
        ),
        "data_pack",
        ["eps", "nu", "p", "ci"],
        attrs={SIMPLIFY_CONST_TENSOR_INDICES: ["eps", "nu", "r_a", "r_b"]},
    )
    ci = te.reduce_axis((0, CI), name="ci")
    bgemm = compute(
        (alpha, alpha, P, CO),
        lambda eps, nu, p, co: te.sum(
            data_pack[eps, nu, p, ci] * transformed_weight[eps, nu, ci, co], axis=[ci]
        ),
        "bgemm",
        ["eps", "nu", "p", "co"],
    )
    A = _const_matrix(A_np, "A", data.dtype)
    r_a2 = te.reduce_axis((0, alpha), name="r_a")
    r_b2 = te.reduce_axis((0, alpha), name="r_b")
    inverse = compute(
        (m, m, P, CO),
        lambda vh, vw, p, co: te.sum(
            bgemm[r_a2, r_b2, p, co] * A[r_a2, vh] * A[r_b2, vw], axis=[r_a2, r_b2]
        ),
        "inverse",
        ["vh", "vw", "p", "co"],
        attrs={SIMPLIFY_CONST_TENSOR_INDICES: ["vh", "vw", "r_a", "r_b"]},
    )
    return compute(
        (N, OH, OW, CO),
        lambda n, h, w, co: inverse[
            h % m, w % m, mul(mul(n, nH), nW) + mul(h // m, nW) + w // m, co
        ],
        "conv2d_winograd",
        ["n", "h", "w", "co"],
        tag="conv2d_winograd_nhwc",
    )
