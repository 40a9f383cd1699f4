"""Reference interpreter: evaluate a ComputeDAG with vectorized numpy.

This is the oracle every backend and every schedule is checked against, so its semantics follow
C/LLVM: floordiv/floormod round toward minus infinity, integer arithmetic wraps in the op's
dtype, float -> int casts truncate toward zero, ``round`` rounds halves away from zero, and
float32 ops compute in float32 (sums are accumulated in float64, which is at least as precise).

Each stage is evaluated over a grid: axis ``k`` of the stage is an ``arange`` shaped along grid
dimension ``k``, reduce axes get further grid dimensions, and numpy broadcasting does the rest
(a sub-expression keeps size 1 along the dimensions it does not depend on). Reductions are
evaluated in chunks of their reduce domain so the broadcast temporaries stay below about
``CHUNK_ELEMENTS`` elements. Tensor reads whose indices are affine in the axes and provably in
range become zero-copy strided views; other reads gather. Both branches of a guard are evaluated
eagerly, so the evaluator tracks which grid points each sub-expression is actually selected at
(``if_then_else``/``select`` branches, a reducer's ``where``, the right operand of ``&&``/``||``):
an out-of-range index at a selected point raises TensorError, as a kernel would read outside
the buffer there; at masked-off points the gather clips the index and the value is discarded.
Sums of products go through ``np.einsum`` so conv2d/matmul-like stages use BLAS.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .bounds_check import read_error
from .dtype import bits, is_float, is_int, to_numpy
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
    walk,
)
from .tensor import ComputeOp, TensorError, reduce_identity

CHUNK_ELEMENTS = 1 << 24  # about 16M elements per broadcast temporary

__all__ = ["CHUNK_ELEMENTS", "eval_all", "eval_dag"]


def eval_dag(dag, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Evaluate ``dag`` on ``inputs`` and return its outputs.

    Parameters
    ----------
    dag : ComputeDAG
        The computation.
    inputs : sequence of numpy.ndarray
        One array per ``dag.input_tensors`` entry, in that order, with matching shape and dtype.

    Returns
    -------
    list of numpy.ndarray
        One array per ``dag.output_tensors`` entry, in that order.
    """
    values = eval_all(dag, inputs)
    return [values[t.name] for t in dag.output_tensors]


def eval_all(dag, inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate every stage of ``dag``; returns ``{op name: array}`` for all ops (inputs too)."""
    arrays = _check_inputs(dag, inputs)
    results: dict = {}
    for t, a in zip(dag.input_tensors, arrays):
        results[t.op] = a
    with np.errstate(all="ignore"):  # wrapping ints, masked-out branches: C semantics, no noise
        for op in dag.ops:
            if isinstance(op, ComputeOp):
                results[op] = _eval_op(op, results)
            elif op not in results:
                raise ValueError(f"eval_dag: no value for input {op.name!r}")
    return {op.name: results[op] for op in dag.ops}


def _check_inputs(dag, inputs) -> list[np.ndarray]:
    expected = dag.input_tensors
    names = [t.name for t in expected]
    if isinstance(inputs, np.ndarray) or len(inputs) != len(expected):
        got = "one array" if isinstance(inputs, np.ndarray) else f"{len(inputs)} arrays"
        raise ValueError(
            f"eval_dag: expected {len(expected)} input arrays for {names}, got {got}; "
            "pass a list in dag.input_tensors order"
        )
    out = []
    for t, a in zip(expected, inputs):
        a = np.asarray(a)
        if tuple(a.shape) != tuple(t.shape):
            raise ValueError(
                f"eval_dag: input {t.name!r} must have shape {list(t.shape)}, got {list(a.shape)}"
            )
        if a.dtype != to_numpy(t.dtype):
            raise ValueError(
                f"eval_dag: input {t.name!r} must have dtype {t.dtype}, got {a.dtype}; "
                f"convert it with .astype({t.dtype!r})"
            )
        out.append(np.ascontiguousarray(a))
    return out


# ----------------------------------------------------------------------------- stages


def _eval_op(op: ComputeOp, results: dict) -> np.ndarray:
    n = len(op.axes)
    body = op.body
    if not isinstance(body, Reduce):
        ev = _Evaluator(results, n, op.name)
        for d, ax in enumerate(op.axes):
            ev.bind(ax.var, d, ax.dom_min, ax.extent)
        out = _cast(ev.eval(body), op.dtype)
        return np.ascontiguousarray(np.broadcast_to(out, op.shape))
    return _eval_reduce(op, body, results)


def _eval_reduce(op: ComputeOp, body: Reduce, results: dict) -> np.ndarray:
    n, r = len(op.axes), len(body.axes)
    sizes = [ax.extent for ax in body.axes]
    factors = _product_factors(body)
    grid_dims = {ax.var: d for d, ax in enumerate(op.axes)}
    grid_dims.update({ax.var: n + k for k, ax in enumerate(body.axes)})

    if factors is not None:
        deps = [_grid_deps(f, grid_dims) for f in factors]

        def cost(ext: list[int]) -> int:  # the largest factor: what einsum may copy
            return max(math.prod(ext[d] for d in dep) for dep in deps)
    else:

        def cost(ext: list[int]) -> int:  # the whole broadcast grid
            return math.prod(ext)

    # Leading reduce axes [0, k-1) run one value at a time, axis k-1 in chunks, the rest whole.
    k = 0
    while k < r and cost(list(op.shape) + [1] * k + sizes[k:]) > CHUNK_ELEMENTS:
        k += 1
    if k == 0:
        chunks = [[(ax.dom_min, ax.extent) for ax in body.axes]]
    else:
        inner = list(op.shape) + [1] * k + sizes[k:]
        step = 1
        while step < sizes[k - 1]:
            inner[n + k - 1] = step * 2
            if cost(inner) > CHUNK_ELEMENTS:
                break
            step *= 2
        chunks = _chunks(body.axes, k, step)

    acc_dtype = _acc_dtype(op.dtype, body.combiner)
    acc = None
    for chunk in chunks:
        ev = _Evaluator(results, n + r, op.name)
        for d, ax in enumerate(op.axes):
            ev.bind(ax.var, d, ax.dom_min, ax.extent)
        for j, (ax, (lo, ext)) in enumerate(zip(body.axes, chunk)):
            ev.bind(ax.var, n + j, lo, ext)
        shape = tuple(op.shape) + tuple(ext for _, ext in chunk)
        if factors is not None:
            part = _einsum_sum(ev, factors, n, shape)
        else:
            part = _reduce_chunk(ev, body, n, shape, acc_dtype)
        part = np.broadcast_to(part, op.shape)
        if acc is None:
            acc = np.array(part, dtype=acc_dtype)
        elif body.combiner == "sum":
            acc += part
        elif body.combiner == "max":
            np.maximum(acc, part, out=acc)
        else:
            np.minimum(acc, part, out=acc)
    return np.ascontiguousarray(_cast(acc, op.dtype))


def _chunks(axes, k: int, step: int) -> list[list[tuple[int, int]]]:
    """Chunks of the reduce domain: axes < k-1 by single values, axis k-1 by ``step``."""
    outer = [range(ax.dom_min, ax.dom_min + ax.extent) for ax in axes[: k - 1]]
    ax = axes[k - 1]
    pieces = [
        (lo, min(step, ax.dom_min + ax.extent - lo))
        for lo in range(ax.dom_min, ax.dom_min + ax.extent, step)
    ]
    rest = [(a.dom_min, a.extent) for a in axes[k:]]
    out = []
    for vals in np.ndindex(*[len(rg) for rg in outer]) if outer else [()]:
        head = [(outer[i][v], 1) for i, v in enumerate(vals)]
        for piece in pieces:
            out.append(head + [piece] + rest)
    return out


def _acc_dtype(dtype: str, combiner: str) -> np.dtype:
    if combiner != "sum":
        return to_numpy(dtype)
    if is_float(dtype):
        return np.dtype("float64")
    if is_int(dtype):
        return np.dtype("int64")  # wraps to the op dtype when cast back: same as C
    return to_numpy(dtype)


def _reduce_chunk(ev, body: Reduce, n: int, shape, acc_dtype) -> np.ndarray:
    axes = tuple(range(n, len(shape)))
    where = True
    if body.condition is not None:
        where = np.broadcast_to(_cast(ev.eval(body.condition), "bool"), shape)
    src = np.broadcast_to(_cast(ev.eval_masked(body.source, where), body.dtype), shape)
    if body.combiner == "sum":
        return np.sum(src, axis=axes, dtype=acc_dtype, where=where)
    ident = reduce_identity(body.combiner, body.dtype).value
    if body.combiner == "max":
        return np.max(src, axis=axes, initial=ident, where=where)
    if body.combiner == "min":
        return np.min(src, axis=axes, initial=ident, where=where)
    raise ValueError(f"eval_dag: unknown reduction combiner {body.combiner!r}")


def _product_factors(body: Reduce) -> list[Expr] | None:
    """The factors of an unconditional float sum of products, or None (generic path)."""
    if body.combiner != "sum" or body.condition is not None or not is_float(body.dtype):
        return None
    src = body.source
    if not (isinstance(src, Binary) and src.op == "*"):
        return None
    out: list[Expr] = []

    def flatten(e: Expr) -> None:
        if isinstance(e, Binary) and e.op == "*" and e.dtype == body.dtype:
            flatten(e.a)
            flatten(e.b)
        else:
            out.append(e)

    flatten(src)
    if any(f.dtype != body.dtype for f in out):
        return None
    return out


def _grid_deps(e: Expr, grid_dims: dict) -> set[int]:
    return {grid_dims[v] for v in walk(e) if isinstance(v, Var) and v in grid_dims}


def _einsum_sum(ev, factors: list[Expr], n: int, shape) -> np.ndarray:
    ndim = len(shape)
    operands: list = []
    used: set[int] = set()
    for f in factors:
        a = _cast(ev.eval(f), f.dtype)
        if a.ndim == 0:
            a = a.reshape((1,) * ndim)
        keep = [d for d in range(ndim) if a.shape[d] != 1]
        operands += [np.squeeze(a, axis=tuple(d for d in range(ndim) if a.shape[d] == 1)), keep]
        used.update(keep)
    out_dims = [d for d in range(n) if d in used]
    res = np.einsum(*operands, out_dims, optimize=len(factors) > 1)
    # Reduce dims no factor depends on contribute a constant factor of their extent.
    scale = math.prod(shape[d] for d in range(n, ndim) if d not in used)
    res = np.asarray(res, dtype=np.float64)
    if scale != 1:
        res = res * scale
    return res.reshape([shape[d] if d in used else 1 for d in range(n)])


# ----------------------------------------------------------------------------- expressions


def _cast(a, dtype: str) -> np.ndarray:
    a = np.asarray(a)
    npd = to_numpy(dtype)
    if a.dtype == npd:
        return a
    if dtype == "bool":
        return a != 0
    return a.astype(npd)  # float -> int truncates toward zero; int -> int wraps


def _const(value, dtype: str) -> np.ndarray:
    if is_int(dtype):  # wrap out-of-range literals like C does
        nb = bits(dtype)
        value = int(value) & ((1 << nb) - 1)
        if dtype.startswith("int") and value >= 1 << (nb - 1):
            value -= 1 << nb
    return np.asarray(value, dtype=to_numpy(dtype))


_ARITH = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "floordiv": np.floor_divide,
    "floormod": np.remainder,
    "min": np.minimum,
    "max": np.maximum,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
    # numpy's right_shift is arithmetic on signed ints and logical on unsigned ones, as C's.
    ">>": np.right_shift,
    "<<": np.left_shift,
    "&": np.bitwise_and,
    "|": np.bitwise_or,
    "^": np.bitwise_xor,
}


def _erf(x: np.ndarray) -> np.ndarray:
    x64 = np.asarray(x, dtype=np.float64)
    try:
        from scipy.special import erf  # optional: fast and exact
    except ImportError:
        return np.frompyfunc(math.erf, 1, 1)(x64).astype(np.float64)
    return erf(x64)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    frac = x - t  # exact in floating point
    return t + np.where(np.abs(frac) >= 0.5, np.sign(x), 0).astype(x.dtype)


_MATH = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: np.asarray(1, x.dtype) / np.sqrt(x),
    "tanh": np.tanh,
    "sigmoid": lambda x: np.asarray(1, x.dtype) / (np.asarray(1, x.dtype) + np.exp(-x)),
    "erf": _erf,
    "fabs": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": _round_half_away,
    "sin": np.sin,
    "cos": np.cos,
}


class _Evaluator:
    """Evaluates expressions of one stage over a broadcast grid of ``ndim`` dimensions."""

    def __init__(self, results: dict, ndim: int, stage: str = ""):
        self.results = results
        self.ndim = ndim
        self.stage = stage
        self.vars: dict[Var, tuple[int, int, int]] = {}  # var -> (grid dim, lo, extent)
        self.memo: dict[int, np.ndarray] = {}
        # Where the expression being evaluated is selected (None: everywhere), and the reads
        # that had out-of-range lanes (checked again when a memoized value is reused elsewhere).
        self.mask: np.ndarray | None = None
        self.oob_reads: dict[int, tuple[TensorRead, np.ndarray, list]] = {}

    def bind(self, var: Var, dim: int, lo: int, extent: int) -> None:
        self.vars[var] = (dim, lo, extent)

    def eval(self, e: Expr) -> np.ndarray:
        key = id(e)
        hit = self.memo.get(key)
        if hit is None:
            hit = self._eval(e)
            self.memo[key] = hit
        elif self.oob_reads:
            for node in walk(e):
                if id(node) in self.oob_reads:
                    self._check_selected(*self.oob_reads[id(node)])
        return hit

    def eval_masked(self, e: Expr, mask) -> np.ndarray:
        """``e`` evaluated where it is selected only at the grid points of ``mask``."""
        if mask is True:
            return self.eval(e)
        saved = self.mask
        self.mask = mask if saved is None else np.logical_and(saved, mask)
        try:
            return self.eval(e)
        finally:
            self.mask = saved

    def _eval(self, e: Expr) -> np.ndarray:
        if isinstance(e, Const):
            return _const(e.value, e.dtype)
        if isinstance(e, Var):
            if e not in self.vars:
                raise ValueError(f"eval_dag: variable {e.name!r} is not an axis of this stage")
            dim, lo, ext = self.vars[e]
            shape = [1] * self.ndim
            shape[dim] = ext
            return np.arange(lo, lo + ext, dtype=to_numpy(e.dtype)).reshape(shape)
        if isinstance(e, Binary):
            return self._binary(e)
        if isinstance(e, Not):
            return np.logical_not(_cast(self.eval(e.a), "bool"))
        if isinstance(e, Select | IfThenElse):
            c = _cast(self.eval(e.cond), "bool")
            t = _cast(self.eval_masked(e.t, c), e.dtype)
            f = _cast(self.eval_masked(e.f, np.logical_not(c)), e.dtype)
            return np.where(c, t, f)
        if isinstance(e, Cast):
            return _cast(self.eval(e.value), e.dtype)
        if isinstance(e, Call):
            return self._call(e)
        if isinstance(e, TensorRead):
            return self._read(e)
        if isinstance(e, Reduce):
            raise ValueError("eval_dag: a reduction may only be the whole body of a stage")
        raise TypeError(f"eval_dag: cannot evaluate {type(e).__name__} nodes in a ComputeDAG")

    def _binary(self, e: Binary) -> np.ndarray:
        if e.op in ("&&", "||"):
            a = _cast(self.eval(e.a), "bool")
            # As in C, the right operand only matters where the left one does not decide.
            b = _cast(self.eval_masked(e.b, a if e.op == "&&" else np.logical_not(a)), "bool")
            return np.logical_and(a, b) if e.op == "&&" else np.logical_or(a, b)
        a, b = self.eval(e.a), self.eval(e.b)
        if e.op == "/":
            fn = np.true_divide if is_float(e.dtype) else np.floor_divide
        else:
            fn = _ARITH.get(e.op)
            if fn is None:
                raise ValueError(f"eval_dag: unknown binary operator {e.op!r}")
        if e.op in ("<", "<=", ">", ">=", "==", "!="):
            return fn(a, b)
        return _cast(fn(a, b), e.dtype)

    def _call(self, e: Call) -> np.ndarray:
        args = [_cast(self.eval(a), e.dtype) for a in e.args]
        if e.name == "pow":
            return _cast(np.power(args[0], args[1]), e.dtype)
        fn = _MATH.get(e.name)
        if fn is None:
            raise ValueError(f"eval_dag: unknown math function {e.name!r}")
        return _cast(fn(args[0]), e.dtype)

    # -- tensor reads

    def _read(self, e: TensorRead) -> np.ndarray:
        op = e.tensor.op
        if op not in self.results:
            raise ValueError(f"eval_dag: tensor {op.name!r} is read before it is computed")
        arr = self.results[op]
        view = self._strided_view(arr, e.indices)
        if view is not None:
            return view
        values = []
        oob = None
        for k, ix in enumerate(e.indices):
            v = np.asarray(self.eval(ix))
            if v.dtype.kind not in "iu":
                v = v.astype(np.int64)
            values.append(v)
            out = (v < 0) | (v >= arr.shape[k])
            if out.any():
                oob = out if oob is None else (oob | out)
        if oob is not None:
            self.oob_reads[id(e)] = (e, oob, values)
            self._check_selected(e, oob, values)
            values = [np.clip(v, 0, n - 1) for v, n in zip(values, arr.shape)]  # masked-off lanes
        return arr[tuple(values)]

    def _check_selected(self, e: TensorRead, oob: np.ndarray, values: list) -> None:
        """Raise when an out-of-range lane of the read ``e`` is selected under ``self.mask``."""
        bad = oob if self.mask is None else np.logical_and(oob, self.mask)
        if not bad.any():
            return
        full = np.broadcast_shapes(bad.shape, *(v.shape for v in values))
        point = np.unravel_index(int(np.argmax(np.broadcast_to(bad, full))), full)
        at = ", ".join(
            f"{var.name}={int(point[d]) + lo}"
            for var, (d, lo, _) in self.vars.items()
            if d < len(full) and full[d] > 1
        )
        for k, v in enumerate(values):
            val = int(np.broadcast_to(v, full)[point])
            if not 0 <= val < e.tensor.shape[k]:
                where = f"is {val} at {at}" if at else f"is {val}"
                raise TensorError(
                    f"eval_dag: stage {self.stage!r}: "
                    + read_error(e.tensor.name, e.tensor.shape, k, str(e.indices[k]), where)
                )

    def _affine(self, e: Expr):
        """``(const, {grid dim: coeff})`` if ``e`` is affine in grid axes, else None."""
        if isinstance(e, Const):
            return (int(e.value), {}) if is_int(e.dtype) else None
        if isinstance(e, Var):
            if e not in self.vars:
                return None
            dim, lo, _ = self.vars[e]
            return lo, {dim: 1}
        if isinstance(e, Binary) and e.op in ("+", "-", "*") and is_int(e.dtype):
            a, b = self._affine(e.a), self._affine(e.b)
            if a is None or b is None:
                return None
            if e.op == "*":
                if a[1] and b[1]:
                    return None
                (c, lin), s = (a, b[0]) if not b[1] else (b, a[0])
                return c * s, {d: k * s for d, k in lin.items()}
            sign = 1 if e.op == "+" else -1
            lin = dict(a[1])
            for d, k in b[1].items():
                lin[d] = lin.get(d, 0) + sign * k
            return a[0] + sign * b[0], lin
        return None

    def _strided_view(self, arr: np.ndarray, indices) -> np.ndarray | None:
        ext = [1] * self.ndim
        for dim, _, extent in self.vars.values():
            ext[dim] = extent
        forms = []
        for k, ix in enumerate(indices):
            f = self._affine(ix)
            if f is None:
                return None
            c, lin = f
            lo = c + sum(min(0, a * (ext[d] - 1)) for d, a in lin.items())
            hi = c + sum(max(0, a * (ext[d] - 1)) for d, a in lin.items())
            if lo < 0 or hi >= arr.shape[k]:
                return None  # may leave the tensor: gather with clipping instead
            forms.append(f)
        if not arr.flags.c_contiguous:
            return None
        el_strides = [s // arr.itemsize for s in arr.strides]
        offset = sum(c * st for (c, _), st in zip(forms, el_strides))
        shape = [1] * self.ndim
        strides = [0] * self.ndim
        for (_, lin), st in zip(forms, el_strides):
            for d, a in lin.items():
                if a != 0:
                    shape[d] = ext[d]
                    strides[d] += a * st * arr.itemsize
        base = arr.reshape(-1)[offset:]
        return as_strided(base, shape=tuple(shape), strides=tuple(strides), writeable=False)
