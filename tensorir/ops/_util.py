"""Helpers shared by the operator files: named computes, trivial-term-free index arithmetic, pad."""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable, Sequence

from .. import te
from ..tensor import Tensor, TensorError

FLOAT32_LOWEST = -3.4028234663852886e38  # TVM's min_value("float32"), the max-pool pad value


class NameScope:
    """Hands out unique op names for ops chained into one ComputeDAG.

    A DAG's op names must be unique, but every topi op names its stages the same way (two
    ``nn.bias_add`` both make ``T_add``). Inside ``with scope:`` (or when passed to
    ``compute_op(..., name_scope=scope)``) every stage an op builds asks the scope for its name:
    the first ``T_add`` keeps its name, the next becomes ``T_add_1``, then ``T_add_2``, as
    TVM's name supply does. Use one scope per DAG; :meth:`placeholder` makes inputs through it.
    """

    def __init__(self, taken=()):
        self._counts: dict[str, int] = {}
        self._taken: set[str] = set()
        for name in taken:
            self.unique(name)

    def unique(self, name: str) -> str:
        """``name`` if unused in this scope, else ``name_1``, ``name_2``, ... (and reserve it)."""
        out = name
        k = self._counts.get(name, 0)
        while out in self._taken:
            k += 1
            out = f"{name}_{k}"
        self._counts[name] = k
        self._taken.add(out)
        return out

    def placeholder(self, shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
        """``te.placeholder`` with a name unique in this scope (placeholder, placeholder_1...)."""
        return te.placeholder(shape, dtype, name=self.unique(name))

    def __enter__(self) -> NameScope:
        self._token = _SCOPE.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _SCOPE.reset(self._token)


_SCOPE: contextvars.ContextVar[NameScope | None] = contextvars.ContextVar(
    "name_scope", default=None
)


def stage_name(name: str) -> str:
    """The name to give a new stage: uniquified by the active :class:`NameScope`, if any."""
    scope = _SCOPE.get()
    return name if scope is None else scope.unique(name)


def compute(
    shape,
    fcompute: Callable,
    name: str,
    axis_names: Sequence[str] | str = "ax",
    tag: str = "",
    attrs=None,
) -> Tensor:
    """``te.compute`` with axis names given explicitly.

    ``axis_names`` is a list of names, or a prefix (``"ax"`` gives ax0, ax1, ...). te.compute
    takes axis names from the parameters of ``fcompute``; we give it a signature with ours, so
    ``fcompute`` can be written with ``*idx`` and still print like topi (``T_add(ax0, ax1)``).
    """
    if isinstance(axis_names, str):
        axis_names = [f"{axis_names}{k}" for k in range(len(shape))]

    def f(*idx):
        return fcompute(*idx)

    f.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in axis_names]
    )
    return te.compute(shape, f, name=stage_name(name), tag=tag, attrs=attrs)


def mul(x, c: int):
    """``x*c`` without building the trivial ``x*1`` (TVM's simplifier drops it too)."""
    return x if c == 1 else x * c


def add(x, c):
    """``x + c`` without building ``x + 0``."""
    return x if isinstance(c, int) and c == 0 else x + c


def tap(out_index, reduce_index, stride: int, dilation: int):
    """The input index ``out*stride + r*dilation`` of a window tap, without trivial terms."""
    return add(mul(out_index, stride), mul(reduce_index, dilation))


def as_tuple(value, n: int, op: str, attr: str) -> tuple[int, ...]:
    """An int or a sequence of ints as an ``n``-tuple of ints (an int is repeated)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * n
    try:
        out = tuple(int(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise TensorError(
            f"{op}: attribute {attr!r} must be an int or {n} ints, got {value!r}"
        ) from exc
    if len(out) != n:
        raise TensorError(f"{op}: attribute {attr!r} must have {n} values, got {value!r}")
    return out


def spatial_padding(padding, ndim: int, op: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Relay padding for ``ndim`` spatial dims as (before, after).

    Relay accepts 1 value (all sides), ``ndim`` values (symmetric per dim) or ``2*ndim``
    values (all befores, then all afters: (top, left, bottom, right) in 2-D).
    """
    if isinstance(padding, int) and not isinstance(padding, bool):
        padding = (padding,)
    pads = tuple(int(p) for p in padding)
    if len(pads) == 1:
        pads = pads * (2 * ndim)
    elif len(pads) == ndim:
        pads = pads + pads
    if len(pads) != 2 * ndim or any(p < 0 for p in pads):
        raise TensorError(
            f"{op}: attribute 'padding' must have 1, {ndim} or {2 * ndim} non-negative ints "
            f"(befores then afters), got {padding!r}"
        )
    return pads[:ndim], pads[ndim:]


def pad(data: Tensor, before, after, value=0.0, name: str = "PadInput", axis_names="i") -> Tensor:
    """topi's pad: ``if_then_else(all(in range), data[i - before], value)``.

    Dimensions without padding get no condition, like topi; a pad of nothing is a plain copy
    (topi's conv2d keeps that copy stage, and the seed DAGs show it).
    """
    before, after = tuple(before), tuple(after)
    shape = tuple(s + b + a for s, b, a in zip(data.shape, before, after))
    pad_value = te.const(value, data.dtype)

    def fpad(*idx):
        conds, src = [], []
        for i, s, b, a in zip(idx, data.shape, before, after):
            if b == 0 and a == 0:
                src.append(i)
                continue
            conds += [i >= b, i < s + b]
            src.append(i - b if b else i)
        if not conds:
            return data[tuple(src)]
        return te.if_then_else(te.all(*conds), data[tuple(src)], pad_value)

    return compute(shape, fpad, name, axis_names, tag="injective,pad")


def cast_to(x, dtype: str):
    """Cast an expression only when the dtype differs (no no-op casts in printed DAGs)."""
    return x if x.dtype == dtype else te.cast(dtype, x)


def check_layout(layout: str, allowed: Sequence[str], op: str, attr: str) -> str:
    """``layout`` if it is one of ``allowed``, else a TensorError naming the op and attribute."""
    if layout not in allowed:
        raise TensorError(
            f"{op}: attribute {attr!r} = {layout!r} is not supported; use one of {list(allowed)}"
        )
    return layout
