"""One walker from loop IR to C-like GPU kernels; CUDA and OpenCL differ only in a dialect table.

Each top-level statement of ``program.body`` becomes one kernel ``<program>_kernel<i>``; its
launch dimensions come from its thread loops (see ``tensorir.kernels.kernels``).
Thread loops are not loops on a GPU: ``for tx in threadIdx.x`` becomes ``int tx = threadIdx.x;``.
When a tag's loops have different extents, the block is sized for the largest and the smaller
loops are guarded by ``if (tx < extent)``. Such a guard must never enclose a barrier (threads
that skip a ``__syncthreads()`` hang the block), so guards are closed before every barrier and
reopened after: :meth:`CRenderer._stmt` carries the pending guards down and wraps only the
largest barrier-free pieces in them. Before rendering,
:func:`tensorir.passes.inject_vthread.inject_virtual_threads_program` moves vthread loops
inward so that shared-memory fetches run once per block, not once per virtual thread.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from tensorir.dtype import LOW_PRECISION, is_float, is_int
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
    walk,
)
from tensorir.kernels import KernelInfo, kernels, loaded_buffers, stmt_exprs, stored_buffers
from tensorir.loops import (
    Allocate,
    Barrier,
    Buffer,
    CheckedIndex,
    For,
    If,
    Load,
    Program,
    Seq,
    Stmt,
    Store,
    walk_stmts,
)
from tensorir.passes.inject_vthread import inject_virtual_threads_program
from tensorir.passes.verify_gpu import structural_errors

from .source import BufferSpec, Launch, Source

_INFIX = {"+", "-", "*", "/", "<", "<=", ">", ">=", "==", "!=", "&&", "||",
          ">>", "<<", "&", "|", "^"}  # fmt: skip

# Names a generated identifier must not take: C/C++/OpenCL keywords, types and builtins we use.
_WORDS = """auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while bool true false half uchar ushort uint ulong class new
    delete this template typename namespace private public protected operator friend virtual
    threadIdx blockIdx blockDim gridDim warpSize min max abs exp log sqrt rsqrt tanh erf pow fabs
    floor ceil rint round sin cos kernel global local constant barrier select"""
RESERVED = frozenset(_WORDS.split())


def c_ident(name: str) -> str:
    """``name`` made a valid C identifier (letters, digits, ``_``; no leading digit)."""
    s = re.sub(r"[^0-9A-Za-z_]", "_", name) or "v"
    if s[0].isdigit():
        s = "v" + s
    if s in RESERVED or s.startswith("__"):
        s = "v_" + s.lstrip("_")
    return s


def _nonneg(e: Expr) -> bool:
    """Cheap proof that an integer expression is never negative (loop vars start at 0)."""
    if isinstance(e, Var):
        return True
    if isinstance(e, Const):
        return e.value >= 0
    if isinstance(e, Binary) and e.op in ("+", "*", "floordiv", "floormod", "min", "max"):
        return _nonneg(e.a) and _nonneg(e.b)
    if isinstance(e, Load):
        return not is_int(e.dtype) or e.dtype.startswith("uint")
    return isinstance(e, Cast) and is_int(e.dtype) and _nonneg(e.value)


def _positive_const(e: Expr) -> bool:
    return isinstance(e, Const) and e.value > 0


@dataclass
class _Kernel:
    """Per-kernel rendering state: identifiers, output lines and indentation."""

    info: KernelInfo
    names: dict = field(default_factory=dict)  # id(Var or Buffer) -> C identifier
    taken: set = field(default_factory=set)
    lines: list = field(default_factory=list)
    depth: int = 1


class CRenderer:
    """Loop IR -> C-like kernel source. Subclasses fill in the dialect (class attributes).

    Attributes a dialect sets: ``lang``; ``kernel_prefix`` (before the return type);
    ``global_qualifier`` (address space of pointer params); ``restrict``; ``shared_qualifier``;
    ``barrier``; ``thread_index`` (tag -> C expression); ``types`` (dtype -> C type);
    ``helper_qualifier`` (for inline helper functions); ``int64_suffix``; ``unsigned_prefix``
    (``"u"`` + ``"int"`` is OpenCL's unsigned type, ``"unsigned "`` + ``"int"`` C's).
    """

    lang = ""
    kernel_prefix = ""
    global_qualifier = ""
    restrict = ""
    shared_qualifier = ""
    barrier = ""
    thread_index: dict = {}
    types: dict = {}
    helper_qualifier = "static inline"
    int64_suffix = "LL"
    unsigned_prefix = "u"
    float_compute: frozenset = frozenset()
    """16-bit float dtypes whose arithmetic and comparisons go through float32 (each result is
    rounded back): types without native operators on every architecture (CUDA's bfloat16)."""

    def __init__(self, inject_vthreads: bool = True):
        self.inject_vthreads = inject_vthreads
        self._helpers: dict[str, str] = {}  # name -> definition, in first-use order
        self._dtypes: set[str] = set()

    # ------------------------------------------------------------------ dialect hooks

    def header(self) -> list[str]:
        """Lines before the helpers (includes, extension pragmas); sees the dtypes used."""
        return []

    def kernel_signature(self, name: str, params: list[str], info: KernelInfo) -> str:
        return f"{self.kernel_prefix} void {name}({', '.join(params)})"

    def pointer_param(self, buf: Buffer, name: str, read_only: bool) -> str:
        const = "const " if read_only else ""
        g = f"{self.global_qualifier} " if self.global_qualifier else ""
        return f"{g}{const}{self.storage_type(buf.dtype)}* {self.restrict} {name}"

    def shared_declarations(self, buffers: list[Buffer]) -> list[str]:
        """The lines that declare a kernel's shared (OpenCL: local) arrays."""
        return [f"{self.shared_qualifier} {self.array_decl(b)};" for b in buffers]

    def store_index(self, buf: Buffer, index: Expr) -> str:
        """C text of the element a store at ``index`` of ``buf`` writes (a backend may keep
        an array in another layout: the CUDA backend swizzles wgmma operand tiles)."""
        return self.expr(index)

    def array_decl(self, buf: Buffer) -> str:
        """The declaration of a kernel-local (shared or local) array, without the scope."""
        return f"{self.storage_type(buf.dtype)} {self._name(buf)}[{buf.size}]"

    def float_const(self, value: float, dtype: str) -> str:
        raise NotImplementedError

    def cast(self, dtype: str, src_dtype: str, v: str) -> str:
        return f"(({self.ctype(dtype)})({v}))"

    def math_call(self, name: str, args: list[str], dtype: str) -> str:
        raise NotImplementedError

    def minmax(self, op: str, a: str, b: str, dtype: str) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------------ types and constants

    def ctype(self, dtype: str) -> str:
        if dtype not in self.types:
            raise ValueError(
                f"{self.lang} code has no {dtype} type; use one of {sorted(self.types)} "
                f"(cast the network with to_mixed_precision(mod, 'float16') for 16 bits)"
            )
        self._dtypes.add(dtype)
        return self.types[dtype]

    def storage_type(self, dtype: str) -> str:
        """The element type of a buffer: bools are stored as bytes (as numpy stores them)."""
        return self.ctype("uint8" if dtype == "bool" else dtype)

    def const(self, e: Const) -> str:
        self._dtypes.add(e.dtype)
        if e.dtype == "bool":
            return "true" if e.value else "false"
        if is_float(e.dtype):
            return self.float_const(float(e.value), e.dtype)
        v = int(e.value)
        if e.dtype == "int32":
            if v == -(2**31):
                return "(-2147483647 - 1)"
            return f"({v})" if v < 0 else str(v)
        if e.dtype == "int64":
            if v == -(2**63):
                return f"(-9223372036854775807{self.int64_suffix} - 1)"
            s = f"{v}{self.int64_suffix}"
            return f"({s})" if v < 0 else s
        if e.dtype == "uint32":
            return f"{v}u"
        return f"(({self.ctype(e.dtype)}){v})"

    @staticmethod
    def float_text(value: float) -> str:
        """A finite float as C text with a decimal point or exponent (``1.0``, ``1e-05``)."""
        s = repr(float(value))
        return s if ("." in s or "e" in s) else s + ".0"

    # ------------------------------------------------------------------ helpers

    def helper(self, name: str, definition: str) -> str:
        """Register an inline helper function (emitted once, before the kernels)."""
        self._helpers.setdefault(name, definition)
        return name

    def floordiv(self, op: str, a: Expr, b: Expr, dtype: str) -> str:
        """Floor division / modulo (Python semantics), plain ``/`` ``%`` when both are >= 0."""
        sa, sb = self.expr(a), self.expr(b)
        if is_float(dtype):
            if dtype in LOW_PRECISION:
                return self.cast(dtype, "float32", self.floordiv(op, _f32(a), _f32(b), "float32"))
            t = self.ctype(dtype)
            fl = self.math_call("floor", ["(x / y)"], dtype)
            body = f"return {fl};" if op == "floordiv" else f"return x - {fl} * y;"
            name = self.helper(
                f"{op}_{t}", f"{self.helper_qualifier} {t} {op}_{t}({t} x, {t} y) {{ {body} }}"
            )
            return f"{name}({sa}, {sb})"
        c_op = "/" if op == "floordiv" else "%"
        if dtype.startswith("uint") or (_nonneg(a) and _positive_const(b)):
            return self._narrow(dtype, f"({sa} {c_op} {sb})")
        # Signed operands narrower than int are promoted to int by C anyway.
        t = self.ctype("int64" if dtype == "int64" else "int32")
        tag = "i64" if dtype == "int64" else "i32"
        if op == "floordiv":
            body = f"{t} q = x / y; return (q * y != x && ((x < 0) != (y < 0))) ? q - 1 : q;"
        else:
            body = f"{t} r = x % y; return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;"
        name = self.helper(
            f"{op}_{tag}", f"{self.helper_qualifier} {t} {op}_{tag}({t} x, {t} y) {{ {body} }}"
        )
        return self._narrow(dtype, f"{name}({sa}, {sb})")

    def _narrow(self, dtype: str, text: str) -> str:
        """C computes narrow integers in int; cast back so results wrap as numpy's do."""
        if dtype in ("int8", "int16", "uint8"):
            return f"(({self.ctype(dtype)}){text})"
        return text

    # ------------------------------------------------------------------ expressions

    def expr(self, e: Expr) -> str:
        if isinstance(e, Var):
            return self._name(e)
        if isinstance(e, Const):
            return self.const(e)
        if isinstance(e, Load):
            self._dtypes.add(e.dtype)
            text = f"{self._name(e.buffer)}[{self.expr(e.index)}]"
            return f"({text} != 0)" if e.buffer.dtype == "bool" else text
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, CheckedIndex):
            return self.checked_index(e)
        if isinstance(e, Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, Select | IfThenElse):
            # C's ?: evaluates only the taken branch: right for IfThenElse, harmless for Select.
            return f"({self.expr(e.cond)} ? {self.expr(e.t)} : {self.expr(e.f)})"
        if isinstance(e, Cast):
            if e.value.dtype == e.dtype:
                return self.expr(e.value)
            return self.cast(e.dtype, e.value.dtype, self.expr(e.value))
        if isinstance(e, Call):
            if e.dtype in LOW_PRECISION:
                inner = Call(e.name, tuple(_f32(a) for a in e.args), "float32")
                return self.cast(e.dtype, "float32", self.expr(inner))
            return self.math_call(e.name, [self.expr(a) for a in e.args], e.dtype)
        raise TypeError(
            f"cannot generate {self.lang} code for a {type(e).__name__} expression ({e}); "
            "lower the program to loop IR first"
        )

    def checked_index(self, e: CheckedIndex) -> str:
        """A data-dependent index, clamped into ``[0, extent)`` (as bound inference clamps it
        when it sizes a buffer): the kernel never reads outside the tensor. (GPU kernels do not
        report the error yet; the CPU's do.)"""
        t = self.ctype("int64" if e.dtype == "int64" else "int32")
        tag = "i64" if e.dtype == "int64" else "i32"
        ut = self.unsigned_prefix + t
        name = self.helper(
            f"checked_index_{tag}",
            f"{self.helper_qualifier} {t} checked_index_{tag}({t} x, {t} n) "
            f"{{ return (({ut})x < ({ut})n) ? x : (x < 0 ? 0 : n - 1); }}",
        )
        return f"{name}({self.expr(e.index)}, {self.expr(Const(e.extent, e.dtype))})"

    def binary(self, e: Binary) -> str:
        op, dtype = e.op, e.a.dtype
        if op in ("floordiv", "floormod"):
            return self.floordiv(op, e.a, e.b, e.dtype)
        if dtype in self.float_compute or (op in ("min", "max") and dtype in LOW_PRECISION):
            lowp = e.dtype == dtype  # arithmetic (a comparison gives bool)
            inner = Binary(op, _f32(e.a), _f32(e.b), "float32" if lowp else e.dtype)
            text = self.binary(inner)
            return self.cast(dtype, "float32", text) if lowp else text
        if op in ("min", "max"):
            return self.minmax(op, self.expr(e.a), self.expr(e.b), e.dtype)
        if op not in _INFIX:
            raise ValueError(f"unknown binary operator {op!r} in {e}")
        text = f"({self.expr(e.a)} {op} {self.expr(e.b)})"
        # Narrow operands are promoted to int: + - * and << can leave the dtype's range; >>,
        # &, |, ^ of sign- (zero-) extended values are the extended narrow result already.
        return self._narrow(e.dtype, text) if op in ("+", "-", "*", "<<") else text

    # ------------------------------------------------------------------ statements

    def _name(self, obj) -> str:
        k = self._k
        key = id(obj)
        if key not in k.names:
            base = c_ident(obj.name)
            name, n = base, 0
            while name in k.taken:
                n += 1
                name = f"{base}_{n}"
            k.names[key] = name
            k.taken.add(name)
        return k.names[key]

    def _line(self, text: str) -> None:
        self._k.lines.append("  " * self._k.depth + text)

    def _open(self, text: str) -> None:
        self._line(f"{text} {{" if text else "{")
        self._k.depth += 1

    def _close(self) -> None:
        self._k.depth -= 1
        self._line("}")

    def _stmt(self, s: Stmt, guards: tuple = ()) -> None:
        """Emit ``s`` under ``guards``: (thread tag, C condition) pairs still to be applied.

        A subtree is wrapped in the guards' ``if`` only when that is safe: it holds no barrier
        (every thread must reach those) and no loop re-binding a guarded tag (that loop's
        threads are all live again, e.g. a cooperative fetch inside a narrower compute loop).
        """
        if guards and not self._must_split(s, guards):
            self._open(f"if ({' && '.join(c for _, c in guards)})")
            self._stmt(s, ())
            self._close()
            return
        if isinstance(s, Seq):
            self._seq(s.stmts, guards)
        elif isinstance(s, For):
            self._for(s, guards)
        elif isinstance(s, Store):
            value, dtype = s.value, s.buffer.dtype
            text = self.expr(value)
            if value.dtype != dtype:
                text = self.cast(dtype, value.dtype, text)
            if dtype == "bool":
                text = f"(({self.storage_type(dtype)}){text})"
            self._line(f"{self._name(s.buffer)}[{self.store_index(s.buffer, s.index)}] = {text};")
        elif isinstance(s, If):
            self._open(f"if ({self.expr(s.cond)})")
            self._stmt(s.then, guards)
            self._close()
            if s.else_ is not None:
                self._open("else")
                self._stmt(s.else_, guards)
                self._close()
        elif isinstance(s, Allocate):
            b = s.buffer
            if b.scope == "local":
                self._line(f"{self.array_decl(b)};")
            elif b.scope == "global":
                raise ValueError(
                    f"buffer {b.name} is allocated in global memory inside a {self.lang} kernel; "
                    "compute it at root (a workspace) or give it scope 'shared'/'local'"
                )
            self._stmt(s.body, guards)  # shared buffers are declared at the kernel's top
        elif isinstance(s, Barrier):
            self._line(self.barrier)
        else:
            raise TypeError(f"cannot generate {self.lang} code for statement {type(s).__name__}")

    @staticmethod
    def _must_split(s: Stmt, guards: tuple) -> bool:
        tags = {t for t, _ in guards}
        return any(
            isinstance(n, Barrier) or (isinstance(n, For) and n.thread_tag in tags)
            for n in walk_stmts(s)
        )

    def _seq(self, items, guards: tuple) -> None:
        # Group consecutive guardable items under one `if` instead of one `if` each.
        run: list[Stmt] = []
        for item in [*items, None]:
            if item is not None and guards and not self._must_split(item, guards):
                run.append(item)
                continue
            if run:
                self._open(f"if ({' && '.join(c for _, c in guards)})")
                for r in run:
                    self._stmt(r, ())
                self._close()
                run = []
            if item is not None:
                self._stmt(item, guards)

    def _for(self, s: For, guards: tuple) -> None:
        v = self._name(s.var)
        if s.kind == "thread":
            tag = s.thread_tag
            if tag not in self.thread_index:
                raise ValueError(f"loop {s.var.name} has unknown thread tag {tag!r}")
            # A loop re-binding a tag replaces the outer loop's guard for it: each thread is
            # one iteration of the innermost loop bound to its tag.
            inner = tuple(g for g in guards if g[0] != tag)
            guarded = s.extent < self._k.info.extents[tag]
            if guarded:
                inner += ((tag, f"{v} < {s.extent}"),)
            self._open("")  # own scope: thread variables are declared, not looped
            if guarded or _reads_var(s.body, s.var):
                # Declared only when read: nvcc warns (#177-D) about unused variables.
                self._line(f"int {v} = {self.thread_index[tag]};")
            self._stmt(s.body, inner)
            self._close()
            return
        if s.kind == "parallel":
            raise ValueError(
                f"loop {s.var.name} is 'parallel', which only CPU targets run; "
                f"bind it to blockIdx/threadIdx for {self.lang}"
            )
        if s.kind in ("unrolled", "vthread"):
            self._line("#pragma unroll")
        self._open(f"for (int {v} = 0; {v} < {s.extent}; ++{v})")
        self._stmt(s.body, guards)
        self._close()

    # ------------------------------------------------------------------ kernels and program

    def _kernel(self, program: Program, info: KernelInfo) -> tuple[list[str], Launch]:
        self._k = _Kernel(info)
        body = info.stmt
        allocated = {}
        shared = {}
        for s in walk_stmts(body):
            if isinstance(s, Allocate):
                allocated[id(s.buffer)] = s.buffer
                if s.buffer.scope == "shared":
                    shared.setdefault(id(s.buffer), s.buffer)
        stored = {id(b) for b in stored_buffers(body)}
        used = {id(b): b for b in (*stored_buffers(body), *loaded_buffers(body))}
        args = [b for b in (*program.params, *program.workspaces) if id(b) in used]
        known = {id(b) for b in args} | set(allocated)
        unknown = [b.name for k, b in used.items() if k not in known]
        if unknown:
            raise ValueError(
                f"kernel {program.name}_kernel{info.index} uses buffers {unknown} that are "
                "neither params, workspaces nor allocated in the kernel"
            )
        params = [self.pointer_param(b, self._name(b), id(b) not in stored) for b in args]
        name = f"{c_ident(program.name)}_kernel{info.index}"
        self._k.taken.add(name)
        self._k.lines = []
        for line in self.shared_declarations(list(shared.values())):
            self._line(line)
        self._stmt(body)
        sig = self.kernel_signature(name, params, info)
        lines = [sig + " {", *self._k.lines, "}"]
        return lines, Launch(name, tuple(b.name for b in args), info.grid, info.block)

    def render(self, program: Program) -> Source:
        """Generate the kernels of ``program`` and their launches.

        Raises
        ------
        ValueError
            A top-level statement is not bound to GPU threads, a loop is 'parallel', or a
            global buffer is allocated inside a kernel.
        """
        problems = structural_errors(program)
        if problems:
            raise ValueError(
                f"cannot generate {self.lang} code for {program.name}:\n  " + "\n  ".join(problems)
            )
        self._helpers, self._dtypes = {}, set()
        for b in (*program.params, *program.workspaces):
            self._dtypes.add(b.dtype)
        if self.inject_vthreads:
            program = inject_virtual_threads_program(program)
        bodies, launches = [], []
        for info in kernels(program):
            lines, launch = self._kernel(program, info)
            bodies += ["", *lines]
            launches.append(launch)
        code = "\n".join([*self.header(), *self._helpers.values(), *bodies]) + "\n"

        def spec(b: Buffer) -> BufferSpec:
            return BufferSpec(b.name, b.dtype, b.size)

        return Source(
            lang=self.lang,
            code=code,
            params=tuple(spec(b) for b in program.params),
            workspaces=tuple(spec(b) for b in program.workspaces),
            launches=tuple(launches),
            layouts=tuple(lay.as_tuple() for lay in program.param_layouts),
        )


def _f32(e: Expr) -> Expr:
    """``e`` as float32 (half math goes through float, where every GPU has the functions)."""
    return e if e.dtype == "float32" else Cast("float32", e)


def is_special(value: float) -> bool:
    return math.isinf(value) or math.isnan(value)


def _reads_var(stmt: Stmt, var: Var) -> bool:
    """Whether an index, value or condition anywhere in ``stmt`` reads ``var``."""
    return any(node is var for st in walk_stmts(stmt) for e in stmt_exprs(st) for node in walk(e))
