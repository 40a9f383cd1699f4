"""Index arithmetic for the VTA lowering: affine forms of loop-IR indices and a numpy
evaluator for copy conditions (where a LOAD pads)."""

from __future__ import annotations

import numpy as np

from tensorir.arith import linear_form
from tensorir.expr import Binary, Cast, Const, Expr, IfThenElse, Not, Select, Var

from .config import VTALowerError


def linear(e: Expr, what: str) -> tuple[dict, int]:
    form = linear_form(e)
    if form is None or not all(isinstance(a, Var) for a in form[0]):
        raise VTALowerError(f"{what}: index {e} is not affine in the loop variables")
    return form


def eval_linear(form, env) -> int:
    terms, const = form
    return const + sum(c * env[v] for v, c in terms.items() if v in env)


def eval_expr(e: Expr, env: dict):
    """``e`` with numpy semantics (env values may be arrays); integer and boolean ops only."""
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Cast):
        return eval_expr(e.value, env)
    if isinstance(e, Not):
        return np.logical_not(eval_expr(e.a, env))
    if isinstance(e, Binary):
        a, b = eval_expr(e.a, env), eval_expr(e.b, env)
        ops = {
            "+": np.add, "-": np.subtract, "*": np.multiply, "floordiv": np.floor_divide,
            "floormod": np.mod, "<": np.less, "<=": np.less_equal, ">": np.greater,
            ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal, "&&": np.logical_and,
            "||": np.logical_or, "min": np.minimum, "max": np.maximum,
        }  # fmt: skip
        if e.op in ops:
            return ops[e.op](a, b)
    if isinstance(e, Select | IfThenElse):
        return np.where(eval_expr(e.cond, env), eval_expr(e.t, env), eval_expr(e.f, env))
    raise VTALowerError(f"cannot evaluate the copy condition {e} (expression {type(e).__name__})")


def span(mask_1d: np.ndarray, what: str) -> tuple[int, int]:
    """(zeros before, zeros after) of a 1-D mask that is one contiguous run of True."""
    idx = np.flatnonzero(mask_1d)
    if len(idx) == 0 or idx[-1] - idx[0] + 1 != len(idx):
        raise VTALowerError(f"{what}: the copied region is not a rectangle inside its padding")
    return int(idx[0]), int(len(mask_1d) - 1 - idx[-1])
