"""``fold_constant``: evaluate every call whose inputs are all constants (Relay's FoldConstant)."""

from __future__ import annotations

from ..ir import Call, Constant, Function, rewrite
from ..reference import evaluate

__all__ = ["fold_constant"]


def fold_constant(func: Function) -> Function:
    """Replace each call whose (rewritten) inputs are all Constants by its value.

    The value comes from the numpy reference (``evaluate``), so folding a winograd weight
    transform, a layout transform of a weight or a BN-derived scale gives exactly what the
    unfolded graph would compute. The folded value keeps the name of its only named input,
    so a scaled or winograd-transformed weight is still called ``conv0_weight``.
    """

    def visit(node, args):
        if not isinstance(node, Call) or not all(isinstance(a, Constant) for a in args):
            return None
        call = Call(node.op, args, node.attrs, node.shape, node.dtype)
        value = evaluate(Function((), call), {})
        names = [a.name for a in args if a.name]
        return Constant(value, names[0] if len(names) == 1 else "")

    return rewrite(func, visit)
