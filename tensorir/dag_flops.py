"""The FLOP estimate of a ComputeDAG's ops (Ansor notes 1.3, TVM's FlopEstimator).

An op's ``FLOP`` attribute wins; otherwise every arithmetic node of the op's output type counts
once per output element and reduction step. A node it cannot count makes the estimate -1.0.
"""

from __future__ import annotations

import math

from .expr import (
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    IfThenElse,
    Not,
    Reduce,
    Select,
    TensorRead,
    Var,
)


class _FlopFail(Exception):
    pass


def _type_code(dtype: str) -> str:
    from .dtype import DTYPES

    return DTYPES[dtype][0]


def _flop_count(ops) -> float:
    total = 0.0
    try:
        for op in ops:
            if "FLOP" in op.attrs:
                total += float(op.attrs["FLOP"])
                continue
            code = _type_code(op.dtype)
            total += math.prod(op.shape) * _flops(op.body, code)
    except _FlopFail:
        return -1.0
    return total


def _flops(e: Expr, code: str) -> float:
    """FLOPs of one evaluation of ``e`` in an op whose output type code is ``code``."""
    if isinstance(e, Var | Const | TensorRead):
        return 0.0
    if isinstance(e, Binary):
        # Integer index arithmetic inside a float op does not count (TVM's FlopEstimator).
        base = 0.0 if (_type_code(e.a.dtype) != code and _type_code(e.b.dtype) != code) else 1.0
        return base + _flops(e.a, code) + _flops(e.b, code)
    if isinstance(e, Not):
        return (1.0 if _type_code(e.dtype) == code else 0.0) + _flops(e.a, code)
    if isinstance(e, Select):
        return _flops(e.cond, code) + max(_flops(e.t, code), _flops(e.f, code))
    if isinstance(e, Cast):
        return _flops(e.value, code)
    if isinstance(e, IfThenElse):  # a call in TVM: its arguments count, the call does not
        return _flops(e.cond, code) + _flops(e.t, code) + _flops(e.f, code)
    if isinstance(e, Call):
        return sum(_flops(a, code) for a in e.args)
    if isinstance(e, Reduce):
        n_iter = math.prod(ax.extent for ax in e.axes)
        combiner = 1.0 if _type_code(e.dtype) == code else 0.0  # x + y, max(x, y), min(x, y)
        return n_iter * (combiner + _flops(e.source, code))
    raise _FlopFail(type(e).__name__)
