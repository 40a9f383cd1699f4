"""Math calls for the LLVM expression emitter: LLVM intrinsics where LLVM has one, libm
otherwise, rsqrt and sigmoid composed, float16 computed in float (a mixin of
:class:`codegen.llvm_expr.ExprEmitter`)."""

from __future__ import annotations

from llvmlite import ir

from tensorir.expr import Call

from .llvm_types import F32, FMF, elem_type, lanes_of, with_lanes

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


class MathEmitter:
    """Mixin of :class:`~codegen.llvm_expr.ExprEmitter`: ``Call`` nodes (MATH_FUNCS)."""

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
