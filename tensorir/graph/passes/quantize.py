"""``realize_quantized``: a float network -> int8 conv2d/dense with int32 accumulation.

What relay's ``quantize`` (annotate + calibrate + realize) produces, in one rewrite of an
optimised graph (batch norm already folded):

- every quantized ``nn.conv2d`` / ``nn.dense`` takes int8 data (uint8 when it is a relu's
  output: the same numbers, [0, 127], as x86's vpdpbusd wants them) and an int8 constant
  weight and accumulates in int32 (``out_dtype="int32"``); its result is an int32 value at the scale
  ``s_data * s_weight``;
- int32 values stay integer through ``add`` / ``nn.bias_add`` (constants quantized to the
  value's scale; two int32 values are brought to the coarser scale by a rounding right shift),
  ``multiply`` by a constant (an int8 constant times the value at 16 bits), ``nn.relu`` and
  ``nn.max_pool2d``;
- an int32 value feeding the next quantized op is requantized: a rounding right shift (all
  scales are powers of two, so the rescale is a shift), clipped to [-127, 127], cast to int8;
- float stays at the edges: a float value is quantized (``floor(x / s + 0.5)``, clipped, cast)
  at the first quantized op that reads it, and an int32 value is dequantized
  (``float32(q) * s``) before any other op (pools that average, softmax, reshapes) and at the
  outputs.

The integer semantics are those of :mod:`tensorir.ops.quantized` (its ``*_ref`` functions are
their numpy twins). Calibration (choosing the activation scales) is the caller's:
``autosched.quantize`` passes one scale per quantized site.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...dtype import is_float
from ...ops.quantized import INT8_MAX, shift_steps
from .. import op
from ..ir import Call, Constant, Expr, Function, Var, make_call, post_order

__all__ = ["QuantizedValue", "power2_scale", "quantize_sites", "realize_quantized"]

_ANCHORS = ("nn.conv2d", "nn.dense")
_INT16_MAX = 32767
_MULTIPLY_EXTRA_LEVELS = 256
_KEEP_INT = ("nn.relu", "nn.max_pool2d")


def power2_scale(max_abs: float, limit: int = INT8_MAX + 1) -> float:
    """The power-of-two scale that maps ``[-max_abs, max_abs]`` into ``[-limit, limit]`` (relay's
    ``_power2_scale``: the magnitude rounded up to a power of two, divided by the range)."""
    if not np.isfinite(max_abs) or max_abs <= 0:
        return 1.0 / limit
    return 2.0 ** math.ceil(math.log2(max_abs)) / limit


@dataclass(frozen=True)
class QuantizedValue:
    """An int32 graph value ``expr`` standing for the real value ``expr * scale``."""

    expr: Expr
    scale: float


def _is_quantizable_anchor(node: Expr) -> bool:
    return (
        isinstance(node, Call)
        and node.op in _ANCHORS
        and is_float(node.dtype)
        and isinstance(node.args[1], Constant)
    )


def quantized_anchors(
    func: Function, skip_conv_layers: Sequence[int] = (), skip_dense_layer: bool = False
) -> list[Call]:
    """The conv2d / dense calls to quantize: those with a constant float weight, minus the
    conv2d calls whose index (counting conv2d in execution order, from 0) is skipped, and
    minus every dense when ``skip_dense_layer``."""
    out, conv_index = [], 0
    for node in post_order(func):
        if not _is_quantizable_anchor(node) or (skip_dense_layer and node.op == "nn.dense"):
            continue
        if node.op == "nn.conv2d":
            conv_index += 1
            if conv_index - 1 in set(skip_conv_layers):
                continue
        out.append(node)
    return out


def quantize_sites(
    func: Function, skip_conv_layers: Sequence[int] = (), skip_dense_layer: bool = False
) -> list[Expr]:
    """The float values whose activation scale the rewrite may ask for: the data input of
    every quantized anchor and the variable side of every multiply by a constant."""
    sites = [a.args[0] for a in quantized_anchors(func, skip_conv_layers, skip_dense_layer)]
    for node in post_order(func):
        if isinstance(node, Call) and node.op == "multiply" and _const_side(node) is not None:
            sites.append(node.args[1 - _const_side(node)])
    seen: set[int] = set()
    return [s for s in sites if not (id(s) in seen or seen.add(id(s)))]


def _const_side(node: Call) -> int | None:
    consts = [i for i, a in enumerate(node.args) if isinstance(a, Constant)]
    return consts[0] if len(consts) == 1 and is_float(node.args[consts[0]].dtype) else None


def _non_negative(node: Expr) -> bool:
    """Whether ``node``'s values are provably >= 0 (a relu, or a clip from >= 0)."""
    if not isinstance(node, Call):
        return False
    return node.op == "nn.relu" or (node.op == "clip" and float(node.attrs["a_min"]) >= 0)


def _log2_ratio(a: float, b: float, what: str) -> int:
    r = math.log2(a / b)
    if abs(r - round(r)) > 1e-9:
        raise ValueError(f"quantize: {what}: scales {a} and {b} are not powers of two apart")
    return int(round(r))


# A constant below 2**30 added to an int8 x int8 sum (below 2**30 for fewer than 2**16 terms)
# cannot wrap int32.
_INT32_SAFE = 2**30


def _describe(c: Constant, node: Call) -> str:
    name = f" {c.name!r}" if c.name else ""
    return f"the constant{name} {tuple(c.value.shape)} of {node.op}"


def _check_finite(c: Constant, node: Call) -> None:
    """NaN or inf have no int8 / int32 value: refuse them instead of quantizing garbage."""
    bad = ~np.isfinite(c.value)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"quantize: {_describe(c, node)} holds {int(bad.sum())} NaN/inf value(s) (first at "
            f"{where}: {c.value[where]}); fix the weights or keep the layer float"
        )


def _shifted(x: Expr, shift: int, lo: int, hi: int) -> Expr:
    """int32 ``x`` at a scale ``2**shift`` times coarser, rounded, before a clip to ``[lo, hi]``:
    :func:`tensorir.ops.quantized.shift_steps`, so no int32 op overflows (compiled code and the
    numpy reference then agree for any weight scale)."""
    steps = shift_steps(shift, lo, hi)
    if steps.zero:
        return op.clip(x, 0, 0)
    if steps.pre is not None:
        x = op.clip(x, *steps.pre)
    if steps.right:
        if steps.right > 1:
            x = op.right_shift(x, steps.right - 1)
        x = op.right_shift(op.add(x, 1), 1)
    if steps.left:
        x = op.left_shift(x, steps.left)
    return x


class _Realizer:
    def __init__(self, anchors: list[Call], act_scale: Callable[[Expr], float]):
        self.anchors = set(anchors)
        self.act_scale = act_scale
        self.new: dict[int, Expr | QuantizedValue] = {}
        self.int8_memo: dict[tuple[int, float], Expr] = {}
        self.float_memo: dict[int, Expr] = {}

    # -- conversions between the domains ---------------------------------------------------

    def as_float(self, v: Expr | QuantizedValue) -> Expr:
        if not isinstance(v, QuantizedValue):
            return v
        if id(v.expr) not in self.float_memo:
            self.float_memo[id(v.expr)] = op.multiply(op.cast(v.expr, "float32"), v.scale)
        return self.float_memo[id(v.expr)]

    def as_int8(self, v: Expr | QuantizedValue, scale: float, non_negative: bool = False) -> Expr:
        """int8 of ``v`` at ``scale``: quantize a float, requantize an int32 value. A value
        known to be >= 0 (a relu's output) becomes uint8 with the same numbers, [0, 127]: the
        unsigned operand x86's integer dot product (vpdpbusd) takes."""
        if non_negative:
            return self.as_int(v, scale, INT8_MAX, "uint8", low=0)
        return self.as_int(v, scale, INT8_MAX, "int8")

    def as_int(
        self, v: Expr | QuantizedValue, scale: float, limit: int, dtype: str, low: int | None = None
    ) -> Expr:
        """``v`` at ``scale`` clipped to ``[-limit, limit]`` (or ``[low, limit]``), as ``dtype``."""
        src = v.expr if isinstance(v, QuantizedValue) else v
        key = (id(src), scale, dtype)
        if key in self.int8_memo:
            return self.int8_memo[key]
        lo = -limit if low is None else low
        if isinstance(v, QuantizedValue):
            shift = _log2_ratio(scale, v.scale, "requantize")
            x = _shifted(v.expr, shift, lo, limit)
        else:
            if not is_float(v.dtype):
                raise ValueError(f"quantize: cannot quantize a {v.dtype} value (expected float)")
            x = op.floor(op.add(op.multiply(v, np.float32(1.0 / scale)), np.float32(0.5)))
        out = op.cast(op.clip(x, lo, limit), dtype)
        self.int8_memo[key] = out
        return out

    def rescale(self, v: QuantizedValue, scale: float) -> Expr:
        """``v``'s int32 at the coarser ``scale`` (rounding right shift)."""
        shift = _log2_ratio(scale, v.scale, "add")
        return _shifted(v.expr, shift, -(2**31), 2**31 - 1)

    @staticmethod
    def int32_const(c: Constant, scale: float, node: Call) -> Constant:
        _check_finite(c, node)
        q = np.floor(c.value.astype(np.float64) / scale + 0.5)
        if q.size and np.abs(q).max() >= _INT32_SAFE:
            # The int32 sum it joins would wrap: the value's scale (its weights') is far finer
            # than this constant.
            raise ValueError(
                f"quantize: {_describe(c, node)} needs more than 30 bits at the int32 scale "
                f"{scale:g} of the value it is added to (its weights are tiny next to it); "
                "rescale the weights or keep the layer float (skip_conv_layers)"
            )
        return Constant(q.astype(np.int32), c.name)

    @staticmethod
    def int8_weight(c: Constant, node: Call) -> tuple[Constant, float]:
        _check_finite(c, node)
        scale = power2_scale(float(np.abs(c.value).max()) if c.value.size else 0.0)
        q = np.clip(np.floor(c.value.astype(np.float64) / scale + 0.5), -INT8_MAX, INT8_MAX)
        return Constant(q.astype(np.int8), c.name), scale

    # -- the rewrite -----------------------------------------------------------------------

    def visit(self, node: Expr) -> Expr | QuantizedValue:
        if not isinstance(node, Call):
            return node
        args = [self.new[id(a)] for a in node.args]
        quant = [isinstance(a, QuantizedValue) for a in args]
        if node in self.anchors:
            return self.anchor(node, args)
        if any(quant):
            out = self.integer_op(node, args, quant)
            if out is not None:
                return out
        floats = tuple(self.as_float(a) for a in args)
        if all(n is o for n, o in zip(floats, node.args)):
            return node
        return make_call(node.op, floats, node.attrs)

    def anchor(self, node: Call, args) -> QuantizedValue:
        s_data = float(self.act_scale(node.args[0]))
        data = self.as_int8(args[0], s_data, _non_negative(node.args[0]))
        weight, s_weight = self.int8_weight(node.args[1], node)
        call = make_call(node.op, (data, weight), node.attrs.replace(out_dtype="int32"))
        return QuantizedValue(call, s_data * s_weight)

    def integer_op(self, node: Call, args, quant) -> QuantizedValue | None:
        name = node.op
        if name in _KEEP_INT:
            return QuantizedValue(make_call(name, (args[0].expr,), node.attrs), args[0].scale)
        if name == "add" and all(quant):
            scale = max(args[0].scale, args[1].scale)
            lhs, rhs = self.rescale(args[0], scale), self.rescale(args[1], scale)
            return QuantizedValue(op.add(lhs, rhs), scale)
        if name in ("add", "nn.bias_add"):
            qi = quant.index(True)
            other = node.args[1 - qi]
            if not isinstance(other, Constant) or not is_float(other.dtype):
                return None
            v = args[qi]
            c = self.int32_const(other, v.scale, node)
            ins = (v.expr, c) if qi == 0 else (c, v.expr)
            return QuantizedValue(make_call(name, ins, node.attrs), v.scale)
        if name == "multiply" and _const_side(node) is not None:
            # A per-channel scale (a batch norm that could not fold into a conv): the value
            # at 16 bits (its activation range, 256 times finer) times the int8 constant; the
            # product (< 2**22) stays exact in int32.
            ci = _const_side(node)
            s_x = float(self.act_scale(node.args[1 - ci])) / _MULTIPLY_EXTRA_LEVELS
            x = self.as_int(args[1 - ci], s_x, _INT16_MAX, "int32")
            w, s_c = self.int8_weight(node.args[ci], node)
            c = Constant(w.value.astype(np.int32), w.name)
            return QuantizedValue(op.multiply(x, c) if ci == 1 else op.multiply(c, x), s_x * s_c)
        return None


def realize_quantized(
    func: Function,
    act_scales: Mapping[Expr, float] | Callable[[Expr], float],
    skip_conv_layers: Sequence[int] = (),
    skip_dense_layer: bool = False,
) -> Function:
    """Rewrite ``func`` (optimised: batch norm folded, weights constant) into its int8 form.

    Parameters
    ----------
    func : Function
    act_scales : mapping or callable
        The activation scale (a power of two) of each site of :func:`quantize_sites`, keyed by
        the site's node in ``func``, or a function of the node (one global scale).
    skip_conv_layers : sequence of int
        Indices of conv2d calls (in execution order, from 0) that stay float.
    skip_dense_layer : bool
        Keep every ``nn.dense`` float.

    Returns
    -------
    Function
        Same parameters and output types; int8 convolutions and dense layers inside.
    """
    scale_of = act_scales if callable(act_scales) else act_scales.__getitem__
    anchors = quantized_anchors(func, skip_conv_layers, skip_dense_layer)
    r = _Realizer(anchors, scale_of)
    for node in post_order(func):
        r.new[id(node)] = r.visit(node)
    body = tuple(r.as_float(r.new[id(o)]) for o in func.outputs)
    body = body if isinstance(func.body, tuple) else body[0]
    params = tuple(p for p in func.params if isinstance(p, Var))
    return Function(params, body, func.name)
