"""Spatial resize of 4-D tensors (Relay's ``image.resize2d``, ONNX's Resize): nearest, linear
and cubic, with ONNX's coordinate transformation modes.

The source coordinate of output index ``o`` is a rational function of ``o`` for every mode
here, ``x = (o * P + Q) / R`` with integers P, Q, R known when the compute is built (the
scale is a fraction). So the neighbour indices are exact integer arithmetic (floordiv /
floormod of the loop variable, no float rounding inside an index) and only the interpolation
weights are floats. Clamping to the input's edge is emitted only where some output needs it.
"""

from __future__ import annotations

from fractions import Fraction

from .. import te
from ..tensor import Tensor, TensorError
from ._util import compute

__all__ = ["COORDINATE_MODES", "METHODS", "ROUNDING_METHODS", "resize2d", "source_coordinate"]

METHODS = ("nearest_neighbor", "linear", "cubic")
COORDINATE_MODES = (
    "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
)  # fmt: skip
ROUNDING_METHODS = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "round")
_MAX_DENOMINATOR = 1 << 12  # scales like 1/3 given as float32 are taken as the nearby fraction
_INDEX_LIMIT = 1 << 30  # o * P + Q must stay well inside int32


def source_coordinate(mode: str, o_size: int, i_size: int, scale) -> tuple[int, int, int]:
    """(P, Q, R) with ``x_original = (o * P + Q) / R`` (ONNX's coordinate_transformation_mode).

    ``scale`` is ONNX's scale (output / input) as a float, or None for ``o_size / i_size``.
    """
    s = Fraction(o_size, i_size) if scale is None else Fraction(scale)
    if s.denominator > _MAX_DENOMINATOR:
        s = s.limit_denominator(_MAX_DENOMINATOR)
    a, b = s.numerator, s.denominator  # x / s = x * b / a
    if mode == "asymmetric":
        return b, 0, a
    if mode == "tf_half_pixel_for_nn":
        return 2 * b, b, 2 * a
    if mode == "half_pixel" or (mode == "pytorch_half_pixel" and o_size > 1):
        return 2 * b, b - a, 2 * a
    if mode == "pytorch_half_pixel" or (mode == "align_corners" and o_size == 1):
        return 0, 0, 1
    if mode == "align_corners":
        return i_size - 1, 0, o_size - 1
    raise TensorError(f"image.resize2d: coordinate_transformation_mode {mode!r} is not supported")


def _clamp(e, lo_val: int, hi_val: int, n: int):
    """min(max(e, 0), n - 1), each side only if the expression's range crosses it."""
    if lo_val < 0:
        e = te.max(e, 0)
    if hi_val > n - 1:
        e = te.min(e, n - 1)
    return e


class _Axis:
    """The index arithmetic of one resized dim."""

    def __init__(self, mode, o_size, i_size, scale):
        self.P, self.Q, self.R = source_coordinate(mode, o_size, i_size, scale)
        self.o_size, self.n = o_size, i_size
        ends = [self.Q, (o_size - 1) * self.P + self.Q]
        if max(abs(v) for v in ends) * 2 + 2 * self.R > _INDEX_LIMIT:
            raise TensorError(
                f"image.resize2d: the scale of a {i_size} -> {o_size} resize needs index "
                "arithmetic beyond int32"
            )
        self.num_range = (min(ends), max(ends))

    def num(self, o):
        e = o * self.P if self.P != 1 else o
        return e + self.Q if self.Q else e

    def nearest(self, o, rounding: str):
        # floor(x), ceil(x), ceil(x - 1/2), floor(x + 1/2) as floordiv(o * P2 + Q2, R2)
        P, Q, R = self.P, self.Q, self.R
        P2, Q2, R2 = {
            "floor": (P, Q, R),
            "ceil": (P, Q + R - 1, R),
            "round_prefer_floor": (2 * P, 2 * Q + R - 1, 2 * R),
            "round_prefer_ceil": (2 * P, 2 * Q + R, 2 * R),
            "round": (2 * P, 2 * Q + R, 2 * R),  # ONNX's default: half away from zero
        }[rounding]
        if P2 == 0:
            val = Q2 // R2
            return min(max(val, 0), self.n - 1)
        e = te.floordiv(o * P2 + Q2, R2) if R2 != 1 else o * P2 + Q2
        lo, hi = Q2 // R2, ((self.o_size - 1) * P2 + Q2) // R2
        return _clamp(e, lo, hi, self.n)

    def floor_and_frac(self, o, clamp_coordinate: bool):
        """(floor index, fraction as a float32 expr): the coordinate clamped to [0, n - 1]
        first for linear (so both neighbours are in range), not for cubic."""
        if self.P == 0:  # one output: a constant coordinate
            num = min(max(self.Q, 0), (self.n - 1) * self.R) if clamp_coordinate else self.Q
            return num // self.R, te.const((num % self.R) / self.R, "float32")
        num = self.num(o)
        lo, hi = self.num_range
        if clamp_coordinate:
            num = _clamp_num(num, lo, hi, (self.n - 1) * self.R)
        if self.R == 1:
            return num, te.const(0.0, "float32")
        frac = te.cast("float32", te.floormod(num, self.R)) * (1.0 / self.R)
        return te.floordiv(num, self.R), frac

    def tap(self, i, k: int, lo_floor: int, hi_floor: int):
        """Index ``i + k`` clamped to the input (edge replication)."""
        e = i + k if k else i
        if isinstance(e, int):
            return min(max(e, 0), self.n - 1)
        return _clamp(e, lo_floor + k, hi_floor + k, self.n)

    def floor_range(self, clamp_coordinate: bool):
        lo, hi = self.num_range
        if clamp_coordinate:
            lo, hi = max(lo, 0), min(hi, (self.n - 1) * self.R)
        return lo // self.R, hi // self.R


def _clamp_num(num, lo, hi, top):
    if lo < 0:
        num = te.max(num, 0)
    if hi > top:
        num = te.min(num, top)
    return num


def _cubic_weights(t, A: float):
    """Keys' cubic convolution weights of the taps -1, 0, 1, 2 at fraction ``t``."""
    t1, u, u1 = t + 1.0, 1.0 - t, 2.0 - t
    w0 = ((t1 * A - 5.0 * A) * t1 + 8.0 * A) * t1 - 4.0 * A
    w1 = (t * (A + 2.0) - (A + 3.0)) * t * t + 1.0
    w2 = (u * (A + 2.0) - (A + 3.0)) * u * u + 1.0
    w3 = ((u1 * A - 5.0 * A) * u1 + 8.0 * A) * u1 - 4.0 * A
    return [w0, w1, w2, w3]


def resize2d(
    data: Tensor,
    size,
    layout: str = "NCHW",
    method: str = "linear",
    coordinate_transformation_mode: str = "half_pixel",
    rounding_method: str = "",
    cubic_alpha: float = -0.5,  # the op's default (ONNX: cubic_coeff_a=-0.75, passed)
    scales=None,
) -> Tensor:
    """``resize`` of the H and W dims of an NCHW / NHWC tensor to ``size`` (oh, ow).

    ``scales`` (sh, sw) are ONNX's scales when the model gives them (the coordinate transform
    divides by the scale, which may differ from ``size / input``); None uses ``size / input``.
    Linear clamps the source coordinate to the input; nearest and cubic clamp the indices
    (edge replication), as onnxruntime does.
    """
    op = "image.resize2d"
    if layout not in ("NCHW", "NHWC") or data.ndim != 4:
        raise TensorError(f"{op}: needs a 4-D NCHW or NHWC tensor, got {layout} {data.shape}")
    if method not in METHODS:
        raise TensorError(f"{op}: method {method!r} is not supported; use one of {METHODS}")
    hi, wi = layout.index("H"), layout.index("W")
    scales = (None, None) if scales is None else tuple(scales)
    axes = [
        _Axis(coordinate_transformation_mode, int(size[j]), data.shape[a], scales[j])
        for j, a in enumerate((hi, wi))
    ]
    shape = list(data.shape)
    shape[hi], shape[wi] = int(size[0]), int(size[1])
    rounding = rounding_method or "round"
    if rounding not in ROUNDING_METHODS:
        raise TensorError(f"{op}: rounding_method {rounding!r} is not supported")

    def at(i, y, x):
        idx = list(i)
        idx[hi], idx[wi] = y, x
        return data[tuple(idx)]

    if method == "nearest_neighbor":

        def f(*i):
            return at(i, axes[0].nearest(i[hi], rounding), axes[1].nearest(i[wi], rounding))

    else:
        linear = method == "linear"
        ks = (0, 1) if linear else (-1, 0, 1, 2)

        def f(*i):
            taps = []
            for ax, o in zip(axes, (i[hi], i[wi])):
                base, frac = ax.floor_and_frac(o, linear)
                lo, hi_ = ax.floor_range(linear)
                ws = [1.0 - frac, frac] if linear else _cubic_weights(frac, float(cubic_alpha))
                taps.append([(ax.tap(base, k, lo, hi_), w) for k, w in zip(ks, ws)])
            out = None
            for y, wy in taps[0]:
                row = None
                for x, wx in taps[1]:
                    term = at(i, y, x) * wx
                    row = term if row is None else row + term
                term = row * wy
                out = term if out is None else out + term
            return out

    return compute(tuple(shape), f, "resize", "i", tag="injective")
