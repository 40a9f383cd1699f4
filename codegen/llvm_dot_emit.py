"""The int8 dot products :mod:`codegen.llvm_dot` matches, emitted as ``vpdpbusd`` (AVX-512 VNNI /
AVX-VNNI): the horizontal form over a contiguous reduction, the vertical form over a vectorized
loop of outputs, and the packing of 4 reduction steps' bytes into one i32 per lane."""

from __future__ import annotations

from llvmlite import ir

from tensorir.expr import Const, Expr, IfThenElse
from tensorir.loops import For, Load

from .llvm_dot import DOT_GROUP, DOT_WIDTHS, Int8Dot, Int8LaneDot
from .llvm_expr import I32, I64, PTR, VecVar
from .llvm_vector import depends_on, stride


class DotEmitter:
    """Dot-product loops; mixed into ``llvm._Generator`` (its ``dot_width``, ``fn``, ``loop``,
    ``bind`` and the expression emitter)."""

    def int8_dot(self, s: For, dot: Int8Dot) -> None:
        """``acc += sum_k u8 * s8`` over whole vectors with vpdpbusd, then a scalar tail."""
        self.used_dot_product = True
        lanes, step = self.dot_width // 32, self.dot_width // 8
        vec_i32, vec_i8 = ir.VectorType(I32, lanes), ir.VectorType(ir.IntType(8), step)
        vpdpbusd = self.intrinsic(DOT_WIDTHS[self.dot_width], vec_i32, [vec_i32] * 3)
        reduce_add = self.intrinsic(f"llvm.vector.reduce.add.v{lanes}i32", I32, [vec_i32])
        acc = self.fn.allocas.alloca(vec_i32, name="dot_acc")
        acc.type = PTR  # llvmlite types allocas as typed pointers; we use opaque ones
        self.b.store(ir.Constant(vec_i32, None), acc)
        full = s.extent // step

        def chunk(c):
            restore = self.bind(s.var, self.b.mul(c, ir.Constant(I64, step)))
            u, sg = (
                self.b.bitcast(
                    self.b.load(self.address(ld.buffer, self.expr(ld.index, True)), typ=vec_i8,
                                align=1),
                    vec_i32,
                )
                for ld in (dot.unsigned, dot.signed)
            )  # fmt: skip
            restore()
            self.b.store(self.b.call(vpdpbusd, [self.b.load(acc, typ=vec_i32), u, sg]), acc)

        self.loop(0, full, chunk, hint="dot")
        total = self.b.call(reduce_add, [self.b.load(acc, typ=vec_i32)])
        where = self.address(dot.acc, self.expr(dot.acc_index, True))
        self.b.store(self.b.add(self.b.load(where, typ=I32, align=4), total), where, align=4)
        if s.extent % step:

            def tail(i):
                restore = self.bind(s.var, i)
                self.stmt(s.body)
                restore()

            self.loop(full * step, s.extent, tail, hint="dot_tail")

    def int8_lane_dot(self, dot: Int8LaneDot) -> None:
        """The vertical form (:mod:`codegen.llvm_dot`): per ``lanes`` outputs, load the int32
        accumulators once, one vpdpbusd per 4 reduction steps, store them once."""
        self.used_dot_product = True
        lanes = self.dot_width // 32
        vec_i32 = ir.VectorType(I32, lanes)
        vpdpbusd = self.intrinsic(DOT_WIDTHS[self.dot_width], vec_i32, [vec_i32] * 3)
        saved = (self.fn.vec_var, self.fn.lanes)
        for chunk in range(dot.lane_extent // lanes):
            restore = self.bind(dot.lane, VecVar(ir.Constant(I64, chunk * lanes), lanes))
            self.fn.vec_var, self.fn.lanes = dot.lane, lanes
            where = self.address(dot.acc, self.lane0_index(dot.acc_index))
            acc = self.b.load(where, typ=vec_i32, align=4)
            for k0 in range(0, dot.k_extent, DOT_GROUP):
                u = self.dot_operand(dot.unsigned, dot, k0)
                sg = self.dot_operand(dot.signed, dot, k0)
                acc = self.b.call(vpdpbusd, [acc, u, sg])
            self.b.store(acc, where, align=4)
            self.fn.vec_var, self.fn.lanes = saved
            restore()

    def dot_operand(self, e: Expr, dot: Int8LaneDot, k0: int) -> ir.Value:
        """Bytes ``e`` at reduction steps ``k0 .. k0+3`` of every lane as ``<lanes x i32>``
        (lane ``o`` holds ``e(o, k0)`` in its lowest byte ... ``e(o, k0+3)`` in its highest)."""
        lanes = self.fn.lanes
        if not depends_on(e, dot.lane):  # the same 4 bytes for every output: broadcast
            vec_var, self.fn.vec_var = self.fn.vec_var, None
            packed = self.packed_bytes(e, dot.k, k0)
            self.fn.vec_var = vec_var
            return self.splat(packed, lanes)
        vec_i32 = ir.VectorType(I32, lanes)
        if stride(e.index, dot.k) == 1 and stride(e.index, dot.lane) == DOT_GROUP:
            # [lane][4] contiguous (a weight after the layout rewrite): one vector load
            restore = self.bind(dot.k, ir.Constant(I64, k0))
            ptr = self.address(e.buffer, self.lane0_index(e.index))
            restore()
            return self.b.load(ptr, typ=vec_i32, align=1)
        rows = []  # per reduction step, the lanes' bytes (contiguous, strided or gathered)
        for t in range(DOT_GROUP):
            restore = self.bind(dot.k, ir.Constant(I64, k0 + t))
            rows.append(self.expr(e))
            restore()
        pairs = [self.b.shuffle_vector(rows[i], rows[i + 1], _iota(2 * lanes)) for i in (0, 2)]
        # the 4 rows side by side -> lane-major: lane o takes byte o of each row in turn
        mask = [t * lanes + o for o in range(lanes) for t in range(DOT_GROUP)]
        both = self.b.shuffle_vector(pairs[0], pairs[1], _mask(mask))
        return self.b.bitcast(both, vec_i32)

    def packed_bytes(self, e: Expr, k, k0: int) -> ir.Value:
        """Scalar i32 of the bytes ``e(k0) .. e(k0+3)`` (lowest first)."""
        if isinstance(e, Load) and stride(e.index, k) == 1:
            restore = self.bind(k, ir.Constant(I64, k0))
            ptr = self.address(e.buffer, self.expr(e.index, True))
            restore()
            return self.b.load(ptr, typ=I32, align=1)
        if isinstance(e, Const):
            return ir.Constant(I32, (int(e.value) & 0xFF) * 0x01010101)
        if isinstance(e, IfThenElse) and not depends_on(e.cond, k):
            # padding: one test for the 4 bytes, the load only where it is in bounds
            cond = self.expr(e.cond)
            then_bb, else_bb = self.block("dot_then"), self.block("dot_else")
            end_bb = self.block("dot_end")
            self.b.cbranch(cond, then_bb, else_bb)
            values = []
            for bb, branch in ((then_bb, e.t), (else_bb, e.f)):
                self.b.position_at_end(bb)
                values.append((self.packed_bytes(branch, k, k0), self.b.block))
                self.b.branch(end_bb)
            self.b.position_at_end(end_bb)
            phi = self.b.phi(I32)
            for v, bb in values:
                phi.add_incoming(v, bb)
            return phi
        out = ir.Constant(I32, 0)
        for t in range(DOT_GROUP):
            restore = self.bind(k, ir.Constant(I64, k0 + t))
            byte = self.b.zext(self.expr(e), I32)
            restore()
            out = self.b.or_(out, self.b.shl(byte, ir.Constant(I32, 8 * t)) if t else byte)
        return out


def _mask(indices) -> ir.Constant:
    return ir.Constant(ir.VectorType(I32, len(indices)), [ir.Constant(I32, i) for i in indices])


def _iota(n: int) -> ir.Constant:
    return _mask(range(n))
