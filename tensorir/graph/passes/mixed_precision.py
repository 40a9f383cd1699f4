"""``to_mixed_precision``: a float32 network -> float16 / bfloat16 where it pays (Relay's
ToMixedPrecision).

Every op falls in one of three lists, by name (so an op the table gains later, such as a renamed
layer norm, is placed by adding its name):

- ``ALWAYS`` (convolutions, dense, batch_matmul): inputs in 16 bits, the products accumulated in
  float32 (``out_dtype="float32"`` on the op: the te compute casts each operand to float32
  before it multiplies, which is what a tensor core's fp16 x fp16 -> fp32 does), then one cast
  of the result back to 16 bits. The op's elementwise consumers (bias, relu, residual add) then
  run in 16 bits and fuse into its kernel with the cast: the kernel reads and writes 16-bit
  tensors.
- ``NEVER`` (softmax, layer / batch norm, sums and means, average pools, exp, log, power, erf):
  computed in float32; a 16-bit input is cast up first. Their sums and exponents lose most to
  16 bits (float16 overflows above 65504, e.g. ``exp(11.1)``). Where an ``ALWAYS`` op reads
  the result, directly or through layout ops (a transformer's layer norm before its dense),
  the result is stored in 16 bits once and every reader takes that copy: the residual add
  beside the dense then runs in 16 bits, as in a PyTorch model cast with ``.half()``, and
  the cast joins the norm's kernel (``fuse_normalization_epilogues``) instead of being a
  kernel of its own, which bert-base float16 ran 24 of (1.2 us each on an H100). Relay's
  ToMixedPrecision keeps the float32 result for the add; this trades that rounding for the
  kernels and bytes.
- everything else *follows* its inputs: 16 bits when a float input is 16-bit and every other
  float input is a constant (converted once, here), float32 otherwise (16-bit inputs cast up).

The network's inputs stay float32 (cast to 16 bits where an ``ALWAYS`` op reads them) and its
outputs are cast back to float32. Constant weights are converted here; weights that are still
parameters (Vars) get a ``cast`` that ``fold_constant`` evaluates when the build binds them,
so the compiled network holds 16-bit weights either way.
"""

from __future__ import annotations

import numpy as np

from ...dtype import LOW_PRECISION, is_float, to_numpy
from .. import op
from ..ir import Call, Constant, Expr, Function, make_call, post_order, users
from ..shapes import get_op
from .transformer import LAYOUT_OPS

__all__ = ["ALWAYS", "NEVER", "to_mixed_precision"]

ALWAYS = frozenset({
    "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv2d_transpose", "nn.dense", "nn.matmul",
    "nn.batch_matmul", "nn.contrib_conv2d_winograd_without_weight_transform",
})  # fmt: skip
"""Ops run in 16 bits with float32 accumulation."""

NEVER = frozenset({
    "nn.softmax", "nn.log_softmax", "nn.layer_norm", "layer_norm", "nn.group_norm",
    "nn.instance_norm", "nn.batch_norm", "nn.l2_normalize", "sum", "mean", "variance", "prod",
    "cumsum", "nn.avg_pool2d", "nn.avg_pool3d", "nn.global_avg_pool2d", "nn.adaptive_avg_pool2d",
    "exp", "log", "power", "erf",
})  # fmt: skip
"""Ops kept in float32 (their 16-bit inputs are cast up)."""


def to_mixed_precision(func: Function, dtype: str = "float16") -> Function:
    """Rewrite ``func`` to run its convolutions and matmuls in ``dtype`` (see the module doc).

    Parameters
    ----------
    func : Function
        A float32 network (batch norm best folded first: ``optimize``, or
        ``autosched.to_mixed_precision`` with params, does that).
    dtype : "float16" or "bfloat16"

    Returns
    -------
    Function
        Same parameters and output shapes, outputs float32.

    Raises
    ------
    ValueError
        ``dtype`` is not a 16-bit float type.
    """
    if dtype not in LOW_PRECISION:
        raise ValueError(
            f"to_mixed_precision: dtype={dtype!r}; use one of {list(LOW_PRECISION)} "
            "(float32 networks need no conversion)"
        )
    conv = _Converter(dtype, _stored_low(func, dtype))
    for node in post_order(func):
        conv.new[id(node)] = conv.visit(node)
    body = tuple(conv.to(conv.new[id(o)], "float32") for o in func.outputs)
    body = body if isinstance(func.body, tuple) else body[0]
    return Function(func.params, body, func.name)


def _runs_low(call: Call, low: str) -> bool:
    """Whether ``call`` is an ``ALWAYS`` op that :class:`_Converter` runs in ``low`` with
    float32 accumulation (its float inputs and result float32 or ``low``)."""
    convertible = ("float32", low)
    floats = [a.dtype for a in call.args if is_float(a.dtype)]
    return (
        call.op in ALWAYS
        and bool(floats)
        and all(d in convertible for d in floats)
        and call.dtype in convertible
        and "out_dtype" in get_op(call.op).attrs
    )


def _stored_low(func: Function, low: str) -> frozenset[int]:
    """ids of the float32 ``NEVER`` calls whose result an op running in ``low`` reads, directly
    or through layout ops (an imported BERT reshapes its (batch, seq, hidden) norm for a 2-D
    dense), and that are not outputs of ``func``: those are stored in 16 bits for all their
    readers."""
    outputs = {id(o) for o in func.outputs}
    readers = users(func)

    def feeds_low(node) -> bool:
        return any(
            _runs_low(r, low) or (r.op in LAYOUT_OPS and feeds_low(r)) for r in readers[node]
        )

    return frozenset(
        id(node)
        for node in readers
        if isinstance(node, Call)
        and node.op in NEVER
        and id(node) not in outputs
        and node.dtype == "float32"
        and feeds_low(node)
    )


class _Converter:
    def __init__(self, low: str, stored_low: frozenset[int] = frozenset()):
        self.low = low
        self.stored_low = stored_low
        self.new: dict[int, Expr] = {}
        self.casts: dict[tuple[int, str], Expr] = {}
        self.convertible = ("float32", low)  # float64 values are left as they are

    def to(self, e: Expr, dtype: str) -> Expr:
        """``e`` as ``dtype`` (a float one): converted constants, one shared cast per value."""
        if e.dtype == dtype or not is_float(e.dtype):
            return e
        key = (id(e), dtype)
        if key not in self.casts:
            if isinstance(e, Constant):
                value = e.value.astype(np.float32).astype(to_numpy(dtype))
                self.casts[key] = Constant(value, e.name)
            else:
                self.casts[key] = op.cast(e, dtype)
        return self.casts[key]

    def visit(self, node: Expr) -> Expr:
        if not isinstance(node, Call):
            return node
        args = [self.new[id(a)] for a in node.args]
        floats = [a for a in args if is_float(a.dtype)]
        if node.op in ALWAYS and floats and all(a.dtype in self.convertible for a in floats):
            if not _runs_low(node, self.low):
                return self.rebuild(node, args)  # no float32 accumulation to ask for
            ins = [self.to(a, self.low) for a in args]
            call = make_call(node.op, ins, node.attrs.replace(out_dtype="float32"))
            return op.cast(call, self.low)
        if node.op in NEVER:
            out = self.rebuild(node, [self.to(a, "float32") if a.dtype == self.low else a
                                      for a in args])  # fmt: skip
            return self.to(out, self.low) if id(node) in self.stored_low else out
        low = [a for a in floats if a.dtype == self.low]
        if not low:
            return self.rebuild(node, args)
        others = [a for a in floats if a.dtype != self.low]
        if all(isinstance(a, Constant) and a.dtype == "float32" for a in others):
            target = self.low
        else:  # a float32 value meets a 16-bit one: the wider wins
            target = "float32"
        ins = [self.to(a, target) if a.dtype in self.convertible else a for a in args]
        return self.rebuild(node, ins)

    @staticmethod
    def rebuild(node: Call, args) -> Expr:
        if all(n is o for n, o in zip(args, node.args)):
            return node
        return make_call(node.op, args, node.attrs)
