"""Analyses for the LLVM backend: index strides, vectorizability, captured variables, size.

Pure functions over loop IR (no llvmlite): they decide how codegen/llvm.py emits a loop.
"""

from __future__ import annotations

from tensorir.expr import Binary, Cast, Const, Expr, IfThenElse, Var, walk
from tensorir.loops import Allocate, Barrier, For, If, Load, Seq, Stmt, Store, walk_stmts


def depends_on(e: Expr, var: Var) -> bool:
    """Whether ``var`` occurs in ``e`` (inside load indices too)."""
    return any(n is var for n in walk(e))


def const_int(e: Expr) -> int | None:
    """The value of an integer constant expression (folding + - * of constants), else None."""
    if isinstance(e, Const):
        return None if isinstance(e.value, float) else int(e.value)
    if isinstance(e, Cast) and e.dtype.startswith(("int", "uint")):
        return const_int(e.value)
    if isinstance(e, Binary) and e.op in ("+", "-", "*"):
        a, b = const_int(e.a), const_int(e.b)
        if a is None or b is None:
            return None
        return a + b if e.op == "+" else a - b if e.op == "-" else a * b
    return None


def stride(e: Expr, var: Var) -> int | None:
    """``d e / d var`` when ``e`` is affine in ``var`` with a constant coefficient, else None."""
    if not depends_on(e, var):
        return 0
    if e is var:
        return 1
    if isinstance(e, Cast) and e.dtype in ("int32", "int64"):
        return stride(e.value, var)
    if isinstance(e, Binary) and e.op in ("+", "-"):
        a, b = stride(e.a, var), stride(e.b, var)
        if a is None or b is None:
            return None
        return a + b if e.op == "+" else a - b
    if isinstance(e, Binary) and e.op == "*":
        for k_side, v_side in ((e.a, e.b), (e.b, e.a)):
            if not depends_on(k_side, var):
                k, s = const_int(k_side), stride(v_side, var)
                return None if k is None or s is None else k * s
    return None


def is_nonneg(e: Expr) -> bool:
    """Conservative: True only if ``e`` is provably >= 0 (loop variables run from 0 up)."""
    if isinstance(e, Const):
        return not isinstance(e.value, float) and e.value >= 0
    if isinstance(e, Var):
        return True
    if isinstance(e, Cast):
        return e.dtype.startswith(("int", "uint")) and is_nonneg(e.value)
    if isinstance(e, Binary):
        if e.op in ("+", "*", "min", "max"):
            return is_nonneg(e.a) and is_nonneg(e.b)
        if e.op in ("floordiv", "floormod"):
            k = const_int(e.b)
            return k is not None and k > 0 and is_nonneg(e.a)
    return False


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    """The expressions a statement evaluates itself (not those of nested statements)."""
    if isinstance(s, Store):
        return (s.index, s.value)
    if isinstance(s, If):
        return (s.cond,)
    return ()


def vectorizable(body: Stmt, var: Var) -> bool:
    """Whether ``body`` of a vectorized loop over ``var`` can be emitted as explicit vector code.

    Requirements: only Seq / Store / If with a lane-uniform condition; every store is
    contiguous in ``var`` (stride 1); a buffer that is stored is stored at a single index and
    loaded only at that index (so lanes never see each other's writes, and running the body
    lane-parallel equals running it lane after lane); no IfThenElse whose condition varies by
    lane (only the taken branch may be evaluated).
    """
    stored: dict = {}
    loads: list[Load] = []
    for s in walk_stmts(body):
        if isinstance(s, For | Allocate | Barrier):
            return False
        if isinstance(s, If) and depends_on(s.cond, var):
            return False
        if isinstance(s, Store):
            if stride(s.index, var) != 1:
                return False
            prev = stored.setdefault(s.buffer, s.index)
            if prev != s.index:
                return False
        elif not isinstance(s, Seq | If):
            return False
        for e in stmt_exprs(s):
            for n in walk(e):
                if isinstance(n, IfThenElse) and depends_on(n.cond, var):
                    return False
                if isinstance(n, Load):
                    loads.append(n)
    return all(ld.buffer not in stored or ld.index == stored[ld.buffer] for ld in loads)


def referenced(s: Stmt) -> tuple[set, set]:
    """Vars and Buffers mentioned in ``s`` (including those it binds itself)."""
    variables, buffers = set(), set()
    for st in walk_stmts(s):
        if isinstance(st, Store):
            buffers.add(st.buffer)
        for e in stmt_exprs(st):
            for n in walk(e):
                if isinstance(n, Var):
                    variables.add(n)
                elif isinstance(n, Load):
                    buffers.add(n.buffer)
    return variables, buffers


def emitted_size(s: Stmt) -> int:
    """Roughly how many statements explicit unrolling of ``s`` would emit."""
    if isinstance(s, For):
        inner = emitted_size(s.body)
        return inner * s.extent if s.kind == "unrolled" else inner
    if isinstance(s, Allocate):
        return emitted_size(s.body)
    if isinstance(s, Seq):
        return sum(emitted_size(x) for x in s.stmts)
    if isinstance(s, If):
        return 1 + emitted_size(s.then) + (emitted_size(s.else_) if s.else_ else 0)
    return 1
