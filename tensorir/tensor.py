"""The te-style front door: ``placeholder``, ``compute``, ``reduce_axis`` and reducers."""

from __future__ import annotations

import inspect
import weakref
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .bounds_check import out_of_range_read, unbound_variable
from .dtype import check_dtype, is_float
from .expr import Const, Expr, IterVar, Reduce, TensorRead, Var, as_expr, const


class TensorError(ValueError):
    """A tensor expression is malformed (wrong arity, bad shape, misplaced reduction...)."""


# What made each axis variable: "reduce" (te.reduce_axis) or the name of the compute it is an
# axis of; lets compute() say why a variable is unbound. Weak: it never keeps an expression alive.
_AXIS_OWNER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class PlaceholderOp:
    """An input of the computation."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class ComputeOp:
    """``name[axes] = body``; ``body`` may be a top-level Reduce over ``reduce_axes``."""

    name: str
    axes: tuple[IterVar, ...]
    body: Expr
    tag: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def reduce_axes(self) -> tuple[IterVar, ...]:
        return self.body.axes if isinstance(self.body, Reduce) else ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(ax.extent for ax in self.axes)

    @property
    def dtype(self) -> str:
        return self.body.dtype

    @cached_property
    def input_tensors(self) -> tuple[Tensor, ...]:
        """Tensors read by the body, in first-read order, without duplicates.

        Cached on the op (its body never changes): schedule replay asks for it on every step
        of every sampled state, and walking the body each time was a fifth of sampling."""
        from .expr import walk

        seen: dict[int, Tensor] = {}
        for node in walk(self.body):
            if isinstance(node, TensorRead) and id(node.tensor) not in seen:
                seen[id(node.tensor)] = node.tensor
        return tuple(seen.values())


@dataclass(frozen=True, eq=False)
class Tensor:
    """The output of an op. Index it (``A[i, j]``) inside a compute body."""

    op: PlaceholderOp | ComputeOp

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.op.shape

    @property
    def dtype(self) -> str:
        return self.op.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> TensorRead:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise TensorError(
                f"tensor {self.name!r} has {len(self.shape)} dimensions {list(self.shape)} "
                f"but was indexed with {len(indices)} indices; give one index per dimension"
            )
        idx = []
        for k, i in enumerate(indices):
            e = as_expr(i, "int32")
            if is_float(e.dtype):
                raise TensorError(
                    f"index {k} of tensor {self.name!r} has float dtype {e.dtype}; "
                    "indices must be integers (cast with te.cast('int32', ...))"
                )
            idx.append(e)
        return TensorRead(self, tuple(idx), self.dtype)

    def __call__(self, *indices) -> TensorRead:
        """``Y(i, j)`` is ``Y[i, j]``, as TVM and TOPI write it (``lambda *i: Y(*i)``)."""
        return self[indices]

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {list(self.shape)}, {self.dtype})"


def _exact_int(value) -> int | None:
    """``value`` as an int when it is one (2, np.int64(2), 2.0), else None (2.5, '2', 'abc')."""
    if isinstance(value, str | bytes):
        return None  # int('2') would parse it, and a str shape is iterable character by character
    if type(value).__name__ in ("bool", "bool_"):
        return None  # True == 1: (True, 3) is a mistake, not a (1, 3) shape (numpy's bool too)
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        return None
    return as_int if as_int == value else None


def _check_shape(shape, what: str) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    if isinstance(shape, str | bytes):
        raise TensorError(f"{what}: shape must be a tuple of ints, got {shape!r}")
    try:
        dims = tuple(_exact_int(s) for s in shape)
    except TypeError as exc:
        raise TensorError(f"{what}: shape must be a tuple of ints, got {shape!r}") from exc
    if any(d is None or d <= 0 for d in dims):
        raise TensorError(f"{what}: every dimension must be a positive int, got {list(shape)}")
    return dims


def _check_name(name, what: str) -> None:
    """Names key stages, steps, records and generated code: only a str is one."""
    if not isinstance(name, str):
        raise TensorError(f"{what}: name must be a string, got {type(name).__name__} {name!r}")


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given shape and dtype."""
    _check_name(name, "placeholder")
    check_dtype(dtype)
    return Tensor(PlaceholderOp(name, _check_shape(shape, f"placeholder {name!r}"), dtype))


def reduce_axis(dom, name: str = "rv") -> IterVar:
    """A reduction axis over ``range(lo, hi)`` given as ``(lo, hi)``."""
    _check_name(name, "reduce_axis")
    try:
        lo, hi = (_exact_int(v) for v in dom)
    except (TypeError, ValueError) as exc:
        raise TensorError(f"reduce_axis {name!r}: dom must be (lo, hi), got {dom!r}") from exc
    if lo is None or hi is None:
        raise TensorError(f"reduce_axis {name!r}: dom must be two ints (lo, hi), got {dom!r}")
    if hi <= lo:
        raise TensorError(f"reduce_axis {name!r}: empty range [{lo}, {hi})")
    ax = IterVar(Var(name), lo, hi - lo, "reduce")
    _AXIS_OWNER[ax.var] = "reduce"
    return ax


def compute(shape, fcompute, name: str = "compute", tag: str = "", attrs=None) -> Tensor:
    """A tensor whose element at ``indices`` is ``fcompute(*indices)``.

    Axis names are taken from the parameter names of ``fcompute`` (as in TVM), so
    ``lambda i, j: ...`` gives axes ``i`` and ``j``.
    """
    _check_name(name, "compute")
    shape = _check_shape(shape, f"compute {name!r}")
    params = list(inspect.signature(fcompute).parameters.values())
    if params and params[0].kind == inspect.Parameter.VAR_POSITIONAL:
        names = [f"ax{k}" for k in range(len(shape))]
    else:
        names = [p.name for p in params]
    if len(names) != len(shape):
        raise TensorError(
            f"compute {name!r}: fcompute takes {len(names)} indices but the shape "
            f"{list(shape)} has {len(shape)} dimensions"
        )
    axes = tuple(IterVar(Var(n), 0, ext, "spatial") for n, ext in zip(names, shape, strict=True))
    if len(set(names)) != len(names):
        raise TensorError(f"compute {name!r}: axis names {names} must be unique")
    body = fcompute(*(ax.var for ax in axes))
    if isinstance(body, Tensor):
        raise TensorError(f"compute {name!r}: fcompute returned a tensor; index it, e.g. A[i]")
    body = as_expr(body)
    _check_reductions(body, name)
    if isinstance(body, Reduce):
        red_names = [ax.name for ax in body.axes]
        clash = set(red_names) & set(names)
        if clash or len(set(red_names)) != len(red_names):
            raise TensorError(
                f"compute {name!r}: reduce axis names {red_names} must be unique and differ "
                f"from the spatial axes {names}"
            )
    _check_variables(body, axes, name)
    _check_reads(body, axes, name)
    for ax in axes:
        _AXIS_OWNER[ax.var] = name
    return Tensor(ComputeOp(name, axes, body, tag, dict(attrs or {})))


def _check_variables(body: Expr, axes: tuple[IterVar, ...], name: str) -> None:
    """Every variable of ``body`` must be an axis of this compute or of its reducer."""
    found = unbound_variable(body, axes, _AXIS_OWNER)
    if found is None:
        return
    var, owner = found
    own = [ax.name for ax in axes]
    if owner == "reduce":
        reduce_axes = [ax.name for ax in body.axes] if isinstance(body, Reduce) else []
        where = f"reduces over {reduce_axes}" if reduce_axes else "has no reducer"
        raise TensorError(
            f"compute {name!r}: reduce axis {var.name!r} is used outside a reducer (the body "
            f"{where}); wrap the body in te.sum/te.max/te.min(..., axis={var.name})"
        )
    if owner:
        raise TensorError(
            f"compute {name!r}: variable {var.name!r} is an axis of compute {owner!r}, not of "
            f"this one; index with this compute's own axes {own}"
        )
    raise TensorError(
        f"compute {name!r}: variable {var.name!r} is not bound (not one of the axes {own} nor "
        "a reduce axis of the body's reducer); use an axis, a te.reduce_axis inside te.sum/"
        "te.max/te.min, or a constant"
    )


def _check_reads(body: Expr, axes: tuple[IterVar, ...], name: str) -> None:
    """Reject reads whose index provably leaves the tensor (constant or affine indices)."""
    ranges = {ax.var: (ax.dom_min, ax.dom_min + ax.extent - 1) for ax in axes}
    if isinstance(body, Reduce):
        ranges.update({ax.var: (ax.dom_min, ax.dom_min + ax.extent - 1) for ax in body.axes})
    problem = out_of_range_read(body, ranges)
    if problem:
        raise TensorError(f"compute {name!r}: {problem}")


def _check_reductions(body: Expr, name: str) -> None:
    from .expr import walk

    inner = [n for n in walk(body) if isinstance(n, Reduce) and n is not body]
    if inner:
        raise TensorError(
            f"compute {name!r}: a reduction must be the whole body of a compute; "
            "split nested or combined reductions into separate te.compute stages"
        )


_IDENTITY = {"sum": 0, "max": "-inf", "min": "inf"}


def _reducer(combiner: str):
    def reduce(expr, axis, where=None) -> Reduce:
        axes = tuple(axis) if isinstance(axis, list | tuple) else (axis,)
        for ax in axes:
            if not isinstance(ax, IterVar) or ax.kind != "reduce":
                raise TensorError(
                    f"te.{combiner}: axis must be reduce axes made with te.reduce_axis, got {ax!r}"
                )
        src = as_expr(expr)
        cond = None if where is None else as_expr(where)
        return Reduce(combiner, src, axes, src.dtype, cond)

    reduce.__name__ = combiner
    reduce.__doc__ = f"The {combiner} of ``expr`` over the reduce axes ``axis``."
    return reduce


sum = _reducer("sum")  # noqa: A001 - te naming
max = _reducer("max")  # noqa: A001
min = _reducer("min")  # noqa: A001


def reduce_identity(combiner: str, dtype: str) -> Const:
    """The identity element of a reducer in ``dtype`` (lowest/highest value for max/min)."""
    import numpy as np

    from .dtype import to_numpy

    if combiner == "sum":
        return const(0, dtype)
    npd = to_numpy(dtype)
    if is_float(dtype):
        return const(float("-inf") if combiner == "max" else float("inf"), dtype)
    info = np.iinfo(npd)
    return const(int(info.min) if combiner == "max" else int(info.max), dtype)
