"""Loop IR to LLVM IR for the CPU (through llvmlite.ir).

``build_llvm(program)`` returns a :class:`codegen.source.Source` of lang "llvm" whose code
defines ``i32 <entry>(ptr, ...)``: one pointer per param then per workspace, returning 0.
runtime/cpu.py compiles it (O3 for the host CPU) and provides the parallel launcher.

How loop kinds are emitted:

- serial / thread / vthread: a loop of basic blocks over an i64 induction variable (thread
  loops run serially so that GPU schedules can be tested on the CPU);
- unrolled: the body is emitted ``extent`` times with the variable bound to constants, unless
  that would emit too much code (then ``llvm.loop.unroll.full`` metadata);
- vectorized: explicit vector code when :func:`codegen.llvm_vector.vectorizable` accepts the
  body (contiguous loads/stores become vector loads/stores, uniform values are splatted, other
  loads are gathered lane by lane), else a scalar loop with ``llvm.loop.vectorize.enable``;
  with VNNI, a vectorized loop of int32 outputs around a uint8 x int8 reduction of 4 runs as
  one ``vpdpbusd`` per 4 reduction steps (the vertical form of :mod:`codegen.llvm_dot`);
- parallel (outermost only; nested ones run serially): the body becomes
  ``void <entry>_parallel_<n>(ptr closure, i64 begin, i64 end)`` which runs iterations
  ``[begin, end)``; the closure holds the captured buffer pointers and loop variables;
  ``autosched_parallel_for(task, closure, extent)`` (runtime/cpu.py) calls it over ranges that
  cover the loop, as its thread pool hands them out (runtime/cpu_pool.py).

The IR stays proportional to what the kernel computes, since the builders parse and optimize
all of it for every candidate: integer operations on constants (unrolled loops bind their
variables to constants) are folded while emitting, a select or ``IfThenElse`` whose condition
folds emits only its taken side, and a basic block's repeated integer and address instructions
(every unrolled copy's index arithmetic) are emitted once (``ExprEmitter.pure``; an arithmetic
tree met again with the same variable bindings in the same block is not even walked again).
LLVM would fold and merge them too; doing it here cut a winograd candidate's IR from 2.4 MB to
0.17 MB (benchmarks/bench_build.py).
"""

from __future__ import annotations

import gc
import re
from contextlib import contextmanager
from dataclasses import dataclass, field

from llvmlite import ir

from tensorir.dtype import itemsize
from tensorir.expr import Const, Expr, IfThenElse, Var
from tensorir.loops import Allocate, Barrier, For, If, Load, Program, Seq, Stmt, Store, walk_stmts

from .llvm_dot import (
    DOT_GROUP,
    DOT_WIDTHS,
    REQUIRES_HEADER,
    Int8Dot,
    Int8LaneDot,
    dot_product_features,
    match_int8_dot,
    match_int8_lane_dot,
)
from .llvm_expr import I32, I64, PTR, ExprEmitter, VecVar, lanes_of, mem_type
from .llvm_vector import depends_on, emitted_size, referenced, stride, vectorizable
from .source import BufferSpec, Launch, Source

# Data-dependent indices (tensorir.loops.CheckedIndex): an out-of-range one sets the module's
# global ``<entry>__index_error`` (i64 [check number + 1, value]) and the entry returns
# INDEX_ERROR_STATUS; ``<entry>__index_checks`` holds one "tensor<TAB>axis<TAB>extent" line per
# check, so runtime/cpu.py can name them (it keeps its own copy of these names: the ABI).
INDEX_ERROR_STATUS = 3
INDEX_ERROR_SUFFIX = "__index_error"
INDEX_CHECKS_SUFFIX = "__index_checks"
PARALLEL_FOR_SYMBOL = "autosched_parallel_for"
PARALLEL_LAUNCH_SYMBOL = "autosched_parallel_launch"  # the ABI before (runtime/cpu.py keeps it)
MAX_STACK_BYTES = 64 * 1024  # larger Allocates use malloc/free
MAX_FRAME_BYTES = 512 * 1024  # and so do all once a function's stack buffers reach this much
MAX_UNROLL_STMTS = 1024  # explicit unrolling emits at most this many statements per loop
MAX_VECTOR_LANES = 64  # longer vectorized loops run in chunks of VECTOR_CHUNK lanes
VECTOR_CHUNK = 32
# C library functions the generated code may call (directly or through LLVM intrinsics): an entry
# function with one of these names would capture those calls.
_LIBC = ("malloc", "free", "memcpy", "memset", "abort")
_LIBM = ("exp", "log", "sqrt", "tanh", "erf", "pow", "sin", "cos", "floor", "ceil", "round", "fabs")
_RESERVED = {
    *_LIBC,
    *_LIBM,
    *(f + "f" for f in _LIBM),
    PARALLEL_FOR_SYMBOL,
    PARALLEL_LAUNCH_SYMBOL,
    "GOMP_parallel",
}


@dataclass
class _Fn:
    """State of the LLVM function being emitted."""

    func: ir.Function
    builder: ir.IRBuilder
    allocas: ir.IRBuilder  # positioned in the entry block, which only holds allocas
    vars: dict = field(default_factory=dict)  # Var -> i64 value or VecVar
    bufs: dict = field(default_factory=dict)  # Buffer -> pointer
    in_parallel: bool = False
    vec_var: Var | None = None
    lanes: int = 0
    stack: dict = field(default_factory=dict)  # Buffer -> alloca (reused by unrolled copies)
    stack_bytes: int = 0


def entry_name(program: Program) -> str:
    """The LLVM symbol of a program's entry function."""
    name = re.sub(r"\W", "_", program.name) or "program"
    if name[0].isdigit() or name in _RESERVED:
        name = "f_" + name
    return name


def render(program: Program, target, options) -> Source:
    """The backend table's renderer (codegen.target.BACKENDS): :func:`build_llvm` with the
    CPU features and index checks of ``options`` (a ``codegen.target.RenderOptions``)."""
    return build_llvm(program, options.cpu_features, options.check_indices)


def build_llvm(program: Program, cpu_features=(), check_indices: bool = True) -> Source:
    """Compile a loop-IR Program to LLVM IR text for the CPU.

    Parameters
    ----------
    program : tensorir.loops.Program
    cpu_features : iterable of str
        LLVM names of the CPU features the code may use (``runtime.cpu.host_cpu_features()``
        for this host). With ``avx512vnni`` / ``avxvnni``, uint8 x int8 -> int32 dot-product
        loops use ``vpdpbusd`` (:mod:`codegen.llvm_dot`); without, they stay scalar loops.
    check_indices : bool
        Check data-dependent indices (``CheckedIndex``) at run time: an out-of-range one makes
        the entry return INDEX_ERROR_STATUS (the runtime raises an error naming it) and reads
        the nearest element inside the tensor instead. False emits the bare index
        (``AUTOSCHED_CHECK_INDICES=0``).

    Returns
    -------
    codegen.source.Source
        lang "llvm", one Launch of the entry function with args = params then workspaces.

    Raises
    ------
    ValueError
        For constructs the CPU cannot run (a Barrier together with thread loops, unbound
        variables, buffers used outside their Allocate, unsupported dtypes).
    """
    dot = dot_product_features(cpu_features)
    gen = _Generator(program, dot[0] if dot else None, check_indices)
    with _collector_paused():
        code = gen.run()
    if gen.used_dot_product:
        code = REQUIRES_HEADER + dot[1] + "\n" + code
    specs = lambda bufs: tuple(BufferSpec(b.name, b.dtype, b.size) for b in bufs)  # noqa: E731
    args = tuple(b.name for b in (*program.params, *program.workspaces))
    return Source(
        lang="llvm",
        code=code,
        params=specs(program.params),
        workspaces=specs(program.workspaces),
        launches=(Launch(gen.entry, args),),
        layouts=tuple(lay.as_tuple() for lay in program.param_layouts),
    )


class _Generator(ExprEmitter):
    def __init__(self, program: Program, dot_width: int | None = None, check_indices=True):
        self.program = program
        self.check_indices = check_indices
        self.index_checks: list = []  # the CheckedIndex nodes emitted, in check-number order
        self._index_error = None
        self.dot_width = dot_width  # bits of the vpdpbusd to use, None: none
        self.used_dot_product = False
        self.module = ir.Module(name=program.name)
        self.entry = entry_name(program)
        self.fn: _Fn | None = None
        self.n_parallel = 0
        self.n_blocks = 0
        self._has_var_memo: dict = {}
        self._skippable_memo: dict = {}
        self._cse: dict = {}  # ExprEmitter.pure's instructions
        self._pure_vars_memo: dict = {}
        self._expr_memo: dict = {}  # ExprEmitter.expr's values of pure Binary nodes
        self._keep_alive: list = []
        self.has_threads = any(
            isinstance(s, For) and s.kind == "thread" for s in walk_stmts(program.body)
        )

    # ------------------------------------------------------------------ functions
    def _new_fn(self, name: str, ret: ir.Type, args: list, internal: bool) -> _Fn:
        func = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        func.attributes.add("nounwind")
        if internal:
            func.linkage = "internal"
        entry = func.append_basic_block("entry")
        start = func.append_basic_block("start")
        allocas = ir.IRBuilder(entry)
        return _Fn(func=func, builder=ir.IRBuilder(start), allocas=allocas)

    @staticmethod
    def _close_fn(fn: _Fn) -> None:
        fn.allocas.branch(fn.func.blocks[1])

    def run(self) -> str:
        p = self.program
        bufs = [*p.params, *p.workspaces]
        names = [b.name for b in bufs]
        if len(set(names)) != len(names):
            raise ValueError(f"params and workspaces of program {p.name!r} need unique names")
        self.fn = self._new_fn(self.entry, I32, [PTR] * len(bufs), internal=False)
        for arg, buf in zip(self.fn.func.args, bufs):
            arg.name = re.sub(r"\W", "_", buf.name)
            arg.add_attribute("noalias")
            self.fn.bufs[buf] = arg
        self.stmt(p.body)
        self.b.ret(self._status())
        self._close_fn(self.fn)
        return str(self.module)

    def index_error_slot(self) -> ir.Value:
        """The module's ``[check number + 1, value]`` of the first out-of-range index."""
        if self._index_error is None:
            slot = ir.GlobalVariable(self.module, ir.ArrayType(I64, 2),
                                     self.entry + INDEX_ERROR_SUFFIX)  # fmt: skip
            slot.initializer = ir.Constant(ir.ArrayType(I64, 2), [0, 0])
            self._index_error = slot
        return self._index_error

    def _status(self) -> ir.Value:
        """0, or INDEX_ERROR_STATUS when a data-dependent index was out of range."""
        if self._index_error is None:
            return ir.Constant(I32, 0)
        lines = "".join(f"{c.tensor}\t{c.axis}\t{c.extent}\n" for c in self.index_checks)
        text = bytearray(lines.encode() + b"\0")
        table = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), len(text)),
                                  self.entry + INDEX_CHECKS_SUFFIX)  # fmt: skip
        table.initializer = ir.Constant(ir.ArrayType(ir.IntType(8), len(text)), text)
        table.global_constant = True
        zero = ir.Constant(I32, 0)
        failed = self.b.load(self.b.gep(self._index_error, [zero, zero], inbounds=True))
        bad = self.b.icmp_unsigned("!=", failed, ir.Constant(I64, 0))
        return self.b.select(bad, ir.Constant(I32, INDEX_ERROR_STATUS), ir.Constant(I32, 0))

    def block(self, hint: str) -> ir.Block:
        self.n_blocks += 1
        return self.fn.func.append_basic_block(f"{hint}{self.n_blocks}")

    # ------------------------------------------------------------------ statements
    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, Store):
            self.store(s)
        elif isinstance(s, For):
            self.for_(s)
        elif isinstance(s, If):
            self.if_(s)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, Barrier):
            if self.has_threads:
                raise ValueError(
                    "barrier requires a GPU target: this program binds loops to GPU threads "
                    "and synchronizes them; build it for 'cuda' or 'opencl'"
                )
        else:
            raise ValueError(f"the LLVM backend cannot compile statement {type(s).__name__}")

    def store(self, s: Store) -> None:
        buf, mt = s.buffer, mem_type(s.buffer.dtype)
        value = self.expr(s.value)
        if buf.dtype == "bool":
            value = self.b.zext(
                value, ir.VectorType(mt, lanes_of(value)) if lanes_of(value) else mt
            )
        elif buf.dtype == "bfloat16":
            value = self.bf16_round(value)
        align = itemsize(buf.dtype)
        if self.fn.vec_var is None or self.is_uniform(s.index):
            if lanes_of(value):
                raise ValueError(f"store to {buf.name} of a vector value at a uniform index")
            self.b.store(value, self.address(buf, self.expr(s.index, True)), align=align)
            return
        if stride(s.index, self.fn.vec_var) != 1:
            raise ValueError(f"store to {buf.name} is not contiguous in the vectorized loop")
        value = self.splat(value, self.fn.lanes)
        self.b.store(value, self.address(buf, self.lane0_index(s.index)), align=align)

    def if_(self, s: If) -> None:
        cond = self.expr(s.cond)
        if lanes_of(cond):
            raise ValueError(f"If condition {s.cond} varies inside a vectorized loop")
        then_bb, end_bb = self.block("if_then"), self.block("if_end")
        else_bb = self.block("if_else") if s.else_ is not None else end_bb
        self.b.cbranch(cond, then_bb, else_bb)
        self.b.position_at_end(then_bb)
        self.stmt(s.then)
        self.b.branch(end_bb)
        if s.else_ is not None:
            self.b.position_at_end(else_bb)
            self.stmt(s.else_)
            self.b.branch(end_bb)
        self.b.position_at_end(end_bb)

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        mt = mem_type(buf.dtype)
        ptr = self.fn.stack.get(buf)
        heap = ptr is None and (
            buf.nbytes > MAX_STACK_BYTES or self.fn.stack_bytes + buf.nbytes > MAX_FRAME_BYTES
        )
        if heap:
            malloc = self.intrinsic("malloc", PTR, [I64])
            ptr = self.b.call(malloc, [ir.Constant(I64, buf.nbytes)])
        elif ptr is None:
            ptr = self.fn.allocas.alloca(ir.ArrayType(mt, max(1, buf.size)), name=buf.name)
            ptr.align = 64
            ptr.type = PTR  # llvmlite types allocas as typed pointers; we use opaque ones
            self.fn.stack[buf] = ptr
            self.fn.stack_bytes += buf.nbytes
        saved = self.fn.bufs.get(buf)
        self.fn.bufs[buf] = ptr
        self.stmt(s.body)
        if saved is None:
            del self.fn.bufs[buf]
        else:
            self.fn.bufs[buf] = saved
        if heap:
            self.b.call(self.intrinsic("free", ir.VoidType(), [PTR]), [ptr])

    # ------------------------------------------------------------------ loops
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


@contextmanager
def _collector_paused():
    """No cyclic garbage collection inside the block (then as before).

    Emitting allocates hundreds of thousands of llvmlite objects that all live until the
    module is rendered, so each collection the allocations trigger rescans them to free
    nothing: ~40% of the emission's time (builders emit one module per candidate). The
    module's cycles are collected after, as usual."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _mask(indices) -> ir.Constant:
    return ir.Constant(ir.VectorType(I32, len(indices)), [ir.Constant(I32, i) for i in indices])


def _iota(n: int) -> ir.Constant:
    return _mask(range(n))
