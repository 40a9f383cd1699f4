"""Relay-like text of a graph: one ``%n = op(args, attrs) /* ty=... */`` line per call.

Only attributes that differ from the op's default are printed (as Relay does), in the op's
declaration order; tuples print as lists and strings with double quotes. Constants print as
their scalar value, or ``meta[Constant][i]`` (with the name, if any, in a comment).
"""

from __future__ import annotations

import numpy as np

from . import shapes
from .ir import Call, Constant, Expr, Function, Var, post_order


def type_str(expr: Expr) -> str:
    """``Tensor[(1, 224, 224, 3), float32]``."""
    dims = ", ".join(str(d) for d in expr.shape)
    if len(expr.shape) == 1:
        dims += ","
    return f"Tensor[({dims}), {expr.dtype}]"


def _value(v) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _attrs_str(call: Call) -> str:
    defaults = shapes.get_op(call.op).defaults
    parts = []
    for k, v in call.attrs.items():
        d = defaults.get(k, shapes.REQUIRED)
        if d is not shapes.REQUIRED and d == v and type(d) is type(v):
            continue
        if v is None:
            continue
        parts.append(f"{k}={_value(v)}")
    return ", ".join(parts)


def astext(obj) -> str:
    """The text of a Function, or of an expression with the calls it depends on."""
    names: dict[int, str] = {}
    lines: list[str] = []
    consts = 0
    for node in post_order(obj):
        if isinstance(node, Var):
            names[id(node)] = f"%{node.name}"
        elif isinstance(node, Constant):
            if node.value.ndim == 0:
                names[id(node)] = _scalar(node)
            else:
                note = f" /* {node.name} */" if node.name else ""
                names[id(node)] = f"meta[Constant][{consts}]{note}"
                consts += 1
        else:
            args = ", ".join(names[id(a)] for a in node.args)
            attrs = _attrs_str(node)
            name = f"%{len(lines)}"
            names[id(node)] = name
            sep = ", " if attrs and args else ""
            lines.append(f"{name} = {node.op}({args}{sep}{attrs}) /* ty={type_str(node)} */")
    if isinstance(obj, Function):
        params = ", ".join(f"%{v.name}: {type_str(v)}" for v in obj.params)
        outs = [names[id(o)] for o in obj.outputs]
        result = outs[0] if not isinstance(obj.body, tuple) else "(" + ", ".join(outs) + ")"
        ret = (
            type_str(obj.body)
            if not isinstance(obj.body, tuple)
            else "(" + ", ".join(type_str(o) for o in obj.outputs) + ")"
        )
        body = "\n".join("  " + ln for ln in lines + [result])
        return f"fn ({params}) -> {ret} {{\n{body}\n}}"
    if not lines:
        return names[id(obj)]
    return "\n".join(lines)


def _scalar(c: Constant) -> str:
    v = c.value.item()
    suffix = {"float32": "f", "float64": "f64", "int32": "", "int64": "i64"}.get(c.dtype, "")
    if isinstance(v, float) and np.isfinite(v):
        return f"{v!r}{suffix}"
    return f"{v}{suffix}"
