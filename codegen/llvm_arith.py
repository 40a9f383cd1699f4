"""Operators for the LLVM expression emitter: logic, comparisons, bit operators, float and
integer arithmetic (floor division and modulo without x86's traps), ``if_then_else``, and the
folding of integer constants (a mixin of :class:`codegen.llvm_expr.ExprEmitter`)."""

from __future__ import annotations

from llvmlite import ir

from tensorir.expr import BITWISE_OPS, CMP_OPS, LOGIC_OPS, Binary, IfThenElse

from .llvm_types import FMF, I1, is_float_dtype, is_scalar_const, is_signed, lanes_of, reg_type
from .llvm_vector import const_int, is_nonneg

_INT_OPS = {"+": "add", "-": "sub", "*": "mul"}

# Integer operators folded when both operands are constants. Folding at emission keeps the IR
# small where unrolled loops make indices constant (winograd's constant-matrix select chains
# were megabytes of ``icmp eq i64 0, 3``); LLVM folds them too, so the machine code is the same.
_FOLD = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "min": min,
    "max": max,
    "floordiv": lambda a, b: a // b if b > 0 else None,
    "/": lambda a, b: a // b if b > 0 else None,
    "floormod": lambda a, b: a % b if b > 0 else None,
    "&&": lambda a, b: int(bool(a and b)),
    "||": lambda a, b: int(bool(a or b)),
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b),
    "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b),
}


def _fold_int(op: str, a: ir.Value, b: ir.Value) -> ir.Constant | None:
    """``a op b`` as a constant when both are scalar integer constants in ``[0, limit)`` and
    so is an arithmetic result (``limit`` 2 for i1, else the signed maximum + 1: the signed
    and unsigned readings agree and nothing wraps); None when the instruction is emitted."""
    fold = _FOLD.get(op)
    if fold is None or not (is_scalar_const(a) and is_scalar_const(b)) or a.type != b.type:
        return None
    width = a.type.width
    limit = 2 if width == 1 else 1 << (width - 1)
    x, y = int(a.constant), int(b.constant)
    if not (0 <= x < limit and 0 <= y < limit):
        return None
    r = fold(x, y)
    if r is None:
        return None
    if op in CMP_OPS or op in LOGIC_OPS:
        return ir.Constant(I1, r)
    return ir.Constant(a.type, r) if 0 <= r < limit else None


class ArithEmitter:
    """Mixin of :class:`~codegen.llvm_expr.ExprEmitter`: binary operators and if_then_else."""

    def _binary(self, e: Binary, wide: bool) -> ir.Value:
        op = e.op
        if op in LOGIC_OPS:
            a = self.expr(e.a)
            # A constant left side decides ``false && b`` and ``true || b`` (unrolled loops
            # bind their variables to constants): b need not be emitted.
            if is_scalar_const(a) and bool(a.constant) == (op == "||") and self.skippable(e.b):
                return a
            a, b = self.match(a, self.expr(e.b))
            folded = _fold_int(op, a, b)
            if folded is not None:
                return folded
            return self.b.and_(a, b) if op == "&&" else self.b.or_(a, b)
        if op in CMP_OPS:
            d = e.a.dtype
            w = d == "int32" and (self.has_var(e.a) or self.has_var(e.b))
            a, b = self.match(self.expr(e.a, w), self.expr(e.b, w))
            folded = None if is_float_dtype(d) else _fold_int(op, a, b)
            if folded is not None:
                return folded
            if is_float_dtype(d):
                if op == "!=":  # numpy: nan != x is True
                    return self.b.fcmp_unordered(op, a, b)
                return self.b.fcmp_ordered(op, a, b)
            return self.pure("icmp_signed" if is_signed(d) else "icmp_unsigned", op, a, b)
        if op in BITWISE_OPS:
            return self._bitwise(e, wide)
        a, b = self.match(self.expr(e.a, wide), self.expr(e.b, wide))
        if is_float_dtype(e.dtype):
            return self._float_arith(op, a, b)
        return self._int_arith(e, a, b, wide)

    def _bitwise(self, e: Binary, wide: bool) -> ir.Value:
        """Bit operators in the dtype's own width (a shift of a widened int32 would keep bits
        that int32 drops), then widened for index math. Shift amounts must be in
        [0, bits): LLVM, like C, leaves larger ones undefined."""
        bld, op, signed = self.b, e.op, is_signed(e.dtype)
        a, b = self.match(self.expr(e.a, False), self.expr(e.b, False))
        if op == ">>":
            v = bld.ashr(a, b) if signed else bld.lshr(a, b)
        elif op == "<<":
            v = bld.shl(a, b)
        else:
            v = {"&": bld.and_, "|": bld.or_, "^": bld.xor}[op](a, b)
        return self.int_resize(v, reg_type(e.dtype, wide), signed=signed) if wide else v

    def _float_arith(self, op: str, a: ir.Value, b: ir.Value) -> ir.Value:
        bld = self.b
        if op == "+":
            return bld.fadd(a, b, flags=FMF)
        if op == "-":
            return bld.fsub(a, b, flags=FMF)
        if op == "*":
            return bld.fmul(a, b, flags=FMF)
        if op == "/":
            return bld.fdiv(a, b, flags=FMF)
        if op in ("min", "max"):
            c = bld.fcmp_ordered("<" if op == "min" else ">", a, b)
            return bld.select(c, a, b)
        if op in ("floordiv", "floormod"):
            q = self.math("floor", [bld.fdiv(a, b, flags=FMF)])
            if op == "floordiv":
                return q
            return bld.fsub(a, bld.fmul(q, b, flags=FMF), flags=FMF)
        raise ValueError(f"unknown float operator {op!r}")

    def _int_arith(self, e: Binary, a: ir.Value, b: ir.Value, wide: bool) -> ir.Value:
        bld, op, signed = self.b, e.op, is_signed(e.dtype)
        folded = _fold_int(op, a, b)
        if folded is not None:
            return folded
        # i64 arithmetic standing for int32 index math cannot overflow: say so, it helps SCEV.
        flags = ("nsw",) if wide and e.dtype == "int32" else ()
        if op in _INT_OPS:
            return self.pure(_INT_OPS[op], a, b, flags=flags)
        if op in ("min", "max"):
            cmp = bld.icmp_signed if signed else bld.icmp_unsigned
            return bld.select(cmp("<" if op == "min" else ">", a, b), a, b)
        if op in ("floordiv", "/", "floormod"):
            return self._floor_divmod(e, a, b, "floormod" if op == "floormod" else "floordiv")
        raise ValueError(f"unknown integer operator {op!r}")

    def _floor_divmod(self, e: Binary, a: ir.Value, b: ir.Value, op: str) -> ir.Value:
        bld = self.b
        k = const_int(e.b)
        if not is_signed(e.dtype):
            if k is None:  # x86 traps on division by zero: divide by 1 instead (numpy gives 0)
                b = bld.select(bld.icmp_unsigned("==", b, self.const_like(b.type, 0)),
                               self.const_like(b.type, 1), b)  # fmt: skip
            return bld.udiv(a, b) if op == "floordiv" else bld.urem(a, b)
        if k is not None and k > 0 and is_nonneg(e.a):
            # Fast path: non-negative dividend and positive constant divisor (tiled indices).
            return self.pure("udiv" if op == "floordiv" else "urem", a, b)
        zero = self.const_like(a.type, 0)
        by_zero = by_minus_one = None
        if k is None or k in (0, -1):
            # x86 traps on x / 0 and on INT_MIN / -1: divide by 1 instead and fix the result
            # (x // 0 -> 0 as numpy does, x // -1 -> -x wrapping).
            by_zero = bld.icmp_signed("==", b, zero)
            by_minus_one = bld.icmp_signed("==", b, self.const_like(b.type, -1))
            b = bld.select(bld.or_(by_zero, by_minus_one), self.const_like(b.type, 1), b)
        q, r = bld.sdiv(a, b), bld.srem(a, b)
        # Truncation rounds toward zero; floor differs when the remainder's sign differs from b's.
        need = bld.and_(bld.icmp_signed("!=", r, zero), bld.icmp_signed("<", bld.xor(r, b), zero))
        if op == "floordiv":
            q = bld.sub(q, bld.zext(need, q.type))
            if by_zero is not None:
                q = bld.select(by_minus_one, bld.sub(zero, a), bld.select(by_zero, zero, q))
            return q
        return bld.add(r, bld.select(need, b, zero))

    def _if_then_else(self, e: IfThenElse, wide: bool) -> ir.Value:
        cond = self.expr(e.cond)
        if is_scalar_const(cond):  # padding decided at compile time (an unrolled border)
            taken, other = (e.t, e.f) if cond.constant else (e.f, e.t)
            if self.skippable(other):
                return self.expr(taken, wide)
        if lanes_of(cond):
            raise ValueError(
                f"IfThenElse condition {e.cond} varies inside a vectorized loop; "
                "this should have been rejected by the vectorizability check"
            )
        bld = self.b
        then_bb = bld.append_basic_block("ite_then")
        else_bb = bld.append_basic_block("ite_else")
        merge_bb = bld.append_basic_block("ite_end")
        bld.cbranch(cond, then_bb, else_bb)
        bld.position_at_end(then_bb)
        tv = self.expr(e.t, wide)
        then_end = bld.block
        bld.position_at_end(else_bb)
        fv = self.expr(e.f, wide)
        else_end = bld.block
        lanes = max(lanes_of(tv), lanes_of(fv))
        bld.position_at_end(then_end)
        tv = self.splat(tv, lanes)
        bld.branch(merge_bb)
        bld.position_at_end(else_end)
        fv = self.splat(fv, lanes)
        bld.branch(merge_bb)
        bld.position_at_end(merge_bb)
        phi = bld.phi(tv.type)
        phi.add_incoming(tv, then_end)
        phi.add_incoming(fv, else_end)
        return phi
