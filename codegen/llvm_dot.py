"""Integer dot products for the LLVM backend: which reduction loops map to ``vpdpbusd``.

Pure functions over loop IR (no llvmlite), as :mod:`codegen.llvm_vector`: they decide; the
emission is in :mod:`codegen.llvm`.

x86's VNNI (AVX-512 VNNI, AVX-VNNI) ``vpdpbusd acc, a, b`` adds to each int32 lane of ``acc``
the sum of four products ``u8(a[4j+k]) * s8(b[4j+k])``. A serial reduction loop

    for k in range(K):
        C[c] = C[c] + int32(U[u + k]) * int32(S[s + k])      # U uint8, S int8, c free of k

is a dot product of two contiguous byte runs, so it runs as ``K // (4 * lanes)`` vpdpbusd over
whole vectors, one horizontal add, and a scalar tail (the *horizontal* form).

The *vertical* form is what tuned int8 kernels use (oneDNN's and TVM's x86 int8 schedules): a
vectorized loop over ``lanes`` outputs around a reduction loop of 4 (or a multiple of 4)

    for o in range(lanes):            # vectorized: the int32 lanes are `lanes` outputs
        for k in range(4):
            C[c + o] = C[c + o] + int32(X[.., o, k]) * int32(Y[.., o, k])

runs as one vpdpbusd per 4 reduction steps: each operand becomes ``lanes`` groups of 4 bytes,
one group per output (an operand that does not depend on ``o`` is one group broadcast to all
lanes, e.g. 4 input channels of NHWC data), and the accumulators stay in the lanes: no
horizontal add. One operand must be uint8 and the other int8, in either order.

Integer addition is associative (mod 2**32, wrapping as the scalar loop does, and vpdpbusd
does not saturate), so both forms are bit-exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorir.expr import Cast, Expr, Var, walk
from tensorir.loops import Buffer, For, Load, Store

from .dot_product import accumulated_products, match_byte_dot
from .llvm_vector import depends_on, stride

__all__ = [
    "DOT_GROUP", "DOT_WIDTHS", "MAX_LANE_GROUPS", "REQUIRES_HEADER", "Int8Dot", "Int8LaneDot",
    "dot_product_features", "dot_product_width", "match_int8_dot", "match_int8_lane_dot",
]  # fmt: skip

DOT_WIDTHS = {512: "llvm.x86.avx512.vpdpbusd.512", 256: "llvm.x86.avx512.vpdpbusd.256"}
"""Vector width in bits -> the vpdpbusd intrinsic (AVX-VNNI shares the 256-bit one)."""


REQUIRES_HEADER = "; autosched-requires-cpu-features: "
"""The first line of LLVM IR whose code uses optional CPU instructions, naming the features
(``"a+b|c"``: a and b, or c): the runtime refuses to compile such IR on a CPU without them
(LLVM would abort the process)."""


_WIDTH_NEEDS = {
    512: ({"avx512vnni", "avx512bw"},),
    256: ({"avxvnni"}, {"avx512vnni", "avx512vl"}),  # AVX-VNNI, or AVX-512 VNNI on 256 bits
}


def dot_product_features(cpu_features) -> tuple[int, str] | None:
    """The widest vpdpbusd the CPU has (LLVM feature names) and what any CPU running it needs
    (``"a+b|c"``: a and b, or c), or None for the scalar loop."""
    feats = set(cpu_features or ())
    for width, alternatives in _WIDTH_NEEDS.items():
        if any(need <= feats for need in alternatives):
            return width, "|".join("+".join(sorted(need)) for need in alternatives)
    return None


def dot_product_width(cpu_features) -> int | None:
    """The widest vpdpbusd the CPU has (LLVM feature names), or None for the scalar loop."""
    found = dot_product_features(cpu_features)
    return None if found is None else found[0]


@dataclass(frozen=True)
class Int8Dot:
    """A matched reduction loop: ``acc[acc_index] += sum_k u8[u_index] * s8[s_index]``."""

    acc: Buffer
    acc_index: object
    unsigned: Load
    signed: Load


def match_int8_dot(s: For, min_extent: int) -> Int8Dot | None:
    """The dot product of a serial loop ``s`` as the module docstring shows it, or None.

    ``min_extent`` is the bytes of one vector (a shorter loop gains nothing)."""
    if s.extent < min_extent or (dot := match_byte_dot(s)) is None:
        return None
    by_dtype = {dot.a.buffer.dtype: dot.a, dot.b.buffer.dtype: dot.b}
    if set(by_dtype) != {"uint8", "int8"}:
        return None  # vpdpbusd multiplies unsigned by signed bytes
    return Int8Dot(dot.acc, dot.acc_index, by_dtype["uint8"], by_dtype["int8"])


DOT_GROUP = 4
"""Bytes each vpdpbusd lane sums: the reduction steps one instruction does per output."""

MAX_LANE_GROUPS = 8
"""The vertical form emits one vpdpbusd chain per ``lanes`` outputs, unrolled: at most this
many chains per vectorized loop (a longer loop keeps the plain vectorizer)."""


@dataclass(frozen=True)
class Int8LaneDot:
    """A matched vertical dot product (module docstring): the vectorized loop ``lane`` over
    outputs around the reduction loop ``k``; ``acc[acc_index]`` is contiguous in ``lane``.

    ``unsigned`` / ``signed`` are the uint8 / int8 operands (byte-typed expressions, the
    int32 casts stripped); an operand not depending on ``lane`` is broadcast."""

    lane: Var
    lane_extent: int
    k: Var
    k_extent: int
    acc: Buffer
    acc_index: Expr
    unsigned: Expr
    signed: Expr


def _widened_byte(e: Expr) -> Expr | None:
    if isinstance(e, Cast) and e.dtype == "int32" and e.value.dtype in ("int8", "uint8"):
        return e.value
    return None


def _lane_operand_ok(e: Expr, lane: Var, k: Var) -> bool:
    """An operand varying across the lanes must be a load, 4 bytes per lane in ``k`` order
    reachable by the vector emitter (any affine index); one uniform in the lanes may be any
    byte expression (it is evaluated 4 times, or once as a 4-byte load when contiguous)."""
    if not depends_on(e, lane):
        return True
    return (
        isinstance(e, Load)
        and stride(e.index, lane) is not None
        and (stride(e.index, k) is not None)
    )


def match_int8_lane_dot(s: For, lanes: int) -> Int8LaneDot | None:
    """The vertical dot product of a vectorized loop ``s`` as the module docstring shows it
    (``lanes`` int32 lanes per vpdpbusd; the loop a multiple of them, at most
    ``MAX_LANE_GROUPS`` times), or None."""
    if s.kind != "vectorized" or s.extent % lanes or s.extent // lanes > MAX_LANE_GROUPS:
        return None
    inner = s.body
    if not (isinstance(inner, For) and inner.kind in ("serial", "unrolled")):
        return None
    if inner.extent % DOT_GROUP or not isinstance(inner.body, Store):
        return None
    st, lane, k = inner.body, s.var, inner.var
    if st.buffer.dtype != "int32" or depends_on(st.index, k) or stride(st.index, lane) != 1:
        return None
    for prod in accumulated_products(st):
        x, y = _widened_byte(prod.a), _widened_byte(prod.b)
        if x is None or y is None or {x.dtype, y.dtype} != {"uint8", "int8"}:
            continue
        u, sg = (x, y) if x.dtype == "uint8" else (y, x)
        if any(_reads(e, st.buffer) for e in (u, sg)):
            continue
        if _lane_operand_ok(u, lane, k) and _lane_operand_ok(sg, lane, k):
            return Int8LaneDot(lane, s.extent, k, inner.extent, st.buffer, st.index, u, sg)
    return None


def _reads(e: Expr, buf: Buffer) -> bool:
    return any(isinstance(n, Load) and n.buffer is buf for n in walk(e))
