"""Ops whose indices are data: ``take`` (embedding lookups, ``x[:, -1]``) and ``gather``
(ONNX GatherElements), each with its te compute, shape rule and numpy reference.

The index tensor is an input like any other (an ``int64`` graph input such as ``input_ids``, or
a constant), so the compute reads ``data[..., indices[i], ...]``: a load whose index is data.
Lowering guards such a load (``tensorir.loops.CheckedIndex``): an index outside the table is a
run-time error naming the value and the tensor, never a read past it (docs/graph-ops.md).

``mode`` says what an index outside ``[0, n)`` of the indexed axis means:

- ``"fast"``: ``[-n, 0)`` counts from the end, as in numpy and ONNX; anything else is an error
  (the checked load at run time, an IndexError in the reference). Relay's "fast" does no check;
  ours keeps the check unless ``AUTOSCHED_CHECK_INDICES=0``;
- ``"clip"`` (Relay's default): clamped to ``[0, n - 1]``;
- ``"wrap"``: taken modulo ``n``.
"""

from __future__ import annotations

import numpy as np

from .. import te
from ..dtype import is_int
from ..tensor import Tensor, TensorError
from ._util import compute
from .shape_rules import ShapeError

__all__ = [
    "MODES",
    "gather",
    "gather_ref",
    "gather_rule",
    "normalize_index",
    "take",
    "take_ref",
    "take_rule",
]

MODES = ("fast", "clip", "wrap")


def _axis(axis: int, ndim: int, op: str, error=TensorError) -> int:
    if not -ndim <= axis < ndim:
        raise error(f"{op}: attribute 'axis' = {axis} is out of range for {ndim} dims")
    return axis % ndim


def _check_mode(mode: str, op: str, error=TensorError) -> None:
    if mode not in MODES:
        raise error(f"{op}: attribute 'mode' = {mode!r} is not supported; use one of {MODES}")


def normalize_index(k, n: int, mode: str):
    """The index expression ``k`` (a te expression, any integer dtype) mapped into the axis of
    extent ``n`` as ``mode`` says (see the module docstring)."""
    if mode == "clip":
        return te.min(te.max(k, te.const(0, k.dtype)), te.const(n - 1, k.dtype))
    if mode == "wrap":
        return te.floormod(k, te.const(n, k.dtype))
    # select, not if_then_else: both branches are safe, and a select vectorizes
    return te.select(k < te.const(0, k.dtype), k + te.const(n, k.dtype), k)


# --- take ------------------------------------------------------------------------------------


def take(data: Tensor, indices: Tensor, axis: int = 0, mode: str = "clip") -> Tensor:
    """``T_take``: ``data`` indexed along ``axis`` by every element of ``indices``.

    The output shape is ``data.shape[:axis] + indices.shape + data.shape[axis + 1:]`` (a 0-d
    ``indices`` drops the axis), as ``np.take``.
    """
    if not is_int(indices.dtype):
        raise TensorError(f"take: indices must be an integer tensor, got {indices.dtype}")
    _check_mode(mode, "take")
    ax = _axis(axis, data.ndim, "take")
    q = indices.ndim
    n = int(data.shape[ax])
    shape = tuple(data.shape[:ax]) + tuple(indices.shape) + tuple(data.shape[ax + 1 :])

    def f(*i):
        k = normalize_index(indices[tuple(i[ax : ax + q])], n, mode)
        return data[tuple(i[:ax]) + (k,) + tuple(i[ax + q :])]

    return compute(shape, f, "T_take", tag="injective")


def take_rule(shapes, dtypes, a):
    data, indices = shapes
    if dtypes[1] not in ("int32", "int64"):
        raise ShapeError(f"indices must be int32 or int64, got {dtypes[1]}")
    _check_mode(a["mode"], "take", ShapeError)
    ax = _axis(int(a["axis"]), len(data), "take", ShapeError)
    return tuple(data[:ax]) + tuple(indices) + tuple(data[ax + 1 :]), dtypes[0]


def _normalized(indices: np.ndarray, n: int, mode: str, op: str, what: str) -> np.ndarray:
    k = indices.astype(np.int64)
    if mode == "clip":
        return np.clip(k, 0, n - 1)
    if mode == "wrap":
        return np.mod(k, n)
    bad = (k < -n) | (k >= n)
    if bad.any():
        value = int(k[bad].reshape(-1)[0])
        raise IndexError(
            f"{op}: index {value} is out of range for axis {what} of size {n} "
            f"(valid: {-n}..{n - 1})"
        )
    return np.where(k < 0, k + n, k)


def take_ref(a, out_shape, data, indices):
    ax = int(a["axis"]) % data.ndim
    k = _normalized(np.asarray(indices), data.shape[ax], a["mode"], "take", f"{ax} of the data")
    return np.take(data, k, axis=ax).reshape(out_shape)


# --- gather (ONNX GatherElements) --------------------------------------------------------------


def gather(data: Tensor, axis: int, indices: Tensor, mode: str = "fast") -> Tensor:
    """``T_gather``: ``out[i] = data[i[:axis], indices[i], i[axis+1:]]`` (Relay's gather, ONNX's
    GatherElements); the output has the shape of ``indices``."""
    if not is_int(indices.dtype):
        raise TensorError(f"gather: indices must be an integer tensor, got {indices.dtype}")
    _check_mode(mode, "gather")
    ax = _axis(axis, data.ndim, "gather")
    if indices.ndim != data.ndim:
        raise TensorError(
            f"gather: indices {list(indices.shape)} must have the rank of data {list(data.shape)}"
        )
    n = int(data.shape[ax])

    def f(*i):
        k = normalize_index(indices[tuple(i)], n, mode)
        return data[tuple(i[:ax]) + (k,) + tuple(i[ax + 1 :])]

    return compute(tuple(indices.shape), f, "T_gather", tag="injective")


def gather_rule(shapes, dtypes, a):
    data, indices = shapes
    if dtypes[1] not in ("int32", "int64"):
        raise ShapeError(f"indices must be int32 or int64, got {dtypes[1]}")
    _check_mode(a["mode"], "gather", ShapeError)
    ax = _axis(int(a["axis"]), len(data), "gather", ShapeError)
    if len(indices) != len(data) or any(
        i > d for k, (i, d) in enumerate(zip(indices, data)) if k != ax
    ):
        raise ShapeError(
            f"indices {tuple(indices)} must have the rank of data {tuple(data)} and no larger "
            f"dims outside axis {ax}"
        )
    return tuple(indices), dtypes[0]


def gather_ref(a, out_shape, data, indices):
    ax = int(a["axis"]) % data.ndim
    k = _normalized(np.asarray(indices), data.shape[ax], a["mode"], "gather", f"{ax} of the data")
    # take_along_axis needs the other dims equal: cut data to the indices' extents there.
    cut = tuple(slice(None) if d == ax else slice(0, s) for d, s in enumerate(k.shape))
    return np.take_along_axis(data[cut], k, axis=ax)
