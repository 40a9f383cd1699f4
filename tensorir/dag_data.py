"""A ComputeDAG as plain data (JSON-able lists, dicts, str, numbers), and back, strictly.

What a remote server builds from (with the steps of a state, as records store them): it
decodes the DAG with :func:`dag_from_data`, which accepts only the expression nodes of
:mod:`tensorir.expr` with their known operators, math functions and reducers, valid dtypes,
integer shapes and extents, and reads of earlier ops; anything else is a one-line ValueError.
No code or object travels: the receiver's own code generator and compiler make the kernel.
Round trip: ``dag_from_data(dag_to_data(dag)).workload_key == dag.workload_key``.
"""

from __future__ import annotations

import numpy as np

from .dtype import check_dtype
from .expr import (
    ARITH_OPS,
    BITWISE_OPS,
    CMP_OPS,
    LOGIC_OPS,
    MATH_FUNCS,
    Binary,
    Call,
    Cast,
    Const,
    IfThenElse,
    IterVar,
    Not,
    Reduce,
    Select,
    TensorRead,
    Var,
)
from .tensor import ComputeOp, PlaceholderOp, Tensor

__all__ = ["DAG_FORMAT", "dag_from_data", "dag_to_data"]

DAG_FORMAT = ["autosched-dag", 1]
_BINARY_OPS = frozenset(ARITH_OPS + CMP_OPS + LOGIC_OPS + BITWISE_OPS)
_COMBINERS = ("sum", "max", "min")
_KINDS = ("spatial", "reduce")
# Limits that keep a hostile description from exhausting the receiver.
MAX_OPS = 10_000
MAX_NODES = 1_000_000
MAX_DIM = 1 << 40


# ----------------------------------------------------------------------------- encoding


def dag_to_data(dag) -> dict:
    """``dag`` as plain data (see the module doc); TypeError for an attribute value that is
    not plain (str, numbers, bool, None, lists, tuples, str-keyed dicts, numeric arrays)."""
    ops = list(dag.ops)
    op_index = {id(op): k for k, op in enumerate(ops)}
    var_ids: dict[int, int] = {}
    variables: list = []
    iv_ids: dict[int, int] = {}
    itervars: list = []

    def var(v: Var) -> int:
        if id(v) not in var_ids:
            var_ids[id(v)] = len(variables)
            variables.append([v.name, v.dtype])
        return var_ids[id(v)]

    def itervar(iv: IterVar) -> int:
        if id(iv) not in iv_ids:
            iv_ids[id(iv)] = len(itervars)
            itervars.append([var(iv.var), int(iv.dom_min), int(iv.extent), iv.kind])
        return iv_ids[id(iv)]

    def expr(e):
        if isinstance(e, Var):
            return ["var", var(e)]
        if isinstance(e, Const):
            return ["const", e.value, e.dtype]
        if isinstance(e, Binary):
            return ["binary", e.op, expr(e.a), expr(e.b), e.dtype]
        if isinstance(e, Not):
            return ["not", expr(e.a), e.dtype]
        if isinstance(e, Select | IfThenElse):
            tag = "select" if isinstance(e, Select) else "if_then_else"
            return [tag, expr(e.cond), expr(e.t), expr(e.f), e.dtype]
        if isinstance(e, Cast):
            return ["cast", e.dtype, expr(e.value)]
        if isinstance(e, Call):
            return ["call", e.name, [expr(a) for a in e.args], e.dtype]
        if isinstance(e, TensorRead):
            return ["read", op_index[id(e.tensor.op)], [expr(i) for i in e.indices], e.dtype]
        if isinstance(e, Reduce):
            cond = None if e.condition is None else expr(e.condition)
            axes = [itervar(a) for a in e.axes]
            return ["reduce", e.combiner, expr(e.source), axes, e.dtype, cond]
        raise TypeError(f"dag_to_data: no plain form for {type(e).__name__}")

    out_ops = []
    for op in ops:
        if isinstance(op, PlaceholderOp):
            out_ops.append(["placeholder", op.name, [int(s) for s in op.shape], op.dtype])
        else:
            axes = [itervar(a) for a in op.axes]
            body = expr(op.body)
            out_ops.append(["compute", op.name, axes, body, op.tag, _attr_to_data(op.attrs)])
    return {
        "format": DAG_FORMAT,
        "vars": variables,
        "itervars": itervars,
        "ops": out_ops,
        "tensors": [op_index[id(t.op)] for t in dag.tensors],
        "layout_free": list(dag.layout_free_placeholders),
    }


def _attr_to_data(value):
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple):
        return {"tuple": [_attr_to_data(v) for v in value]}
    if isinstance(value, list):
        return [_attr_to_data(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("dag_to_data: op attribute dicts need str keys")
        return {"dict": [[k, _attr_to_data(v)] for k, v in value.items()]}
    if isinstance(value, np.ndarray | np.generic) and value.dtype.kind in "biuf":
        arr = np.asarray(value)
        return {"array": [str(arr.dtype), list(arr.shape), arr.ravel().tolist(),
                          isinstance(value, np.generic)]}  # fmt: skip
    raise TypeError(f"dag_to_data: op attribute of type {type(value).__name__} is not plain data")


# ----------------------------------------------------------------------------- decoding


def dag_from_data(data):
    """The ComputeDAG that :func:`dag_to_data` described, checked node by node.

    Raises
    ------
    ValueError
        One line naming what is malformed.
    """
    try:
        return _Decoder(data).dag()
    except RecursionError:
        raise ValueError("DAG description: expressions nested too deeply") from None
    except (TypeError, KeyError, IndexError) as exc:
        raise ValueError(f"DAG description: malformed ({type(exc).__name__}: {exc})") from None


def _fail(msg: str):
    raise ValueError(f"DAG description: {msg}")


def _int(value, what: str, lo: int = 0, hi: int = MAX_DIM) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        _fail(f"{what} must be an int in [{lo}, {hi}], got {value!r}"[:200])
    return value


def _str(value, what: str) -> str:
    if not isinstance(value, str) or len(value) > 256:
        _fail(f"{what} must be a str (at most 256 characters), got {type(value).__name__}")
    return value


def _dtype(value, what: str) -> str:
    try:
        return check_dtype(_str(value, what))
    except ValueError:
        _fail(f"{what}: unknown dtype {value!r}"[:200])


def _list(value, what: str, n: int | None = None) -> list:
    if not isinstance(value, list) or (n is not None and len(value) != n):
        _fail(f"{what} must be a list" + (f" of {n} items" if n is not None else ""))
    return value


class _Decoder:
    def __init__(self, data):
        if not isinstance(data, dict) or data.get("format") != DAG_FORMAT:
            fmt = data.get("format") if isinstance(data, dict) else type(data).__name__
            _fail(f"format {fmt!r} is not {DAG_FORMAT!r}")
        self.data = data
        self.nodes = 0
        self.vars = [
            Var(_str(name, "var name"), _dtype(dt, "var dtype"))
            for name, dt in (_list(v, "var", 2) for v in _list(data["vars"], "vars"))
        ]
        self.itervars = []
        for iv in _list(data["itervars"], "itervars"):
            v, lo, ext, kind = _list(iv, "itervar", 4)
            if kind not in _KINDS:
                _fail(f"itervar kind {kind!r} is not one of {_KINDS}"[:200])
            self.itervars.append(
                IterVar(self._var(v), _int(lo, "dom_min", -MAX_DIM), _int(ext, "extent", 1), kind)
            )
        self.tensors: list[Tensor] = []

    def _var(self, k) -> Var:
        return self.vars[_int(k, "var id", 0, len(self.vars) - 1)]

    def _itervar(self, k) -> IterVar:
        return self.itervars[_int(k, "itervar id", 0, len(self.itervars) - 1)]

    def dag(self):
        from .dag import ComputeDAG

        ops = _list(self.data["ops"], "ops")
        if len(ops) > MAX_OPS:
            _fail(f"{len(ops)} ops, over the limit of {MAX_OPS}")
        for k, op in enumerate(ops):
            self.tensors.append(Tensor(self._op(_list(op, f"op {k}"), k)))
        tensors = [
            self.tensors[_int(k, "tensor index", 0, len(ops) - 1)]
            for k in _list(self.data["tensors"], "tensors")
        ]
        free = [_str(n, "layout_free name") for n in _list(self.data["layout_free"], "layout_free")]
        return ComputeDAG(tensors, layout_free_placeholders=free)

    def _op(self, op: list, k: int):
        if op and op[0] == "placeholder":
            _, name, shape, dtype = _list(op, f"op {k}", 4)
            dims = tuple(_int(s, "shape", 0) for s in _list(shape, "shape"))
            return PlaceholderOp(_str(name, "op name"), dims, _dtype(dtype, "dtype"))
        if op and op[0] == "compute":
            _, name, axes, body, tag, attrs = _list(op, f"op {k}", 6)
            return ComputeOp(
                _str(name, "op name"),
                tuple(self._itervar(a) for a in _list(axes, "axes")),
                self._expr(body, k),
                _str(tag, "tag"),
                _attr_from_data(attrs, "attrs") or {},
            )
        _fail(f"op {k} is neither a placeholder nor a compute op")

    def _expr(self, e, k: int):
        self.nodes += 1
        if self.nodes > MAX_NODES:
            _fail(f"more than {MAX_NODES} expression nodes")
        e = _list(e, "expression")
        tag = e[0] if e else None
        if tag == "var":
            return self._var(_list(e, "var", 2)[1])
        if tag == "const":
            _, value, dtype = _list(e, "const", 3)
            if not isinstance(value, bool | int | float):
                _fail(f"constant {value!r} is not a number"[:200])
            return Const(value, _dtype(dtype, "const dtype"))
        if tag == "binary":
            _, op, a, b, dtype = _list(e, "binary", 5)
            if op not in _BINARY_OPS:
                _fail(f"unknown operator {op!r}"[:200])
            return Binary(op, self._expr(a, k), self._expr(b, k), _dtype(dtype, "dtype"))
        if tag == "not":
            _, a, dtype = _list(e, "not", 3)
            return Not(self._expr(a, k), _dtype(dtype, "dtype"))
        if tag in ("select", "if_then_else"):
            _, c, t, f, dtype = _list(e, tag, 5)
            cls = Select if tag == "select" else IfThenElse
            return cls(self._expr(c, k), self._expr(t, k), self._expr(f, k), _dtype(dtype, "dtype"))
        if tag == "cast":
            _, dtype, value = _list(e, "cast", 3)
            return Cast(_dtype(dtype, "cast dtype"), self._expr(value, k))
        if tag == "call":
            _, name, args, dtype = _list(e, "call", 4)
            if name not in MATH_FUNCS:
                _fail(f"call of {name!r}: only the math functions {MATH_FUNCS} are known"[:200])
            args = tuple(self._expr(a, k) for a in _list(args, "call args"))
            return Call(name, args, _dtype(dtype, "dtype"))
        if tag == "read":
            _, op, indices, dtype = _list(e, "read", 4)
            tensor = self.tensors[_int(op, f"op {k} reads op", 0, k - 1)]
            idx = tuple(self._expr(i, k) for i in _list(indices, "indices"))
            if len(idx) != len(tensor.shape):
                _fail(f"op {k} reads {tensor.name!r} with {len(idx)} indices")
            return TensorRead(tensor, idx, _dtype(dtype, "dtype"))
        if tag == "reduce":
            _, comb, source, axes, dtype, cond = _list(e, "reduce", 6)
            if comb not in _COMBINERS:
                _fail(f"reducer {comb!r} is not one of {_COMBINERS}"[:200])
            return Reduce(
                comb,
                self._expr(source, k),
                tuple(self._itervar(a) for a in _list(axes, "reduce axes")),
                _dtype(dtype, "dtype"),
                None if cond is None else self._expr(cond, k),
            )
        _fail(f"unknown expression node {str(tag)[:40]!r}")


def _attr_from_data(value, what: str):
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [_attr_from_data(v, what) for v in value]
    if isinstance(value, dict) and len(value) == 1:
        (kind, body), = value.items()  # fmt: skip
        if kind == "tuple":
            return tuple(_attr_from_data(v, what) for v in _list(body, what))
        if kind == "dict":
            return {
                _str(k, f"{what} key"): _attr_from_data(v, what)
                for k, v in (_list(kv, what, 2) for kv in _list(body, what))
            }
        if kind == "array":
            dtype, shape, values, scalar = _list(body, f"{what} array", 4)
            dt = np.dtype(_dtype(dtype, f"{what} array dtype"))
            dims = tuple(_int(s, f"{what} array shape") for s in _list(shape, "shape"))
            arr = np.array(_list(values, f"{what} array values"), dtype=dt).reshape(dims)
            return arr[()] if scalar is True else arr
    _fail(f"{what}: {type(value).__name__} is not an attribute value")
