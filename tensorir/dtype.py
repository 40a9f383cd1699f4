"""Scalar data types: the table of supported dtypes and the promotion rule."""

from __future__ import annotations

import numpy as np

# name -> (kind, bits); kind is "float", "int", "uint" or "bool".
DTYPES: dict[str, tuple[str, int]] = {
    "float16": ("float", 16),
    "bfloat16": ("float", 16),
    "float32": ("float", 32),
    "float64": ("float", 64),
    "int8": ("int", 8),
    "int16": ("int", 16),
    "int32": ("int", 32),
    "int64": ("int", 64),
    "uint8": ("uint", 8),
    "uint32": ("uint", 32),
    "bool": ("bool", 1),
}


def check_dtype(dtype: str) -> str:
    """Return ``dtype`` if it is supported, else raise a ValueError listing the supported ones."""
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; use one of {sorted(DTYPES)}")
    return dtype


def is_float(dtype: str) -> bool:
    return DTYPES[dtype][0] == "float"


def is_int(dtype: str) -> bool:
    """True for signed and unsigned integers (not bool)."""
    if dtype in _INT_DTYPES:  # a set lookup first: the simplifier asks this for every node
        return True
    return DTYPES[dtype][0] in ("int", "uint")  # KeyError for an unknown dtype, as ever


_INT_DTYPES = frozenset(name for name, (kind, _) in DTYPES.items() if kind in ("int", "uint"))


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def bits(dtype: str) -> int:
    return DTYPES[dtype][1]


def itemsize(dtype: str) -> int:
    """Bytes per element (bool is stored as one byte)."""
    return max(1, DTYPES[dtype][1] // 8)


LOW_PRECISION = ("float16", "bfloat16")
"""The 16-bit float dtypes: stored in 16 bits, computed in float32 by the references."""

# Comparison tolerance (rtol, atol) of a result in each float dtype against a float32/float64
# reference, for values of magnitude about 1 and sums of up to a few hundred terms: float16
# keeps 11 significant bits (relative step 2**-11 = 4.9e-4), bfloat16 8 (2**-8 = 3.9e-3); a
# few roundings of the inputs and of the result add up to a few steps.
_TOLERANCE = {
    "float16": (1e-2, 1e-2),
    "bfloat16": (5e-2, 5e-2),
    "float32": (1e-4, 1e-5),
    "float64": (1e-7, 1e-9),
}


def is_low_precision(dtype: str) -> bool:
    """True for float16 and bfloat16."""
    return dtype in LOW_PRECISION


def tolerance(dtype: str) -> tuple[float, float]:
    """``(rtol, atol)`` that fits a result in ``dtype`` compared with a float32 reference.

    The one home of per-dtype tolerances: tests and accuracy checks of low-precision kernels
    use it with ``np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)``. Integer and
    bool results are exact: ``(0, 0)``.
    """
    check_dtype(dtype)
    return _TOLERANCE.get(dtype, (0.0, 0.0))


def bfloat16_numpy() -> np.dtype:
    """numpy's bfloat16 dtype, from the optional ``ml_dtypes`` package (numpy has none).

    Raises
    ------
    ValueError
        ``ml_dtypes`` is not installed; :func:`float32_to_bfloat16_bits` and
        :func:`bfloat16_bits_to_float32` convert through uint16 bits without it.
    """
    try:
        import ml_dtypes
    except ImportError:
        raise ValueError(
            "bfloat16 arrays on the host need the ml_dtypes package (pip install ml-dtypes; "
            "onnx installs it); without it pass uint16 bits from "
            "tensorir.dtype.float32_to_bfloat16_bits"
        ) from None
    return np.dtype(ml_dtypes.bfloat16)


def float32_to_bfloat16_bits(x) -> np.ndarray:
    """The bfloat16 bit patterns (uint16) of float32 values, rounded to nearest even (what
    the generated code and ml_dtypes do; NaN stays a quiet NaN)."""
    f = np.asarray(x, dtype=np.float32)
    u = f.reshape(-1).view(np.uint32).astype(np.uint64).reshape(f.shape)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return np.where(np.isnan(f), 0x7FC0, rounded).astype(np.uint16)


def bfloat16_bits_to_float32(bits) -> np.ndarray:
    """float32 values of bfloat16 bit patterns (uint16): exact."""
    b = np.asarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).reshape(-1).view(np.float32).reshape(b.shape)


TF32_DROPPED_BITS = 13  # float32 keeps 23 mantissa bits, TF32 10
_TF32_KEPT = np.uint32(0xFFFFFFFF << TF32_DROPPED_BITS & 0xFFFFFFFF)  # sign, exponent, 10 bits


def truncate_to_tf32(x) -> np.ndarray:
    """float32 values with their low 13 mantissa bits cleared: what Hopper's TF32 ``wgmma``
    reads of each float32 operand in shared memory."""
    f = np.require(x, np.float32, "C")
    return (f.view(np.uint32) & _TF32_KEPT).view(np.float32)


def round_to_tf32(x) -> np.ndarray:
    """float32 values rounded to TF32's 10 mantissa bits, to nearest with ties away from zero
    (still float32): what wmma's ``__float_to_tf32`` (``cvt.rna.tf32.f32``) does. Infinities
    and NaN stay as they are."""
    f = np.require(x, np.float32, "C")
    # Sign and magnitude: adding half a TF32 step to the magnitude's bits rounds it up from
    # the tie on, whichever the sign.
    rounded = (f.view(np.uint32) + np.uint32(1 << (TF32_DROPPED_BITS - 1))) & _TF32_KEPT
    return np.where(np.isfinite(f), rounded.view(np.float32), f)


def to_numpy(dtype: str) -> np.dtype:
    if dtype == "bfloat16":
        return bfloat16_numpy()
    return np.dtype("bool" if dtype == "bool" else dtype)


def promote(a: str, b: str) -> str:
    """The dtype of a binary arithmetic result: float beats int, wider beats narrower.

    A signed/unsigned integer mix follows numpy (``np.result_type``): the smallest signed type
    that holds both ranges, so uint8 + int8 is int16 and uint32 + int32 is int64 (a plain
    "wider wins" would wrap uint8 values above 127 to negative int8).
    """
    if a == b:
        return a
    ka, ba = DTYPES[a]
    kb, bb = DTYPES[b]
    if {ka, kb} == {"int", "uint"}:
        return str(np.result_type(to_numpy(a), to_numpy(b)))
    rank = {"bool": 0, "uint": 1, "int": 2, "float": 3}
    if rank[ka] != rank[kb]:
        return a if rank[ka] > rank[kb] else b
    if {a, b} == set(LOW_PRECISION):
        return "float32"  # neither holds the other (as numpy with ml_dtypes)
    return a if ba >= bb else b
