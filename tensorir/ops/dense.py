"""Dense, matmul and batch_matmul (``T_dense``, ``T_matmul``, ``T_batch_matmul``)."""

from __future__ import annotations

from .. import te
from ..tensor import Tensor, TensorError
from ._util import cast_to, compute

__all__ = ["batch_matmul", "dense", "matmul"]


def dense(data: Tensor, weight: Tensor, units: int | None = None, out_dtype: str = "") -> Tensor:
    """Relay's ``nn.dense``: ``T_dense[i, j] = sum_k data[i, k] * weight[j, k]``.

    Parameters
    ----------
    data : Tensor
        ``(N, K)``.
    weight : Tensor
        ``(M, K)`` (rows are output units, as Relay stores it).
    units : int, optional
        Checked against ``M`` when given.
    out_dtype : str
        Accumulation/output dtype; empty means the input dtype.
    """
    if data.ndim != 2 or weight.ndim != 2 or data.shape[1] != weight.shape[1]:
        raise TensorError(
            f"nn.dense: data {list(data.shape)} and weight {list(weight.shape)} "
            "must be (N, K) and (M, K)"
        )
    if units is not None and int(units) != weight.shape[0]:
        raise TensorError(
            f"nn.dense: attribute 'units' = {units} but the weight has {weight.shape[0]} rows"
        )
    out_dtype = out_dtype or data.dtype
    k = te.reduce_axis((0, data.shape[1]), name="k")
    return compute(
        (data.shape[0], weight.shape[0]),
        lambda i, j: te.sum(
            cast_to(data[i, k], out_dtype) * cast_to(weight[j, k], out_dtype), axis=k
        ),
        "T_dense",
        ["i", "j"],
        tag="dense",
    )


def matmul(
    a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False, out_dtype: str = ""
) -> Tensor:
    """``T_matmul = op(a) @ op(b)`` where op transposes when asked (2-D operands)."""
    if a.ndim != 2 or b.ndim != 2:
        raise TensorError(
            f"nn.matmul: operands must be 2-D, got {list(a.shape)} and {list(b.shape)}"
        )
    n, ka = (a.shape[1], a.shape[0]) if transpose_a else a.shape
    kb, m = (b.shape[1], b.shape[0]) if transpose_b else b.shape
    if ka != kb:
        raise TensorError(f"nn.matmul: reduction sizes differ ({ka} vs {kb})")
    out_dtype = out_dtype or a.dtype
    k = te.reduce_axis((0, ka), name="k")

    def f(i, j):
        x = a[k, i] if transpose_a else a[i, k]
        y = b[j, k] if transpose_b else b[k, j]
        return te.sum(cast_to(x, out_dtype) * cast_to(y, out_dtype), axis=k)

    return compute((n, m), f, "T_matmul", ["i", "j"], tag="matmul")


def batch_matmul(x: Tensor, y: Tensor, out_dtype: str = "", transpose_b: bool = True) -> Tensor:
    """Relay's ``nn.batch_matmul``: ``T_batch_matmul[b, i, j] = sum_k x[b, i, k] * y[b, j, k]``.

    A batch of 1 in either operand broadcasts (as topi). ``transpose_b=False`` reads
    ``y[b, k, j]`` instead.
    """
    if x.ndim != 3 or y.ndim != 3:
        raise TensorError(
            f"nn.batch_matmul: operands must be 3-D, got {list(x.shape)}, {list(y.shape)}"
        )
    bx, m, k1 = x.shape
    by = y.shape[0]
    n, k2 = (y.shape[1], y.shape[2]) if transpose_b else (y.shape[2], y.shape[1])
    if k1 != k2 or (bx != by and 1 not in (bx, by)):
        raise TensorError(
            f"nn.batch_matmul: shapes {list(x.shape)} and {list(y.shape)} do not "
            "match (x (B, M, K), y (B, N, K))"
        )
    out_dtype = out_dtype or x.dtype
    k = te.reduce_axis((0, k1), name="k")

    def f(b, i, j):
        xb = 0 if bx == 1 and by != 1 else b
        yb = 0 if by == 1 and bx != 1 else b
        yv = y[yb, j, k] if transpose_b else y[yb, k, j]
        return te.sum(cast_to(x[xb, i, k], out_dtype) * cast_to(yv, out_dtype), axis=k)

    return compute((max(bx, by), m, n), f, "T_batch_matmul", ["b", "i", "j"], tag="batch_matmul")
