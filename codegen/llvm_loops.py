"""The loops of the LLVM backend (``llvm._Generator``): serial loops of basic blocks, unrolled
and vectorized ones, and parallel ones outlined as ``task(closure, begin, end)`` for
``autosched_parallel_for`` (runtime/cpu.py); codegen/llvm.py's docstring says how each kind is
emitted."""

from __future__ import annotations

import re

from llvmlite import ir

from tensorir.expr import Var
from tensorir.loops import For

from .llvm_dot import match_int8_dot, match_int8_lane_dot
from .llvm_expr import I32, I64, PTR, VecVar
from .llvm_vector import emitted_size, referenced, vectorizable

PARALLEL_FOR_SYMBOL = "autosched_parallel_for"
PARALLEL_LAUNCH_SYMBOL = "autosched_parallel_launch"  # the ABI before (runtime/cpu.py keeps it)
MAX_UNROLL_STMTS = 1024  # explicit unrolling emits at most this many statements per loop
MAX_VECTOR_LANES = 64  # longer vectorized loops run in chunks of VECTOR_CHUNK lanes
VECTOR_CHUNK = 32


class LoopEmitter:
    """Loop statements; mixed into ``llvm._Generator``, whose functions (``fn``, ``_new_fn``,
    ``_close_fn``), statements (``stmt``) and dot products (``int8_dot``) they use."""

    def bind(self, var: Var, value):
        """Bind ``var``; returns a restore function."""
        had = var in self.fn.vars
        old = self.fn.vars.get(var)

        def restore():
            if had:
                self.fn.vars[var] = old
            else:
                self.fn.vars.pop(var, None)

        self.fn.vars[var] = value
        return restore

    def loop(self, begin, end, body, hint: str = "for", metadata=None) -> None:
        """``for i in range(begin, end): body(i)`` with i64 ``i`` (begin/end ints or i64 values)."""
        if isinstance(begin, int):
            begin = ir.Constant(I64, begin)
        if isinstance(end, int):
            end = ir.Constant(I64, end)
        bld = self.b
        pre = bld.block
        head, body_bb, exit_bb = (
            self.block(hint),
            self.block(hint + "_body"),
            self.block(hint + "_end"),
        )
        bld.branch(head)
        bld.position_at_end(head)
        i = bld.phi(I64, name=hint)
        i.add_incoming(begin, pre)
        bld.cbranch(bld.icmp_signed("<", i, end), body_bb, exit_bb)
        bld.position_at_end(body_bb)
        body(i)
        nxt = self.b.add(i, ir.Constant(I64, 1), flags=("nuw", "nsw"))
        back = self.b.branch(head)
        if metadata:
            back.set_metadata("llvm.loop", self.loop_metadata(metadata))
        i.add_incoming(nxt, self.b.block)
        self.b.position_at_end(exit_bb)

    def loop_metadata(self, options: list) -> ir.MDValue:
        ops = []
        for opt in options:
            key, *vals = opt
            ops.append(self.module.add_metadata([ir.MetaDataString(self.module, key), *vals]))
        md = self.module.add_metadata(ops)
        md.operands = (md, *md.operands)  # loop IDs refer to themselves
        return md

    def for_(self, s: For) -> None:
        if s.extent <= 0:
            return
        if s.extent == 1:
            restore = self.bind(s.var, ir.Constant(I64, 0))
            self.stmt(s.body)
            restore()
            return
        if s.kind == "parallel" and not self.fn.in_parallel:
            self.parallel(s)
        elif s.kind == "unrolled":
            if emitted_size(s) <= MAX_UNROLL_STMTS:
                for k in range(s.extent):
                    restore = self.bind(s.var, ir.Constant(I64, k))
                    self.stmt(s.body)
                    restore()
            else:
                self.serial(s, [("llvm.loop.unroll.full",)])
        elif s.kind == "vectorized":
            if (
                self.dot_width
                and self.fn.vec_var is None
                and (dot := match_int8_lane_dot(s, self.dot_width // 32))
            ):
                self.int8_lane_dot(dot)
            elif self.fn.vec_var is None and vectorizable(s.body, s.var):
                self.vectorized(s)
            else:
                on = ir.Constant(ir.IntType(1), 1)
                self.serial(s, [("llvm.loop.vectorize.enable", on)])
        elif (
            self.dot_width
            and self.fn.vec_var is None
            and (dot := match_int8_dot(s, self.dot_width // 8))
        ):
            self.int8_dot(s, dot)
        else:
            self.serial(s)

    def serial(self, s: For, metadata=None) -> None:
        def body(i):
            restore = self.bind(s.var, i)
            self.stmt(s.body)
            restore()

        self.loop(0, s.extent, body, hint=re.sub(r"\W", "_", s.var.name), metadata=metadata)

    def vectorized(self, s: For) -> None:
        def chunk(base, lanes):
            saved = (self.fn.vec_var, self.fn.lanes)
            restore = self.bind(s.var, VecVar(base, lanes))
            self.fn.vec_var, self.fn.lanes = s.var, lanes
            self.stmt(s.body)
            self.fn.vec_var, self.fn.lanes = saved
            restore()

        if s.extent <= MAX_VECTOR_LANES:
            chunk(ir.Constant(I64, 0), s.extent)
            return
        full, tail = divmod(s.extent, VECTOR_CHUNK)
        self.loop(
            0,
            full,
            lambda c: chunk(self.b.mul(c, ir.Constant(I64, VECTOR_CHUNK)), VECTOR_CHUNK),
            hint="vchunk",
        )
        if tail:
            chunk(ir.Constant(I64, full * VECTOR_CHUNK), tail)

    # ------------------------------------------------------------------ parallel
    def parallel(self, s: For) -> None:
        used_vars, used_bufs = referenced(s.body)
        cap_bufs = [b for b in self.fn.bufs if b in used_bufs]
        cap_vars = [v for v in self.fn.vars if v in used_vars and v is not s.var]
        fields = [PTR] * len(cap_bufs) + [I64] * len(cap_vars)
        struct = ir.LiteralStructType(fields or [I64])
        self.n_parallel += 1
        base = f"{self.entry}_parallel_{self.n_parallel}"

        # The body function takes the captures as real arguments so that buffer pointers keep
        # their noalias attribute (it is inlined into the task function by O3).
        outer = self.fn
        body_fn = self._new_fn(base + "_body", ir.VoidType(), [*fields, I64, I64], internal=True)
        body_fn.in_parallel = True
        args = list(body_fn.func.args)
        for arg, buf in zip(args, cap_bufs):
            arg.name = re.sub(r"\W", "_", buf.name)
            arg.add_attribute("noalias")
            body_fn.bufs[buf] = arg
        for arg, var in zip(args[len(cap_bufs) :], cap_vars):
            arg.name = re.sub(r"\W", "_", var.name)
            body_fn.vars[var] = arg
        args[-2].name, args[-1].name = "begin", "end"
        self.fn = body_fn
        self.serial_range(s, args[-2], args[-1])
        self.b.ret_void()
        self._close_fn(body_fn)

        task = self._new_fn(base, ir.VoidType(), [PTR, I64, I64], internal=True)
        self.fn = task
        clo, begin, end = task.func.args
        clo.name, begin.name, end.name = "closure", "begin", "end"
        loaded = [
            self.b.load(
                self.b.gep(
                    clo,
                    [ir.Constant(I32, 0), ir.Constant(I32, k)],
                    inbounds=True,
                    source_etype=struct,
                ),
                typ=t,
            )  # fmt: skip
            for k, t in enumerate(fields)
        ]
        self.b.call(body_fn.func, [*loaded, begin, end])
        self.b.ret_void()
        self._close_fn(task)

        self.fn = outer
        closure = self.fn.allocas.alloca(struct, name="closure")
        closure.type = PTR
        values = [self.fn.bufs[b] for b in cap_bufs] + [self.fn.vars[v] for v in cap_vars]
        for k, v in enumerate(values):
            ptr = self.b.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, k)],
                             inbounds=True, source_etype=struct)  # fmt: skip
            self.b.store(v, ptr)
        launch = self.intrinsic(PARALLEL_FOR_SYMBOL, ir.VoidType(), [PTR, PTR, I64])
        self.b.call(launch, [task.func, closure, ir.Constant(I64, s.extent)])

    def serial_range(self, s: For, begin, end) -> None:
        def body(i):
            restore = self.bind(s.var, i)
            self.stmt(s.body)
            restore()

        self.loop(begin, end, body, hint=re.sub(r"\W", "_", s.var.name))
