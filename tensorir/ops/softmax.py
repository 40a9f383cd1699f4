"""Softmax along any axis in topi's four stages (``T_softmax_maxelem`` ... ``T_softmax_norm``)."""

from __future__ import annotations

from .. import te
from ..tensor import Tensor, TensorError
from ._util import compute

__all__ = ["softmax"]


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``.

    Four stages as topi: the max and the sum reduce over ``k`` into tensors without the
    axis (axes ``i0, i1, ...``); ``T_softmax_norm`` carries ``attrs["axis"]``.
    """
    nd = x.ndim
    if not -nd <= axis < nd:
        raise TensorError(f"nn.softmax: attribute 'axis' = {axis} is out of range for {nd} dims")
    ax = axis % nd
    red_shape = tuple(s for d, s in enumerate(x.shape) if d != ax)
    if not red_shape:  # softmax of a 1-D tensor: keep a size-1 dim for the reductions
        red_shape = (1,)

    def full(idx, kvar):
        rest = list(idx) if nd > 1 else []
        return tuple(rest[:ax]) + (kvar,) + tuple(rest[ax:])

    def drop(idx):
        return tuple(i for d, i in enumerate(idx) if d != ax) if nd > 1 else (0,)

    k1 = te.reduce_axis((0, x.shape[ax]), name="k")
    maxelem = compute(
        red_shape, lambda *i: te.max(x[full(i, k1)], axis=k1), "T_softmax_maxelem", "i"
    )
    ex = compute(x.shape, lambda *i: te.exp(x[i] - maxelem[drop(i)]), "T_softmax_exp", "i")
    k2 = te.reduce_axis((0, x.shape[ax]), name="k")
    expsum = compute(
        red_shape, lambda *i: te.sum(ex[full(i, k2)], axis=k2), "T_softmax_expsum", "i"
    )
    return compute(
        x.shape, lambda *i: ex[i] / expsum[drop(i)], "T_softmax_norm", "i", attrs={"axis": ax}
    )
