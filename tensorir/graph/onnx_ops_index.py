"""ONNX converters of the indexing ops: Gather (embedding lookups on ``input_ids``, ``x[:, -1]``
and the shape arithmetic on ``Shape``), GatherElements, and Einsum as attention code writes it
(mapped onto ``nn.batch_matmul`` / ``nn.dense`` with transposes and reshapes).

Registered in ``onnx_ops.CONVERTERS`` on import (``onnx_frontend`` imports this module).
Indices computed by the graph become ``take`` / ``gather`` calls whose loads are checked at
run time (tensorir.ops.indexing); indices known at import are checked here.
"""

from __future__ import annotations

import math
import string

import numpy as np

from . import nn, op
from .ir import Constant, Expr
from .onnx_ops import Node, _register


def _static_indices(node: Node, indices: np.ndarray, n: int, axis: int) -> np.ndarray:
    """Indices known at import, negatives counted from the end, range checked now."""
    k = indices.astype(np.int64)
    bad = (k < -n) | (k >= n)
    if bad.any():
        node.fail(
            f"index {int(k[bad].reshape(-1)[0])} is out of range for axis {axis} of size {n} "
            f"(valid: {-n}..{n - 1})"
        )
    return np.where(k < 0, k + n, k)


def _axis(node: Node, ndim: int) -> int:
    axis = int(node.attr("axis", 0))
    if not -ndim <= axis < ndim:
        node.fail(f"axis={axis} is out of range for a {ndim}-D input")
    return axis % ndim


def _indices_expr(node: Node, n: int, axis: int) -> Expr:
    v = node.value(1)
    if v.static is not None:
        return Constant(_static_indices(node, v.static, n, axis))
    if v.dtype not in ("int32", "int64"):
        node.fail(f"indices must be int32 or int64, got {v.dtype}")
    return v.expr


@_register("Gather", "axis")
def _gather(node: Node):
    data, idx = node.value(0), node.value(1)
    axis = _axis(node, len(data.shape))
    n = data.shape[axis]
    if data.static is not None and idx.static is not None:  # shape arithmetic
        return np.take(data.static, _static_indices(node, idx.static, n, axis), axis=axis)
    return op.take(node.expr(0), _indices_expr(node, n, axis), axis=axis, mode="fast")


@_register("GatherElements", "axis")
def _gather_elements(node: Node):
    data, idx = node.value(0), node.value(1)
    axis = _axis(node, len(data.shape))
    if len(idx.shape) != len(data.shape):
        node.fail(f"indices {idx.shape} must have the rank of data {data.shape}")
    n = data.shape[axis]
    if data.static is not None and idx.static is not None:
        k = _static_indices(node, idx.static, n, axis)
        return np.take_along_axis(data.static, k, axis=axis)
    return op.gather(node.expr(0), axis, _indices_expr(node, n, axis), mode="fast")


@_register("GatherND", "batch_dims")
def _gather_nd(node: Node):
    """GatherND with batch_dims 0 (dynamo's BERT / DistilBERT exports pick rows of the
    attention mask with it): the first K dims of ``data`` (K = the indices' last dim) are
    flattened into one, and each index tuple into one linear index, so the gather is a
    ``take`` along axis 0 (its loads checked at run time as Gather's are)."""
    data, idx = node.value(0), node.value(1)
    if int(node.attr("batch_dims", 0)) != 0:
        node.unsupported("batch_dims", node.attr("batch_dims"), [0])
    k = idx.shape[-1] if idx.shape else 0
    if not 1 <= k <= len(data.shape):
        node.fail(f"indices {idx.shape}: the last dim must be 1..{len(data.shape)} (data rank)")
    lead, rest = data.shape[:k], tuple(data.shape[k:])
    out_shape = tuple(idx.shape[:-1]) + rest
    strides = [math.prod(lead[i + 1 :]) for i in range(k)]
    if idx.static is not None:
        parts = [_static_indices(node, idx.static[..., i], lead[i], i) for i in range(k)]
        linear = sum(p * s for p, s in zip(parts, strides))
        if data.static is not None:
            flat = data.static.reshape((math.prod(lead),) + rest)
            return np.take(flat, linear, axis=0)
        linear_expr = Constant(np.asarray(linear, "int64"))
    else:
        if idx.dtype not in ("int32", "int64"):
            node.fail(f"indices must be int32 or int64, got {idx.dtype}")
        whole = node.expr(1)
        terms = []
        for i in range(k):
            part = op.reshape(
                op.strided_slice(whole, (i,), (i + 1,), axes=(len(idx.shape) - 1,)),
                idx.shape[:-1] or (1,),
            )
            # negatives count from the end of their own dim, as ONNX says
            part = op.where(op.less(part, 0), op.add(part, lead[i]), part)
            terms.append(part if strides[i] == 1 else op.multiply(part, strides[i]))
        linear_expr = terms[0]
        for t in terms[1:]:
            linear_expr = op.add(linear_expr, t)
    flat = op.reshape(node.expr(0), (math.prod(lead),) + rest)
    out = op.take(flat, linear_expr, axis=0, mode="fast")
    return out if tuple(out.shape) == out_shape else op.reshape(out, out_shape or (1,))


# --- Einsum ----------------------------------------------------------------------------------


def _parse_einsum(node: Node, nops: int, ranks) -> tuple[list[str], str]:
    eq = node.attr("equation")
    if not isinstance(eq, str):
        node.fail("attribute equation is required")
    eq = eq.replace(" ", "")
    if "..." in eq:
        node.fail(f"equation {eq!r}: ellipsis (...) is not supported; spell the dims out")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != nops:
        node.fail(f"equation {eq!r} has {len(terms)} operands, the node {nops}")
    for t, r in zip(terms, ranks):
        if len(t) != r or not all(c in string.ascii_letters for c in t):
            node.fail(f"equation {eq!r}: term {t!r} does not name the {r} dims of its operand")
        if len(set(t)) != len(t):
            node.fail(
                f"equation {eq!r}: a repeated index in one term (a diagonal) is not supported"
            )
    if not arrow:  # implicit output: the indices seen once, in alphabetical order
        seen = "".join(terms)
        out = "".join(sorted(c for c in set(seen) if seen.count(c) == 1))
    if len(set(out)) != len(out) or any(c not in "".join(terms) for c in out):
        node.fail(f"equation {eq!r}: bad output term {out!r}")
    return terms, out


def _permute(x: Expr, have: str, want: str) -> Expr:
    if have == want:
        return x
    return op.transpose(x, tuple(have.index(c) for c in want))


@_register("Einsum", "equation")
def _einsum(node: Node):
    """Two-operand einsums (every form attention code writes: ``bhid,bhjd->bhij``,
    ``bhij,bhjd->bhid``, ``bid,jd->bij``, ``ij,jk->ik``, transposed variants) as a batch
    matmul: batch dims (in both operands and the output), the contracted dims (in both, not in
    the output) and each side's free dims are gathered by a transpose and a reshape, then
    ``nn.batch_matmul`` (``nn.dense`` when there is no batch dim) and a reshape and transpose
    to the output order. One operand: a transpose."""
    n = sum(1 for i in range(node.n_inputs) if node.has(i))
    vals = [node.value(i) for i in range(n)]
    terms, out = _parse_einsum(node, n, [len(v.shape) for v in vals])
    if n == 1:
        if set(out) != set(terms[0]):
            node.fail(f"one-operand einsum {terms[0]}->{out}: only a permutation is supported")
        return _permute(node.expr(0), terms[0], out)
    if n != 2:
        node.fail(f"einsum of {n} operands is not supported; supported: 1 or 2")
    (ta, tb), (va, vb) = terms, vals
    size = {}
    for t, v in ((ta, va), (tb, vb)):
        for c, d in zip(t, v.shape):
            if size.setdefault(c, d) != d:
                node.fail(
                    f"index {c!r} has sizes {size[c]} and {d} (broadcasting is not supported)"
                )
    only_one = [c for c in ta + tb if c not in out and (c in ta) != (c in tb)]
    if only_one:
        node.fail(f"index {only_one[0]!r} is summed over one operand only; not supported")
    batch = [c for c in out if c in ta and c in tb]
    free_a = [c for c in ta if c in out and c not in tb]
    free_b = [c for c in tb if c in out and c not in ta]
    red = [c for c in ta if c in tb and c not in out]
    prod = lambda cs: math.prod(size[c] for c in cs)  # noqa: E731
    bsz, m, nn_, k = prod(batch), prod(free_a), prod(free_b), prod(red)
    a = op.reshape(_permute(node.expr(0), ta, "".join(batch + free_a + red)), (bsz, m, k))
    order_b = "".join(batch + free_b + red)
    if not batch and vb.static is not None:
        # A weight: folded into the (N, K) layout dense wants, no transpose at run time.
        w = node.imp.derived(vb, "_einsum", np.ascontiguousarray(
            vb.static.transpose([tb.index(c) for c in order_b]).reshape(nn_, k)))  # fmt: skip
        y = nn.dense(op.reshape(a, (m, k)), w)
    elif not batch:
        b = op.reshape(_permute(node.expr(1), tb, order_b), (nn_, k))
        y = nn.dense(op.reshape(a, (m, k)), b)
    else:
        b = op.reshape(_permute(node.expr(1), tb, order_b), (bsz, nn_, k))
        y = nn.batch_matmul(a, b)
    got = "".join(batch + free_a + free_b)
    y = op.reshape(y, tuple(size[c] for c in got))
    return _permute(y, got, out)
