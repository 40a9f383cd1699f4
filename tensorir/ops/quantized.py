"""Quantized (int8) operators and their integer numpy references: the one home of int8 semantics.

The te computes are the ordinary ``conv2d`` / ``dense`` with int8 (or uint8) inputs and
``out_dtype="int32"`` (each operand is cast to int32 before the multiply, so the products and
the sum are exact), plus the requantize step that ``autosched.quantize`` inserts between
layers. The ``*_ref`` functions compute the same values with numpy, independently of te; the
quantized network, its tests and other backends (VTA) check against these.

The arithmetic, as relay's ``quantize`` realises it with power-of-two scales:

- quantize ``q = saturate_int8(floor(x * (1 / scale) + 0.5))`` (float at the network's edges);
- conv2d / dense: int8 x int8 products summed in int32;
- requantize from scale ``s_in`` to ``s_out = s_in * 2**shift``: for ``shift > 0`` a rounding
  arithmetic right shift ``floor(acc / 2**shift + 1/2)``, for ``shift < 0`` a multiply by
  ``2**-shift``, then a clip to the symmetric range [-127, 127] (relay's int8 range) and a cast
  to int8. The value is the exact saturating one for every int32 ``acc`` and every shift
  (:func:`shift_steps` says how, in int32 arithmetic that cannot overflow: shifts of 32 bits
  and more, which weights scaled by 1e12 or 1e-9 produce, included);
- dequantize ``x = float32(q) * scale``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import te
from ..tensor import Tensor, TensorError
from ._util import compute
from .conv2d import conv2d
from .dense import dense
from .reference import conv_nd

__all__ = [
    "INT8_MAX",
    "conv2d_int8",
    "conv2d_int8_ref",
    "dense_int8",
    "dense_int8_ref",
    "dequantize_ref",
    "quantize_ref",
    "quantized_range",
    "requantize",
    "requantize_ref",
    "shift_steps",
    "ShiftSteps",
]

INT8_MAX = 127
"""Quantized values lie in [-127, 127] (symmetric, as relay's int8 quantize clips)."""

_QUANT_INPUT_DTYPES = ("int8", "uint8")


def _check_int8(op: str, **tensors: Tensor) -> None:
    for name, t in tensors.items():
        if t.dtype not in _QUANT_INPUT_DTYPES:
            raise TensorError(
                f"{op}: {name} has dtype {t.dtype}; quantized ops take int8 or uint8 "
                "(quantize the float tensor first)"
            )


def conv2d_int8(
    data: Tensor,
    weight: Tensor,
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    groups: int = 1,
    data_layout: str = "NCHW",
    kernel_layout: str = "",
) -> Tensor:
    """int8 x int8 -> int32 2-D convolution (``nn.conv2d`` with ``out_dtype="int32"``).

    Parameters are those of :func:`tensorir.ops.conv2d`; ``data`` and ``weight`` must be
    int8 or uint8.
    """
    _check_int8("conv2d_int8", data=data, weight=weight)
    return conv2d(
        data, weight, strides, padding, dilation, groups, data_layout, kernel_layout, "int32"
    )


def dense_int8(data: Tensor, weight: Tensor) -> Tensor:
    """int8 x int8 -> int32 dense (``nn.dense`` with ``out_dtype="int32"``)."""
    _check_int8("dense_int8", data=data, weight=weight)
    return dense(data, weight, out_dtype="int32")


def quantized_range(dtype: str) -> tuple[int, int]:
    """The values a quantized ``dtype`` takes: symmetric for signed types ([-127, 127] for
    int8, as relay clips), the full range for unsigned ones ([0, 255] for uint8)."""
    info = np.iinfo(dtype)
    return (-int(info.max), int(info.max)) if info.min < 0 else (0, int(info.max))


_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class ShiftSteps:
    """``clip(floor(v * 2**-shift + 1/2), lo, hi)`` of an int32 ``v``, in int32 steps that
    cannot overflow (whatever the shift and ``v``):

    1. ``zero``: the result is 0 before the final clip (a right shift of 32 bits or more: every
       int32 rounds to 0); the other steps are skipped;
    2. ``pre``: clip ``v`` to ``[pre[0], pre[1]]`` first (values beyond saturate anyway);
    3. ``right > 0``: the rounding right shift as ``((v >> (right - 1)) + 1) >> 1`` (equal to
       ``(v + 2**(right - 1)) >> right``, whose add would wrap near 2**31);
       ``left > 0``: ``v << left`` (``left`` at most the bits of the range: a larger shift
       saturates any nonzero value all the same, and 32 or more is undefined in LLVM);
    4. clip to ``[lo, hi]``.
    """

    right: int = 0
    left: int = 0
    pre: tuple[int, int] | None = None
    zero: bool = False


def shift_steps(shift: int, lo: int, hi: int) -> ShiftSteps:
    """The :class:`ShiftSteps` of a requantize by ``shift`` into ``[lo, hi]`` (the one home of
    that arithmetic: the te compute, its numpy twin and the graph rewrite all follow it)."""
    shift = int(shift)
    if shift >= 32:
        return ShiftSteps(zero=True)
    if shift > 0:
        # (v >> 0) + 1 wraps at INT32_MAX: keep v below it when the range allows.
        pre = (-_INT32_MAX - 1, _INT32_MAX - 1) if shift == 1 and hi < _INT32_MAX else None
        return ShiftSteps(right=shift, pre=pre)
    if shift == 0:
        return ShiftSteps()
    k = -shift
    left = min(k, max(-lo, hi, 1).bit_length())
    pre_lo, pre_hi = lo >> k, -((-hi) >> k)  # floor(lo / 2**k), ceil(hi / 2**k)
    if pre_hi << left > _INT32_MAX:  # an int32 range: saturate one step lower
        pre_hi -= 1
    if pre_lo << left < -_INT32_MAX - 1:
        pre_lo += 1
    return ShiftSteps(left=left, pre=(pre_lo, pre_hi))


def requantize(acc: Tensor, shift: int, out_dtype: str = "int8") -> Tensor:
    """``T_requantize``: an int32 tensor at scale ``s`` to ``out_dtype`` at ``s * 2**shift``.

    A rounding arithmetic right shift (``shift > 0``) or a left shift (``shift < 0``), then a
    clip to :func:`quantized_range` of ``out_dtype`` and a cast (see the module docstring;
    ``requantize_ref`` is its numpy twin).
    """
    if acc.dtype != "int32":
        raise TensorError(f"requantize: the input must be int32, got {acc.dtype}")
    lo, hi = quantized_range(out_dtype)
    steps = shift_steps(shift, lo, hi)

    def i32(value):
        return te.const(value, "int32")

    def f(*i):
        v = acc[i]
        if steps.zero:
            v = i32(0)
        if steps.pre is not None:
            v = te.max(te.min(v, i32(steps.pre[1])), i32(steps.pre[0]))
        if steps.right:
            v = ((v >> i32(steps.right - 1)) + i32(1)) >> i32(1)
        if steps.left:
            v = v << i32(steps.left)
        return te.saturate_cast(out_dtype, te.max(te.min(v, i32(hi)), i32(lo)))

    return compute(acc.shape, f, "T_requantize", "ax", tag="elemwise")


# --- numpy references (integer arithmetic, no te) --------------------------------------------


def _exact_int32(acc: np.ndarray, k: int, op: str) -> np.ndarray:
    # float64 sums of int8 products are exact below 2**53; int8 x int8 over k terms is at most
    # 256 * 128 * k (uint8 data), far below that for any real layer.
    if 256 * 128 * k >= 2**31:
        raise ValueError(f"{op}: reduction of {k} int8 products may overflow int32")
    return np.rint(acc).astype(np.int32)


def conv2d_int8_ref(
    data: np.ndarray,
    weight: np.ndarray,
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    groups: int = 1,
    data_layout: str = "NCHW",
    kernel_layout: str = "",
) -> np.ndarray:
    """int32 result of an int8/uint8 convolution (exact), layouts as :func:`conv2d_int8`."""
    kernel_layout = kernel_layout or {"NCHW": "OIHW", "NHWC": "HWIO"}[data_layout]
    pad = tuple(padding) if np.ndim(padding) else (padding,) * 4
    pad = pad * 2 if len(pad) == 2 else pad
    strides = tuple(strides) if np.ndim(strides) else (strides, strides)
    dilation = tuple(dilation) if np.ndim(dilation) else (dilation, dilation)
    acc = conv_nd(
        data.astype(np.float64), weight.astype(np.float64), strides, pad, dilation, groups,
        data_layout, kernel_layout,
    )  # fmt: skip
    k = weight.size // weight.shape[kernel_layout.index("O")]
    return _exact_int32(acc, k, "conv2d_int8_ref")


def dense_int8_ref(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """int32 ``data @ weight.T`` of int8/uint8 operands (exact)."""
    acc = data.astype(np.float64) @ weight.astype(np.float64).T
    return _exact_int32(acc, data.shape[1], "dense_int8_ref")


def requantize_ref(acc: np.ndarray, shift: int, out_dtype: str = "int8") -> np.ndarray:
    """numpy twin of :func:`requantize` (int32 in, saturated ``out_dtype`` out)."""
    v = np.asarray(acc).astype(np.int32)
    lo, hi = quantized_range(out_dtype)
    steps = shift_steps(shift, lo, hi)
    if steps.zero:
        v = np.zeros_like(v)
    if steps.pre is not None:
        v = np.clip(v, *steps.pre).astype(np.int32)
    if steps.right:
        v = ((v >> np.int32(steps.right - 1)) + np.int32(1)) >> np.int32(1)
    if steps.left:
        v = v << np.int32(steps.left)
    return np.clip(v, lo, hi).astype(out_dtype)


def quantize_ref(x: np.ndarray, scale: float, limit: int = INT8_MAX) -> np.ndarray:
    """float -> int8: ``clip(floor(x * (1/scale) + 0.5), -limit, limit)``, computed in float32
    as the quantized graph does."""
    inv = np.float32(1.0 / scale)
    q = np.floor(np.asarray(x, np.float32) * inv + np.float32(0.5))
    return np.clip(q, -limit, limit).astype(np.int8)


def dequantize_ref(q: np.ndarray, scale: float) -> np.ndarray:
    """int -> float32: ``float32(q) * scale``."""
    return np.asarray(q).astype(np.float32) * np.float32(scale)
