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
from tensorir.expr import Var
from tensorir.loops import Allocate, Barrier, For, If, Program, Seq, Stmt, Store, walk_stmts

from .llvm_dot import REQUIRES_HEADER, dot_product_features
from .llvm_dot_emit import DotEmitter
from .llvm_expr import I32, I64, PTR, ExprEmitter, lanes_of, mem_type
from .llvm_loops import (  # noqa: F401  (re-exported: the loop limits and the parallel ABI)
    MAX_UNROLL_STMTS,
    MAX_VECTOR_LANES,
    PARALLEL_FOR_SYMBOL,
    PARALLEL_LAUNCH_SYMBOL,
    VECTOR_CHUNK,
    LoopEmitter,
)
from .llvm_vector import stride
from .source import BufferSpec, Launch, Source

# Data-dependent indices (tensorir.loops.CheckedIndex): an out-of-range one sets the module's
# global ``<entry>__index_error`` (i64 [check number + 1, value]) and the entry returns
# INDEX_ERROR_STATUS; ``<entry>__index_checks`` holds one "tensor<TAB>axis<TAB>extent" line per
# check, so runtime/cpu.py can name them (it keeps its own copy of these names: the ABI).
INDEX_ERROR_STATUS = 3
INDEX_ERROR_SUFFIX = "__index_error"
INDEX_CHECKS_SUFFIX = "__index_checks"
MAX_STACK_BYTES = 64 * 1024  # larger Allocates use malloc/free
MAX_FRAME_BYTES = 512 * 1024  # and so do all once a function's stack buffers reach this much
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


class _Generator(LoopEmitter, DotEmitter, ExprEmitter):
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
