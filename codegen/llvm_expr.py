"""Expressions to LLVM IR: types, conversions, arithmetic, math calls, loads (scalar and vector).

Used by codegen/llvm.py through :class:`ExprEmitter`, a mixin that needs ``self.module`` and
``self.fn`` (the function being built: its builder, bound variables, buffer pointers and, inside
an explicitly vectorized loop, the vector loop variable and its lane count).

Two conventions shape this file:

- *wide* int32: index arithmetic is written in int32 by the IR but computed here in i64, so that
  flat offsets of big buffers cannot overflow and addresses need no sign extension. Every
  int32-typed node evaluated for an index (or under a Cast / comparison of loop-variable
  arithmetic) is emitted as i64; stores and other data contexts keep i32.
- bfloat16: LLVM's ``bfloat`` type has no llvmlite builder, so a bfloat16 buffer is ``i16`` in
  memory and a bfloat16 value is ``float`` in registers: a load widens the 16 bits (exact, a
  shift), a store and a Cast to bfloat16 round to nearest even. Arithmetic between stores runs
  in float32, as the references do (float16 values stay ``half``: LLVM promotes each op).
- vector mode: inside an explicitly vectorized loop, a value is an LLVM vector only if it
  depends on the vector loop variable; everything else stays scalar and is splatted when it
  meets a vector, so uniform loads are done once per iteration, not per lane.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from tensorir.dtype import (
    DTYPES,
    bfloat16_bits_to_float32,
    float32_to_bfloat16_bits,
    itemsize,
)
from tensorir.expr import (
    BITWISE_OPS,
    CMP_OPS,
    LOGIC_OPS,
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    IfThenElse,
    Not,
    Select,
    Var,
    as_expr,
    walk,
)
from tensorir.loops import CheckedIndex, Load

from .llvm_vector import const_int, depends_on, is_nonneg, stride

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
PTR = ir.PointerType()
# Fast-math flags as TVM's "fast", minus nnan/ninf: reassociation lets LLVM vectorize reductions
# and contract forms FMAs, while -inf (max-pool init, padding) and NaN keep their meaning.
FMF = ("reassoc", "contract", "arcp", "afn", "nsz")

_SCALAR = {
    "float16": ir.HalfType(),
    "bfloat16": ir.FloatType(),  # a register; memory is i16 (see the module docstring)
    "float32": ir.FloatType(),
    "float64": ir.DoubleType(),
    "int8": I8,
    "int16": ir.IntType(16),
    "int32": I32,
    "int64": I64,
    "uint8": I8,
    "uint32": I32,
    "bool": I1,
}
# libm functions for math without an LLVM intrinsic, by float width.
_LIBM = {"tanh": ("tanhf", "tanh"), "erf": ("erff", "erf")}
_INTRINSIC = {
    "exp": "llvm.exp",
    "log": "llvm.log",
    "sqrt": "llvm.sqrt",
    "fabs": "llvm.fabs",
    "floor": "llvm.floor",
    "ceil": "llvm.ceil",
    "round": "llvm.round",  # halves away from zero, like C roundf and tensorir.interp
    "sin": "llvm.sin",
    "cos": "llvm.cos",
    "pow": "llvm.pow",
}


def scalar_type(dtype: str) -> ir.Type:
    """Register type of a dtype (bool is i1)."""
    try:
        return _SCALAR[dtype]
    except KeyError:
        raise ValueError(f"the LLVM backend does not support dtype {dtype!r}") from None


def mem_type(dtype: str) -> ir.Type:
    """In-memory element type (bool is stored as one byte, bfloat16 as its 16 bits)."""
    if dtype == "bfloat16":
        return I16
    return I8 if dtype == "bool" else scalar_type(dtype)


def reg_type(dtype: str, wide: bool) -> ir.Type:
    return I64 if wide and dtype == "int32" else scalar_type(dtype)


def is_signed(dtype: str) -> bool:
    return DTYPES[dtype][0] == "int"


def is_float_dtype(dtype: str) -> bool:
    return DTYPES[dtype][0] == "float"


@dataclass(frozen=True)
class VecVar:
    """The binding of the vector loop variable: lane ``l`` has the value ``base + l``."""

    base: ir.Value  # i64 scalar
    lanes: int


def lanes_of(v: ir.Value) -> int:
    return v.type.count if isinstance(v.type, ir.VectorType) else 0


def with_lanes(t: ir.Type, lanes: int) -> ir.Type:
    return ir.VectorType(t, lanes) if lanes else t


def elem_type(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t


_INT_OPS = {"+": "add", "-": "sub", "*": "mul"}


def _operand_key(v) -> object:
    """What identifies an operand of :meth:`ExprEmitter.pure`: a scalar constant by its type
    and value (each use makes a new ``ir.Constant``), a type or predicate by value, a value by
    identity (the memo keeps the instruction, and so its operands, alive)."""
    if type(v) is ir.Constant and isinstance(v.constant, (int, float)):
        return (v.type, v.constant)
    if isinstance(v, (str, ir.Type)):  # a comparison's predicate, a conversion's type
        return v
    if isinstance(v, tuple):
        return tuple(map(_operand_key, v))
    return id(v)


# Nodes whose value is a function of their variables' bindings alone (ExprEmitter.pure_vars).
_PURE_NODES = (Const, Var, Binary, Cast, Not, Select)


def _binding_key(v) -> object:
    """What identifies a variable's binding in :meth:`ExprEmitter.expr`'s memo."""
    if isinstance(v, VecVar):
        return ("vec", _operand_key(v.base), v.lanes)
    return _operand_key(v)


def _is_scalar_const(v: ir.Value) -> bool:
    """Whether ``v`` is a scalar integer (or i1) constant with a known value."""
    return type(v) is ir.Constant and isinstance(v.type, ir.IntType) and isinstance(v.constant, int)


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
    if fold is None or not (_is_scalar_const(a) and _is_scalar_const(b)) or a.type != b.type:
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


class ExprEmitter:
    """Mixin: ``expr(e, wide)`` emits ``e`` at the current builder position."""

    module: ir.Module
    fn: object  # codegen.llvm._Fn

    @property
    def b(self) -> ir.IRBuilder:
        return self.fn.builder

    # ------------------------------------------------------------------ helpers
    def const_like(self, t: ir.Type, value) -> ir.Constant:
        """A constant of type ``t`` (a splat constant when ``t`` is a vector type)."""
        if isinstance(t, ir.VectorType):
            return ir.Constant(t, [ir.Constant(t.element, value)] * t.count)
        return ir.Constant(t, value)

    def splat(self, v: ir.Value, lanes: int) -> ir.Value:
        if lanes == 0 or lanes_of(v):
            return v
        vt = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant) and not isinstance(v.type, ir.VectorType):
            return ir.Constant(vt, [v] * lanes)
        one = self.b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32, 0))
        zeros = ir.Constant(ir.VectorType(I32, lanes), [ir.Constant(I32, 0)] * lanes)
        return self.b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), zeros)

    def match(self, *vals: ir.Value) -> list[ir.Value]:
        """Splat scalars to the lane count of the vector operands, if any."""
        if len(vals) == 2:  # most calls (binary operators): nothing to splat when lanes agree
            a, b = vals
            la, lb = lanes_of(a), lanes_of(b)
            if la == lb:
                return [a, b]
            lanes = max(la, lb)
            return [self.splat(a, lanes), self.splat(b, lanes)]
        lanes = max(lanes_of(v) for v in vals)
        return [self.splat(v, lanes) for v in vals]

    def pure(self, op: str, *args, **kw) -> ir.Value:
        """``self.b.<op>(*args, **kw)`` for an integer or address instruction (no side
        effect), or the same instruction emitted before in this basic block. The index
        arithmetic of unrolled statements repeats (``udiv``/``urem``/``mul`` of the same loop
        variables in every copy): emitting it once keeps the IR, and so LLVM's parsing and
        optimization, smaller. LLVM's CSE would merge them anyway."""
        key = (self.b.block, op, *map(_operand_key, args), *kw.items())
        hit = self._cse.get(key)
        if hit is None:
            hit = self._cse[key] = getattr(self.b, op)(*args, **kw)
        return hit

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        return fn

    def per_lane(self, fn, *vals: ir.Value) -> ir.Value:
        """Apply a scalar function ``fn(*scalars)`` lane by lane (gathers, libm calls)."""
        lanes = lanes_of(vals[0])
        out = None
        for lane in range(lanes):
            idx = ir.Constant(I32, lane)
            r = fn(*[self.b.extract_element(v, idx) for v in vals])
            if out is None:
                out = ir.Constant(ir.VectorType(r.type, lanes), ir.Undefined)
            out = self.b.insert_element(out, r, idx)
        return out

    def lane_ramp(self, vv: VecVar) -> ir.Value:
        """``<base, base+1, ..., base+lanes-1>`` as an i64 vector."""
        steps = ir.Constant(
            ir.VectorType(I64, vv.lanes), [ir.Constant(I64, i) for i in range(vv.lanes)]
        )
        return self.pure("add", self.splat(vv.base, vv.lanes), steps)

    def is_uniform(self, e: Expr) -> bool:
        """True unless ``e`` varies across the lanes of the current vector loop."""
        return self.fn.vec_var is None or not depends_on(e, self.fn.vec_var)

    # ------------------------------------------------------------------ dispatch
    def expr(self, e: Expr, wide: bool = False) -> ir.Value:
        """Emit ``e``; int32 results are i64 when ``wide`` (see the module docstring)."""
        if not isinstance(e, Expr):
            e = as_expr(e)  # a Python number used as an index or value
        if isinstance(e, Const):
            return self._const(e, wide)
        if isinstance(e, Var):
            return self._var(e, wide)
        if isinstance(e, Binary):
            names = self.pure_vars(e)
            if names is None:
                return self._binary(e, wide)
            # Unrolled copies re-emit the same index arithmetic: with the same bindings of its
            # variables, in the same block, the value emitted before is the value.
            fvars = self.fn.vars
            key = (id(e), wide, self.b.block, *(_binding_key(fvars.get(v)) for v in names))
            hit = self._expr_memo.get(key)
            if hit is None:
                hit = self._expr_memo[key] = self._binary(e, wide)
            return hit
        if isinstance(e, Load):
            return self.load(e, wide)
        if isinstance(e, Cast):
            src_wide = e.value.dtype == "int32" and self.has_var(e.value)
            v = self.expr(e.value, src_wide)
            return self.convert(v, e.value.dtype, e.dtype, wide)
        if isinstance(e, Not):
            v = self.expr(e.a)
            if _is_scalar_const(v):
                return ir.Constant(v.type, int(v.constant) ^ 1)
            return self.b.xor(v, self.const_like(v.type, 1))
        if isinstance(e, Select):
            cond = self.expr(e.cond)
            if _is_scalar_const(cond):  # an unrolled loop's constant indices decide it
                taken, other = (e.t, e.f) if cond.constant else (e.f, e.t)
                if self.skippable(other):
                    return self.expr(taken, wide)
            c, t, f = self.match(cond, self.expr(e.t, wide), self.expr(e.f, wide))
            if _is_scalar_const(c):
                return t if c.constant else f
            return self.b.select(c, t, f)
        if isinstance(e, IfThenElse):
            return self._if_then_else(e, wide)
        if isinstance(e, Call):
            return self._call(e)
        if isinstance(e, CheckedIndex):
            return self._checked_index(e, wide)
        raise ValueError(
            f"the LLVM backend cannot compile expression {type(e).__name__} ({e}); "
            "te-level nodes (TensorRead, Reduce) must be lowered to loop IR first"
        )

    def has_var(self, e: Expr) -> bool:
        """Whether ``e`` mentions a loop variable (memoised per node: trees are shared)."""
        key = id(e)
        hit = self._has_var_memo.get(key)
        if hit is None:
            hit = any(isinstance(n, Var) for n in walk(e))
            self._has_var_memo[key] = hit
            self._keep_alive.append(e)
        return hit

    def pure_vars(self, e: Expr) -> tuple | None:
        """The variables of ``e`` when its value depends on nothing else (arithmetic of
        variables and constants: no memory, call or branch), else None (memoised per node)."""
        key = id(e)
        hit = self._pure_vars_memo.get(key, False)
        if hit is False:
            nodes = list(walk(e))
            hit = (
                tuple(dict.fromkeys(n for n in nodes if isinstance(n, Var)))
                if all(isinstance(n, _PURE_NODES) for n in nodes)
                else None
            )
            self._pure_vars_memo[key] = hit
            self._keep_alive.append(e)
        return hit

    def skippable(self, e: Expr) -> bool:
        """Whether ``e`` may be left unemitted when a constant condition discards it: it has
        no side effect (no checked index, which records its error) and is a scalar (so the
        result's lanes do not depend on it)."""
        key = id(e)
        hit = self._skippable_memo.get(key)
        if hit is None:
            hit = not any(isinstance(n, CheckedIndex) for n in walk(e))
            self._skippable_memo[key] = hit
            self._keep_alive.append(e)
        return hit and self.is_uniform(e)

    # ------------------------------------------------------------------ leaves
    def _const(self, e: Const, wide: bool) -> ir.Value:
        t = reg_type(e.dtype, wide)
        if e.dtype == "bool":
            return ir.Constant(I1, int(bool(e.value)))
        if e.dtype == "float16":
            return ir.Constant(t, float(np.float16(e.value)))
        if e.dtype == "bfloat16":
            bits = float32_to_bfloat16_bits(np.float32(e.value))
            return ir.Constant(t, float(bfloat16_bits_to_float32(bits)))
        if is_float_dtype(e.dtype):
            return ir.Constant(t, float(e.value))
        return ir.Constant(t, int(e.value))

    def _var(self, e: Var, wide: bool) -> ir.Value:
        v = self.fn.vars.get(e)
        if v is None:
            raise ValueError(
                f"variable {e.name!r} is used outside the loop that defines it; every Var in a "
                "loop-IR Program must be bound by an enclosing For"
            )
        if isinstance(v, VecVar):
            v = self.lane_ramp(v)
        return self.int_resize(v, reg_type(e.dtype, wide), signed=True)

    def int_resize(self, v: ir.Value, t: ir.Type, signed: bool) -> ir.Value:
        target = with_lanes(t, lanes_of(v))
        src_w, dst_w = elem_type(v.type).width, t.width
        if src_w == dst_w:
            return v
        if src_w > dst_w:
            return self.pure("trunc", v, target)
        return self.pure("sext" if signed else "zext", v, target)

    # ------------------------------------------------------------------ conversions
    def convert(self, v: ir.Value, src: str, dst: str, wide: bool) -> ir.Value:
        """Convert ``v`` of dtype ``src`` (any register width) to ``dst`` (wide if asked)."""
        lanes = lanes_of(v)
        et = reg_type(dst, wide)
        t = with_lanes(et, lanes)
        if dst == "bool":
            if is_float_dtype(src):
                return self.b.fcmp_unordered("!=", v, self.const_like(v.type, 0.0))
            return self.b.icmp_unsigned("!=", v, self.const_like(v.type, 0))
        if src == "bool":
            return self.b.uitofp(v, t) if is_float_dtype(dst) else self.b.zext(v, t)
        if dst == "bfloat16":  # to float32, then rounded to bfloat16's 8 significant bits
            v = self.convert(v, src, "float32", wide)
            return v if src == "bfloat16" else self.bf16_widen(self.bf16_round(v))
        if src == "bfloat16":
            src = "float32"
        sf, df = is_float_dtype(src), is_float_dtype(dst)
        if sf and df:
            sw = {"float16": 16, "float32": 32, "float64": 64}
            if sw[src] == sw[dst]:
                return v
            return self.b.fpext(v, t) if sw[src] < sw[dst] else self.b.fptrunc(v, t)
        if sf:
            return self.b.fptosi(v, t) if is_signed(dst) else self.b.fptoui(v, t)
        if df:
            return self.b.sitofp(v, t) if is_signed(src) else self.b.uitofp(v, t)
        return self.int_resize(v, et, signed=is_signed(src))

    def bf16_round(self, v: ir.Value) -> ir.Value:
        """float (or float vector) -> the i16 bits of bfloat16, rounded to nearest even; NaN
        stays a quiet NaN (the rounding carry could turn a NaN's payload into inf)."""
        bld, lanes = self.b, lanes_of(v)
        bits = bld.bitcast(v, with_lanes(I32, lanes))
        sixteen = self.const_like(bits.type, 16)
        lsb = bld.and_(bld.lshr(bits, sixteen), self.const_like(bits.type, 1))
        up = bld.add(bld.add(bits, self.const_like(bits.type, 0x7FFF)), lsb)
        out = bld.trunc(bld.lshr(up, sixteen), with_lanes(I16, lanes))
        nan = bld.fcmp_unordered("uno", v, v)
        return bld.select(nan, self.const_like(out.type, 0x7FC0), out)

    def bf16_widen(self, bits: ir.Value) -> ir.Value:
        """The i16 bits of bfloat16 (or a vector of them) -> float: exact."""
        lanes = lanes_of(bits)
        wide = self.b.zext(bits, with_lanes(I32, lanes))
        wide = self.b.shl(wide, self.const_like(wide.type, 16))
        return self.b.bitcast(wide, with_lanes(F32, lanes))

    # ------------------------------------------------------------------ operators
    def _binary(self, e: Binary, wide: bool) -> ir.Value:
        op = e.op
        if op in LOGIC_OPS:
            a = self.expr(e.a)
            # A constant left side decides ``false && b`` and ``true || b`` (unrolled loops
            # bind their variables to constants): b need not be emitted.
            if _is_scalar_const(a) and bool(a.constant) == (op == "||") and self.skippable(e.b):
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
        if _is_scalar_const(cond):  # padding decided at compile time (an unrolled border)
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

    # ------------------------------------------------------------------ math
    def _call(self, e: Call) -> ir.Value:
        args = [self.expr(a) for a in e.args]
        args = self.match(*args)
        if e.dtype == "float16":  # no half libm: compute in float, round back
            vt = with_lanes(F32, lanes_of(args[0]))
            args = [self.b.fpext(a, vt) for a in args]
            return self.b.fptrunc(
                self.math(e.name, args), with_lanes(ir.HalfType(), lanes_of(args[0]))
            )
        return self.math(e.name, args)

    def math(self, name: str, args: list[ir.Value]) -> ir.Value:
        """``name`` from MATH_FUNCS on float or float-vector values of one type."""
        bld, t = self.b, args[0].type
        et = elem_type(t)
        if name in _INTRINSIC:
            suffix = {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(et)]
            if isinstance(t, ir.VectorType):
                suffix = f"v{t.count}{suffix}"
            fn = self.intrinsic(f"{_INTRINSIC[name]}.{suffix}", t, [t] * len(args))
            return bld.call(fn, args, fastmath=FMF)
        one = self.const_like(t, 1.0)
        if name == "rsqrt":
            return bld.fdiv(one, self.math("sqrt", args), flags=FMF)
        if name == "sigmoid":
            neg = bld.fsub(self.const_like(t, 0.0), args[0], flags=FMF)
            return bld.fdiv(one, bld.fadd(one, self.math("exp", [neg]), flags=FMF), flags=FMF)
        if name in _LIBM:
            if isinstance(t, ir.VectorType):
                return self.per_lane(lambda x: self.math(name, [x]), args[0])
            libname = _LIBM[name][0 if isinstance(et, ir.FloatType) else 1]
            if isinstance(et, ir.HalfType):
                x = bld.fpext(args[0], F32)
                return bld.fptrunc(self.math(name, [x]), et)
            return bld.call(self.intrinsic(libname, t, [t]), args)
        raise ValueError(f"the LLVM backend has no implementation of math function {name!r}")

    # ------------------------------------------------------------------ checked indices
    def _checked_index(self, e: CheckedIndex, wide: bool) -> ir.Value:
        """``e.index`` if in ``[0, extent)``, else clamped into it after recording the error
        (the first one wins) in the module's error slot: ``[check number + 1, value]``."""
        v = self.expr(e.index, wide)
        if not self.check_indices:
            return v
        check = len(self.index_checks)
        self.index_checks.append(e)
        if lanes_of(v):
            return self.per_lane(lambda x: self._check_scalar(x, e, check), v)
        return self._check_scalar(v, e, check)

    def _check_scalar(self, v: ir.Value, e: CheckedIndex, check: int) -> ir.Value:
        bld = self.b
        # One unsigned compare covers both ends: a negative index is a huge unsigned one.
        ok = bld.icmp_unsigned("<", v, ir.Constant(v.type, e.extent))
        fail_bb, done_bb = self.block("index_error"), self.block("index_ok")
        bld.cbranch(ok, done_bb, fail_bb)
        # Out-of-range ids are rare: say so, so the check stays off the hot path.
        bld.block.terminator.set_weights([1 << 20, 1])
        bld.position_at_end(fail_bb)
        slot = self.index_error_slot()
        zero = ir.Constant(I32, 0)
        first = bld.cmpxchg(
            bld.gep(slot, [zero, zero], inbounds=True),
            ir.Constant(I64, 0),
            ir.Constant(I64, check + 1),
            "monotonic",
            "monotonic",
        )
        wrote_bb = self.block("index_error_first")
        bld.cbranch(bld.extract_value(first, 1), wrote_bb, done_bb)
        bld.position_at_end(wrote_bb)
        value = (
            v if v.type == I64 else (bld.sext(v, I64) if is_signed(e.dtype) else bld.zext(v, I64))
        )
        bld.store(value, bld.gep(slot, [zero, ir.Constant(I32, 1)], inbounds=True))
        bld.branch(done_bb)
        bld.position_at_end(done_bb)
        # Clamped, as bound inference clamps a data-dependent index when it sizes a buffer
        # computed inside the loop nest: the read stays inside that buffer too.
        low = bld.icmp_signed("<", v, ir.Constant(v.type, 0)) if is_signed(e.dtype) else None
        last = ir.Constant(v.type, e.extent - 1)
        fallback = last if low is None else bld.select(low, ir.Constant(v.type, 0), last)
        return bld.select(ok, v, fallback)

    # ------------------------------------------------------------------ memory
    def address(self, buf, index: ir.Value) -> ir.Value:
        ptr = self.fn.bufs.get(buf)
        if ptr is None:
            raise ValueError(
                f"buffer {buf.name!r} is accessed outside its Allocate (or is not a param or "
                "workspace of the Program)"
            )
        return self.pure("gep", ptr, (index,), inbounds=True, source_etype=mem_type(buf.dtype))

    def lane0_index(self, index: Expr) -> ir.Value:
        """The scalar i64 index of lane 0 of the current vector loop."""
        var = self.fn.vec_var
        saved = self.fn.vars[var]
        self.fn.vars[var] = saved.base
        try:
            return self.expr(index, True)
        finally:
            self.fn.vars[var] = saved

    def load(self, e: Load, wide: bool) -> ir.Value:
        buf, mt = e.buffer, mem_type(e.buffer.dtype)
        align = itemsize(buf.dtype)
        if self.is_uniform(e.index):
            v = self.b.load(self.address(buf, self.expr(e.index, True)), typ=mt, align=align)
        else:
            s = stride(e.index, self.fn.vec_var)
            lanes = self.fn.lanes
            if s in (0, 1):
                ptr = self.address(buf, self.lane0_index(e.index))
                if s == 1:
                    v = self.b.load(ptr, typ=ir.VectorType(mt, lanes), align=align)
                else:
                    v = self.b.load(ptr, typ=mt, align=align)
            else:  # gather, lane by lane
                idx = self.expr(e.index, True)
                v = self.per_lane(
                    lambda i: self.b.load(self.address(buf, i), typ=mt, align=align), idx
                )
        if buf.dtype == "bool":
            return self.b.icmp_unsigned("!=", v, self.const_like(v.type, 0))
        if buf.dtype == "bfloat16":
            return self.bf16_widen(v)
        if e.dtype == "int32" and wide:
            return self.pure("sext", v, with_lanes(I64, lanes_of(v)))
        return v
