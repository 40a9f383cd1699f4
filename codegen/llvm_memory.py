"""Memory reads for the LLVM expression emitter: buffer addresses, loads (scalar, contiguous
vector, strided gather, bool and bfloat16 widened) and the range check of data-dependent
indices (``CheckedIndex``) (a mixin of :class:`codegen.llvm_expr.ExprEmitter`)."""

from __future__ import annotations

from llvmlite import ir

from tensorir.dtype import itemsize
from tensorir.expr import Expr
from tensorir.loops import CheckedIndex, Load

from .llvm_types import I32, I64, is_signed, lanes_of, mem_type, with_lanes
from .llvm_vector import stride


class MemoryEmitter:
    """Mixin of :class:`~codegen.llvm_expr.ExprEmitter`: loads and checked indices."""

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
