"""Scalar data types: the table of supported dtypes and the promotion rule."""

from __future__ import annotations

import numpy as np

# name -> (kind, bits); kind is "float", "int", "uint" or "bool".
DTYPES: dict[str, tuple[str, int]] = {
    "float16": ("float", 16),
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
    return DTYPES[dtype][0] in ("int", "uint")


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def bits(dtype: str) -> int:
    return DTYPES[dtype][1]


def itemsize(dtype: str) -> int:
    """Bytes per element (bool is stored as one byte)."""
    return max(1, DTYPES[dtype][1] // 8)


def to_numpy(dtype: str) -> np.dtype:
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
    return a if ba >= bb else b
