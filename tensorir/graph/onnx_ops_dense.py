"""ONNX converters of the dense ops: Gemm, MatMul (batched, broadcast, 1-D operands) and
Softmax."""

from __future__ import annotations

import math

import numpy as np

from . import nn, op
from .ir import Expr
from .onnx_node import Node, _register


def _transposed_weight(node: Node, i: int, axes) -> Expr:
    """Input ``i`` with its dims permuted: folded into a new parameter ``<name>_T`` (or a
    Constant) when it is known at import time, a transpose call otherwise."""
    v = node.value(i)
    if v.static is None:
        return op.transpose(v.expr, axes)
    return node.imp.derived(v, "_T", np.ascontiguousarray(v.static.transpose(axes)))


@_register("Gemm", "alpha beta transA transB")
def _gemm(node: Node):
    a = node.expr(0)
    if len(a.shape) != 2 or len(node.value(1).shape) != 2:
        node.fail(f"A and B must be 2-D, got {a.shape} and {node.value(1).shape}")
    if node.attr("transA", 0):
        a = op.transpose(a, (1, 0))
    w = node.expr(1) if node.attr("transB", 0) else _transposed_weight(node, 1, (1, 0))
    y = nn.dense(a, w)
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if alpha != 1.0:
        y = op.multiply(y, alpha)
    if not node.has(2) or beta == 0.0:
        return y
    c = node.value(2)
    if beta != 1.0:
        if c.static is not None:
            cexpr = node.imp.derived(c, "_scaled", (c.static * beta).astype(c.static.dtype))
        else:
            cexpr = op.multiply(c.expr, beta)
    else:
        cexpr = node.imp.expr(c)
    if tuple(cexpr.shape) == (y.shape[1],):
        return nn.bias_add(y, cexpr, axis=1)
    return op.add(y, cexpr)


def _rhs_transposed(node: Node, one_d: bool) -> Expr:
    """MatMul's right operand (..., K, N) as (..., N, K); a 1-D one is (K,) -> (1, K)."""
    v = node.value(1)
    if v.static is not None:
        w = v.static.reshape(1, -1) if one_d else np.swapaxes(v.static, -1, -2)
        return node.imp.derived(v, "_T", np.ascontiguousarray(w))
    if one_d:
        return op.reshape(v.expr, (1, v.shape[0]))
    nd = len(v.shape)
    return op.transpose(v.expr, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _to_batch(x: Expr, batch: tuple[int, ...], full: tuple[int, ...]) -> Expr:
    """(*batch, R, C) -> (B, R, C), where B is prod(full), or 1 when batch is all ones (then
    batch_matmul broadcasts it); batch dims that need it are broadcast to ``full`` first."""
    rows = tuple(x.shape[-2:])
    if math.prod(batch) == 1:
        return x if len(x.shape) == 3 and x.shape[0] == 1 else op.reshape(x, (1,) + rows)
    if tuple(batch) != tuple(full):
        x = op.broadcast_to(x, tuple(full) + rows)
    return x if len(x.shape) == 3 else op.reshape(x, (math.prod(full),) + rows)


@_register("MatMul")
def _matmul(node: Node):
    av, bv = node.value(0), node.value(1)
    ashape, bshape = tuple(av.shape), tuple(bv.shape)
    if not ashape or not bshape:
        node.fail(f"0-D operands are not supported (shapes {ashape}, {bshape})")
    if av.static is not None and bv.static is not None:
        return np.matmul(av.static, bv.static)
    a = node.expr(0)
    k = ashape[-1]
    if k != bshape[-2 if len(bshape) > 1 else 0]:
        node.fail(f"the inner dims of {ashape} x {bshape} differ")
    # numpy's rule for 1-D operands: a (K,) is (1, K), b (K,) is (K, 1); the dim goes again
    out_tail = ashape[-2:-1] if len(ashape) > 1 else ()
    out_tail += bshape[-1:] if len(bshape) > 1 else ()
    if len(ashape) == 1:
        a, ashape = op.reshape(a, (1, k)), (1, k)
    bt = _rhs_transposed(node, len(bshape) == 1)
    bshape = tuple(bt.shape[:-2]) + (k, bt.shape[-2])
    try:
        batch = tuple(np.broadcast_shapes(ashape[:-2], bshape[:-2]))
    except ValueError:
        node.fail(f"the batch dims of {av.shape} x {bv.shape} do not broadcast")
    out_shape = batch + out_tail
    if len(bshape) == 2:  # one weight matrix: a dense over every row of a
        y = nn.dense(a if len(ashape) == 2 else op.reshape(a, (-1, k)), bt)
    else:
        y = nn.batch_matmul(_to_batch(a, ashape[:-2], batch), _to_batch(bt, bshape[:-2], batch))
    return y if tuple(y.shape) == out_shape else op.reshape(y, out_shape)


@_register("Softmax", "axis")
def _softmax(node: Node):
    x = node.expr(0)
    nd = len(x.shape)
    if node.opset >= 13:
        return nn.softmax(x, axis=int(node.attr("axis", -1)))
    # Before opset 13 the input is coerced to 2-D at ``axis`` (default 1): the softmax runs
    # over all the dims from ``axis`` on.
    axis = int(node.attr("axis", 1))
    axis = axis + nd if axis < 0 else axis
    if not 0 <= axis < nd:
        node.fail(f"axis={axis} is out of range for a {nd}-D input")
    if all(d == 1 for d in x.shape[axis + 1 :]):
        return nn.softmax(x, axis=axis)
    flat = op.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
    return op.reshape(nn.softmax(flat, axis=-1), x.shape)
