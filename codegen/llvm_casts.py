"""Casts between dtypes for the LLVM expression emitter: integer resizing, the conversions of
``Cast`` (bool, int, float of every width) and bfloat16's round-to-nearest-even and widening
(a mixin of :class:`codegen.llvm_expr.ExprEmitter`)."""

from __future__ import annotations

from llvmlite import ir

from .llvm_types import (
    F32,
    I16,
    I32,
    elem_type,
    is_float_dtype,
    is_signed,
    lanes_of,
    reg_type,
    with_lanes,
)


class CastEmitter:
    """Mixin of :class:`~codegen.llvm_expr.ExprEmitter`: dtype conversions."""

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
