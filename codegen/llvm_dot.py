"""Integer dot products for the LLVM backend: which reduction loops map to ``vpdpbusd``.

Pure functions over loop IR (no llvmlite), as :mod:`codegen.llvm_vector`: they decide; the
emission is in :mod:`codegen.llvm`.

x86's VNNI (AVX-512 VNNI, AVX-VNNI) ``vpdpbusd acc, a, b`` adds to each int32 lane of ``acc``
the sum of four products ``u8(a[4j+k]) * s8(b[4j+k])``. A serial reduction loop

    for k in range(K):
        C[c] = C[c] + int32(U[u + k]) * int32(S[s + k])      # U uint8, S int8, c free of k

is a dot product of two contiguous byte runs, so it runs as ``K // (4 * lanes)`` vpdpbusd over
whole vectors, one horizontal add, and a scalar tail. Integer addition is associative (mod
2**32, wrapping as the scalar loop does), so the result is bit-exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorir.loops import Buffer, For, Load

from .dot_product import match_byte_dot

__all__ = [
    "DOT_WIDTHS", "REQUIRES_HEADER", "Int8Dot", "dot_product_features", "dot_product_width",
    "match_int8_dot",
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
