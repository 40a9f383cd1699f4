"""Group normalization (Relay's ``nn.group_norm``; ``nn.instance_norm`` is its one-channel-per-
group case): per sample and channel group, ``(x - mean) / sqrt(var + eps) * gamma + beta``,
with the statistics reduced over the group's channels and every dim but the batch (dim 0)."""

from __future__ import annotations

import math

from .. import te
from ..tensor import Tensor, TensorError
from ._util import add, compute, mul

__all__ = ["group_norm"]


def group_norm(
    data: Tensor,
    gamma: Tensor,
    beta: Tensor,
    num_groups: int,
    axis: int = 1,
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
    op: str = "nn.group_norm",
) -> Tensor:
    """Three stages: ``T_group_norm_sum`` (N, G) and ``T_group_norm_sqsum`` (N, G), the sums of
    x and of (x - mean)^2 (two passes, as numerically careful as the numpy reference), then
    the element-wise ``T_group_norm``. The channel axis may be any but 0, so NCHW and NHWC
    tensors both work. ``gamma`` and ``beta`` are (C,)."""
    nd = data.ndim
    if nd < 2 or not -nd <= axis < nd or axis % nd == 0:
        raise TensorError(f"{op}: attribute 'axis' = {axis} must name a non-batch dim of {nd}")
    ax = axis % nd
    C = data.shape[ax]
    G = int(num_groups)
    if G < 1 or C % G:
        raise TensorError(f"{op}: num_groups={G} does not divide the {C} channels")
    cg = C // G
    rest = [k for k in range(1, nd) if k != ax]
    count = cg * math.prod(data.shape[k] for k in rest)
    inv = 1.0 / count
    N = data.shape[0]

    def reads(n, g, rc, rs):
        idx = [n] + [None] * (nd - 1)
        idx[ax] = add(mul(g, cg), rc) if cg > 1 else g
        for k, r in zip(rest, rs):
            idx[k] = r
        return tuple(idx)

    def axes(tag):
        rc = te.reduce_axis((0, cg), name=f"rc{tag}")
        rs = [te.reduce_axis((0, data.shape[k]), name=f"r{tag}{j}") for j, k in enumerate(rest)]
        return rc, rs

    rc1, rs1 = axes("")
    total = compute(
        (N, G),
        lambda n, g: te.sum(data[reads(n, g, rc1, rs1)], axis=[rc1] + rs1),
        "T_group_norm_sum",
        ["n", "g"],
    )
    rc2, rs2 = axes("_")

    def sq(n, g):
        dev = data[reads(n, g, rc2, rs2)] - total[n, g] * inv
        return te.sum(dev * dev, axis=[rc2] + rs2)

    sqsum = compute((N, G), sq, "T_group_norm_sqsum", ["n", "g"])

    def norm(*i):
        c = i[ax]
        g = c // cg if cg > 1 else c
        out = (data[i] - total[i[0], g] * inv) / te.sqrt(sqsum[i[0], g] * inv + epsilon)
        if scale:
            out = out * gamma[c]
        if center:
            out = out + beta[c]
        return out

    return compute(data.shape, norm, "T_group_norm", "ax", attrs={"axis": ax})
