"""LLVM types of tensorir dtypes and the value helpers every part of the expression emitter
uses: register and memory types, signedness, lane counts, the vector loop variable's binding
(:class:`VecVar`) and scalar integer constants (re-exported by :mod:`codegen.llvm_expr`).

bfloat16 is ``float`` in registers and ``i16`` in memory; see :mod:`codegen.llvm_expr`.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from tensorir.dtype import DTYPES

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
PTR = ir.PointerType()
# Fast-math flags as TVM's "fast", minus nnan/ninf: reassociation lets LLVM vectorize reductions
# and contract forms FMAs, while -inf (max-pool init, padding) and NaN keep their meaning.
FMF = ("reassoc", "contract", "arcp", "afn", "nsz")

_SCALAR = {
    "float16": ir.HalfType(),
    "bfloat16": ir.FloatType(),  # a register; memory is i16 (see the module docstring)
    "float32": ir.FloatType(),
    "float64": ir.DoubleType(),
    "int8": I8,
    "int16": ir.IntType(16),
    "int32": I32,
    "int64": I64,
    "uint8": I8,
    "uint32": I32,
    "bool": I1,
}


def scalar_type(dtype: str) -> ir.Type:
    """Register type of a dtype (bool is i1)."""
    try:
        return _SCALAR[dtype]
    except KeyError:
        raise ValueError(f"the LLVM backend does not support dtype {dtype!r}") from None


def mem_type(dtype: str) -> ir.Type:
    """In-memory element type (bool is stored as one byte, bfloat16 as its 16 bits)."""
    if dtype == "bfloat16":
        return I16
    return I8 if dtype == "bool" else scalar_type(dtype)


def reg_type(dtype: str, wide: bool) -> ir.Type:
    return I64 if wide and dtype == "int32" else scalar_type(dtype)


def is_signed(dtype: str) -> bool:
    return DTYPES[dtype][0] == "int"


def is_float_dtype(dtype: str) -> bool:
    return DTYPES[dtype][0] == "float"


@dataclass(frozen=True)
class VecVar:
    """The binding of the vector loop variable: lane ``l`` has the value ``base + l``."""

    base: ir.Value  # i64 scalar
    lanes: int


def lanes_of(v: ir.Value) -> int:
    return v.type.count if isinstance(v.type, ir.VectorType) else 0


def with_lanes(t: ir.Type, lanes: int) -> ir.Type:
    return ir.VectorType(t, lanes) if lanes else t


def elem_type(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t


def is_scalar_const(v: ir.Value) -> bool:
    """Whether ``v`` is a scalar integer (or i1) constant with a known value."""
    return type(v) is ir.Constant and isinstance(v.type, ir.IntType) and isinstance(v.constant, int)
