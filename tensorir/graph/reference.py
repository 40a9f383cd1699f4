"""Evaluate a whole network with numpy: the ground truth compiled networks are checked against.

Each call runs its op's numpy ``reference`` from the operator table (``tensorir.ops.registry``;
the implementations are ``tensorir.ops.reference`` and share nothing with the te computes).
Intermediate arrays are dropped after their last use, so resnet-50 at 224x224 fits comfortably
in memory. float16 and bfloat16 inputs are widened to float32 before each reference runs and its
result is rounded to the op's dtype: one rounding per op, as compiled code that computes in
float32 inside a kernel and stores 16 bits (numpy's own float16 matmul is slow and bfloat16
arithmetic needs ml_dtypes).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..dtype import is_low_precision, to_numpy
from .ir import Call, Constant, Function, Module, Var, post_order
from .shapes import get_op


def evaluate(func: Function | Module, inputs: Mapping[str, np.ndarray], params=None):
    """Run ``func`` on numpy arrays.

    Parameters
    ----------
    func : Function or Module
        A Module is evaluated through its ``"main"``.
    inputs, params : dict name -> array
        Together they must give every parameter of ``func``, with its shape; arrays are cast
        to the parameter's dtype.

    Returns
    -------
    np.ndarray, or a list of them for a function with a tuple body.
    """
    if isinstance(func, Module):
        func = func["main"]
    given = {**(params or {}), **inputs}
    env: dict[int, np.ndarray] = {}
    missing = [v.name for v in func.params if v.name not in given]
    if missing:
        raise KeyError(f"evaluate: no value for parameter(s) {missing}")
    for v in func.params:
        arr = np.asarray(given[v.name])
        if tuple(arr.shape) != v.shape:
            raise ValueError(f"evaluate: %{v.name} must have shape {v.shape}, got {arr.shape}")
        env[id(v)] = arr.astype(to_numpy(v.dtype), copy=False)
    order = post_order(func)
    remaining = _use_counts(order, func)
    for node in order:
        if isinstance(node, Var):
            continue
        if isinstance(node, Constant):
            env[id(node)] = node.value
            continue
        args = [_widen(env[id(a)]) for a in node.args]
        if node.attrs.get("out_dtype"):
            # Accumulate in the output type, as topi does (int8 x int8 -> int32 is exact).
            args = [a.astype(node.dtype, copy=False) for a in args]
        out = np.asarray(get_op(node.op).reference(node.attrs, node.shape, *args))
        if out.shape != node.shape:  # a bug here would poison every comparison downstream
            raise AssertionError(f"reference {node.op} gave {out.shape}, expected {node.shape}")
        env[id(node)] = out.astype(to_numpy(node.dtype), copy=False)
        for a in node.args:
            remaining[id(a)] -= 1
            if remaining[id(a)] == 0:
                del env[id(a)]
    outs = [env[id(o)] for o in func.outputs]
    return outs if isinstance(func.body, tuple) else outs[0]


def _widen(a: np.ndarray) -> np.ndarray:
    """float16 / bfloat16 arrays as float32 (exact), where the references compute."""
    return a.astype(np.float32) if is_low_precision(str(a.dtype)) else a


def _use_counts(order, func) -> dict[int, int]:
    counts = {id(n): 0 for n in order}
    for n in order:
        if isinstance(n, Call):
            for a in n.args:
                counts[id(a)] += 1
    for o in func.outputs:  # outputs are never freed
        counts[id(o)] += 1 << 30
    return counts
