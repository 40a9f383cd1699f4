"""Reading a VTA-scheduled loop nest for codegen/vta/lower.py: the VTA buffer of a scope, a
nest's perfectly nested loops and pragma, the loads and variables of its expressions."""

from __future__ import annotations

from tensorir.expr import Expr, Var
from tensorir.loops import For, If, Load, Stmt, Store, walk_stmts

#: The VTA buffer of each tagged scope (TVM's ``env.inp_scope`` ...).
SCOPE_BUFFERS = {"local.inp_buffer": "inp", "local.wgt_buffer": "wgt", "local.acc_buffer": "acc"}


def _stage_of(buffer) -> str:
    return f"stage of buffer {buffer.name!r}"


def _chain(s: Stmt) -> tuple[list[For], Stmt]:
    """The perfectly nested loops starting at ``s`` and the statement inside them."""
    loops = []
    while isinstance(s, For):
        loops.append(s)
        s = s.body
    return loops, s


def _pragma(s: For) -> str | None:
    for key, value in s.annotations:
        if key == "pragma":
            return value
    return None


def _loads(e: Expr) -> list:
    from tensorir.expr import walk

    return [x for x in walk(e) if isinstance(x, Load)]


def _expr_vars(e: Expr) -> tuple:
    from tensorir.expr import walk

    return tuple(dict.fromkeys(n for n in walk(e) if isinstance(n, Var)))


def _free_vars(s: Stmt) -> tuple:
    """The variables ``s`` reads that its own loops do not bind, in a stable order."""
    from tensorir.expr import walk

    bound, seen = set(), {}
    for x in walk_stmts(s):
        if isinstance(x, For):
            bound.add(x.var)
        exprs = (
            (x.index, x.value) if isinstance(x, Store) else (x.cond,) if isinstance(x, If) else ()
        )
        for e in exprs:
            for node in walk(e):
                if isinstance(node, Var):
                    seen.setdefault(node, None)
    return tuple(v for v in seen if v not in bound)


def _leads_to_gemm(s: For) -> bool:
    loops, _ = _chain(s)
    return any(_pragma(lp) == "gemm" for lp in loops)
