"""Winograd transform matrices, the same ones topi's ``winograd_transform_matrices`` builds.

F(m, r) with alpha = m + r - 1 uses alpha - 1 finite interpolation points plus the point at
infinity (Cook-Toom). The finite points are TVM's table (Barabasz et al., "Error Analysis
and Improving the Accuracy of Winograd Convolution", arXiv:1803.10986), and the scaling of the
rows (which factor goes into G and which into B) follows topi, so a weight transformed here
equals the one a TVM-style te computation produces.

The transforms are: kernel ``U = G g G^T``, input ``V = B^T d B``, output ``Y = A^T M A``.
"""

from __future__ import annotations

from functools import cache

import numpy as np

# Interpolation points by alpha - 1 (the number of finite points), from TVM's table.
_POINTS = {
    3: (0.0, -1.0, 1.0),
    4: (0.0, -1.0, 1.0, 0.5),
    5: (0.0, -1.0, 1.0, 0.5, -2.0),
    6: (0.0, -1.0, 1.0, 0.5, -2.0, -0.5),
    7: (0.0, -1.0, 1.0, 0.5, -0.5, 2.0, -2.0),
}


@cache
def winograd_matrices(tile_size: int, kernel_size: int = 3) -> tuple[np.ndarray, ...]:
    """``(A, B, G)`` for F(tile_size, kernel_size), float64.

    Shapes: A (alpha, m), B (alpha, alpha), G (alpha, r).
    """
    m, r = tile_size, kernel_size
    alpha = m + r - 1
    if alpha - 1 not in _POINTS:
        raise ValueError(f"unsupported winograd tile: F({m}, {r})")
    a = np.array(_POINTS[alpha - 1])
    n = alpha - 1  # finite points
    # f_i = prod_{k != i} (a_i - a_k): the Lagrange denominators.
    f = np.array([np.prod([a[i] - a[k] for k in range(n) if k != i]) for i in range(n)])
    # topi makes the first scale positive (it flips row 0 of its diagonal F).
    scale = f.copy()
    if scale[0] < 0:
        scale[0] = -scale[0]

    def vandermonde(cols):
        # rows a_i^j for the finite points, then the point at infinity: picks the top power.
        out = np.zeros((alpha, cols))
        out[:n] = a[:, None] ** np.arange(cols)[None, :]
        out[n, cols - 1] = 1.0
        return out

    A = vandermonde(m)
    G = vandermonde(r)
    G[:n] /= scale[:, None]
    # B = [Fm^T T; e_n] diag(scale), Fm[i, j] = (x^j coefficient of the i-th Lagrange
    # numerator) / f_i, T = [I | -a^n] folds in the point at infinity.
    Fm = np.array([_lagrange_coefs(a, i) / f[i] for i in range(n)])  # (n, n)
    T = np.concatenate([np.eye(n), -(a[:, None] ** n)], axis=1)  # (n, n + 1)
    Bm = np.concatenate([Fm.T @ T, np.eye(alpha)[n : n + 1]], axis=0)
    B = Bm * np.append(scale, 1.0)[None, :]  # Bm @ diag(scale)^T
    return A, B, G


def _lagrange_coefs(a: np.ndarray, i: int) -> np.ndarray:
    """Coefficients (by increasing power) of prod_{k != i} (x - a_k)."""
    poly = np.poly1d([1.0])
    for k in range(len(a)):
        if k != i:
            poly = poly * np.poly1d([1.0, -a[k]])
    return poly.coef[::-1]
