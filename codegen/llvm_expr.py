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

The emitter is split by kind of node: this module holds the dispatch, the memo tables and the
leaves; ``llvm_types.py`` the types, ``llvm_casts.py`` conversions, ``llvm_arith.py`` operators
and constant folding, ``llvm_math.py`` math calls, ``llvm_memory.py`` loads and checked
indices. Import every name from this module.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from tensorir.dtype import bfloat16_bits_to_float32, float32_to_bfloat16_bits
from tensorir.expr import (
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

from .llvm_arith import ArithEmitter
from .llvm_casts import CastEmitter
from .llvm_math import MathEmitter
from .llvm_memory import MemoryEmitter
from .llvm_types import (
    F32,
    FMF,
    I1,
    I8,
    I16,
    I32,
    I64,
    PTR,
    VecVar,
    elem_type,
    is_float_dtype,
    is_scalar_const,
    is_signed,
    lanes_of,
    mem_type,
    reg_type,
    scalar_type,
    with_lanes,
)
from .llvm_vector import depends_on

__all__ = [
    "F32",
    "FMF",
    "I1",
    "I8",
    "I16",
    "I32",
    "I64",
    "PTR",
    "ExprEmitter",
    "VecVar",
    "elem_type",
    "is_float_dtype",
    "is_scalar_const",
    "is_signed",
    "lanes_of",
    "mem_type",
    "reg_type",
    "scalar_type",
    "with_lanes",
]


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


class ExprEmitter(CastEmitter, ArithEmitter, MathEmitter, MemoryEmitter):
    """Mixin: ``expr(e, wide)`` emits ``e`` at the current builder position.

    The kinds of node are emitted by the mixins it combines (casts, operators, math calls,
    memory reads); the dispatch, the memo tables and the leaves are here.
    """

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
            if is_scalar_const(v):
                return ir.Constant(v.type, int(v.constant) ^ 1)
            return self.b.xor(v, self.const_like(v.type, 1))
        if isinstance(e, Select):
            cond = self.expr(e.cond)
            if is_scalar_const(cond):  # an unrolled loop's constant indices decide it
                taken, other = (e.t, e.f) if cond.constant else (e.f, e.t)
                if self.skippable(other):
                    return self.expr(taken, wide)
            c, t, f = self.match(cond, self.expr(e.t, wide), self.expr(e.f, wide))
            if is_scalar_const(c):
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
