"""A scalar Python interpreter of loop IR: the test oracle for lowering and schedules.

The Program is translated once into Python source (nested ``for`` loops over flat Python
lists), compiled, and cached per Program, so running many small programs stays cheap.
Every loop kind runs as a serial loop (threads and virtual threads included; barriers are
no-ops), which is the meaning backends must preserve; ``simt=True`` instead runs kernels the
GPU way (one generator per thread, block-wide barriers, per-block shared memory). Buffers
that are allocated or used as workspaces start filled with NaN (or a sentinel integer), so a
read before a write shows up in the result; with ``check_bounds`` every load and store checks
its flat index.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from .dtype import bits, is_bool, is_float, to_numpy
from .expr import Binary, Call, Cast, Const, Expr, IfThenElse, Not, Select, Var
from .loops import (
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

__all__ = ["LoopInterpError", "compile_program", "run_program"]

# Python refuses more than 20 statically nested blocks per function: deeper nests are
# outlined into helper functions.
_MAX_DEPTH = 16
_INT_SENTINEL = -123456789


class LoopInterpError(RuntimeError):
    """The program did something a backend could not: out-of-bounds access, bad arguments."""


def _oob(name: str, index: int, size: int):
    raise LoopInterpError(
        f"buffer {name!r}: flat index {index} is out of bounds [0, {size}); "
        "check the lowering's bounds / tail guards"
    )


def _checked(index: int, extent: int, tensor: str, axis: int) -> int:
    if 0 <= index < extent:
        return index
    raise IndexError(
        f"index {index} is out of range for axis {axis} of tensor {tensor!r} (size {extent}): "
        "a data-dependent index (a token id, say) is outside the table; fix the input"
    )


def _safe_exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _safe_log(x):
    if x > 0:
        return math.log(x)
    return -math.inf if x == 0 else math.nan


def _safe_sqrt(x):
    return math.sqrt(x) if x >= 0 else math.nan


def _rsqrt(x):
    return 1.0 / math.sqrt(x) if x > 0 else (math.inf if x == 0 else math.nan)


def _sigmoid(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def _pow(x, y):
    try:
        return math.pow(x, y)
    except (ValueError, OverflowError):
        return math.nan


def _div(a, b):
    try:
        return a / b
    except ZeroDivisionError:
        if a == 0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _round(x):
    # C's round(): half away from zero.
    return float(math.floor(abs(x) + 0.5)) * (1.0 if x >= 0 else -1.0)


def _to_int(x):
    if isinstance(x, float):
        if x != x or x in (math.inf, -math.inf):
            return 0
        return int(x)  # truncation, like a C cast
    return int(x)


def _shl(x: int, n: int, nbits: int, signed: bool) -> int:
    """``x << n`` wrapped to ``nbits`` like the hardware (Python ints never overflow)."""
    v = (int(x) << int(n)) & ((1 << nbits) - 1)
    return v - (1 << nbits) if signed and v >> (nbits - 1) else v


_FUNCS = {
    "exp": "_exp",
    "log": "_log",
    "sqrt": "_sqrt",
    "rsqrt": "_rsqrt",
    "tanh": "_m.tanh",
    "sigmoid": "_sigmoid",
    "erf": "_m.erf",
    "pow": "_pow",
    "fabs": "abs",
    "floor": "_floor",
    "ceil": "_ceil",
    "round": "_round",
    "sin": "_m.sin",
    "cos": "_m.cos",
}

_GLOBALS = {
    "_m": math,
    "_exp": _safe_exp,
    "_log": _safe_log,
    "_sqrt": _safe_sqrt,
    "_rsqrt": _rsqrt,
    "_sigmoid": _sigmoid,
    "_pow": _pow,
    "_div": _div,
    "_round": _round,
    "_floor": lambda x: float(math.floor(x)),
    "_ceil": lambda x: float(math.ceil(x)),
    "_int": _to_int,
    "_oob": _oob,
    "_checked": _checked,
    "_sel": lambda c, t, f: t if c else f,
    "_shl": _shl,
    "_inf": math.inf,
    "_nan": math.nan,
}

_TID = {
    "blockIdx.x": "_bx", "blockIdx.y": "_by", "blockIdx.z": "_bz",
    "threadIdx.x": "_tx", "threadIdx.y": "_ty", "threadIdx.z": "_tz",
}  # fmt: skip


def _launch(kernel, grid, block, shared_specs, args) -> None:
    """Run ``kernel`` (a generator function) SIMT-style: per block, every thread runs up to
    its next barrier before any thread passes it; all threads must meet the same barriers."""
    import itertools

    for bz, by, bx in itertools.product(*(range(g) for g in reversed(grid))):
        shared = [[fill] * size for fill, size in shared_specs]
        threads = [
            kernel(bx, by, bz, tx, ty, tz, *args, *shared)
            for tz, ty, tx in itertools.product(*(range(b) for b in reversed(block)))
        ]
        barrier = 0
        while threads:
            alive = []
            for t in threads:
                try:
                    next(t)
                    alive.append(t)
                except StopIteration:
                    pass
            if alive and len(alive) != len(threads):
                raise LoopInterpError(
                    f"block ({bx}, {by}, {bz}): only {len(alive)} of {len(threads)} threads "
                    f"reached barrier {barrier}; a barrier must not sit under a thread-"
                    "dependent condition"
                )
            threads = alive
            barrier += 1


_GLOBALS["_launch"] = _launch

_CMP = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}


class _Emitter:
    """Translates one Program into the source of a Python module with a ``_main`` function."""

    def __init__(self, program: Program, check_bounds: bool):
        self.program = program
        self.check = check_bounds
        self.names: dict[int, str] = {}  # id(Var or Buffer) -> Python name
        self.helpers: list[list[str]] = []
        self.counter = 0
        self.simt = False  # emitting a kernel body run per thread (see module_simt)
        self.dims: dict = {}  # thread tag -> launch extent of the kernel being emitted

    def name_of(self, obj, prefix: str) -> str:
        key = id(obj)
        if key not in self.names:
            self.counter += 1
            self.names[key] = f"{prefix}{self.counter}"
        return self.names[key]

    # ------------------------------------------------------------------ expressions
    def expr(self, e: Expr) -> str:
        if isinstance(e, Var):
            if id(e) not in self.names:
                raise LoopInterpError(f"variable {e.name!r} is used outside any loop binding it")
            return self.names[id(e)]
        if isinstance(e, Const):
            return self.const(e)
        if isinstance(e, Load):
            return self.access(e.buffer, e.index)
        if isinstance(e, Binary):
            a, b = self.expr(e.a), self.expr(e.b)
            op = e.op
            if op in ("+", "-", "*"):
                return f"({a} {op} {b})"
            if op == "/":
                return f"_div({a}, {b})" if is_float(e.dtype) else f"({a} // {b})"
            if op == "floordiv":
                return f"({a} // {b})" if not is_float(e.dtype) else f"_floor(_div({a}, {b}))"
            if op == "floormod":
                return f"({a} % {b})"
            if op in ("min", "max"):
                return f"{op}({a}, {b})"
            if op in _CMP:
                return f"({a} {_CMP[op]} {b})"
            # Python's >> is arithmetic, as on signed ints; unsigned values are non-negative.
            if op in (">>", "&", "|", "^"):
                return f"({a} {op} {b})"
            if op == "<<":
                signed = e.dtype.startswith("int")
                return f"_shl({a}, {b}, {bits(e.dtype)}, {signed})"
            if op == "&&":
                return f"({a} and {b})"
            if op == "||":
                return f"({a} or {b})"
            raise LoopInterpError(f"unknown binary operator {op!r}")
        if isinstance(e, Not):
            return f"(not {self.expr(e.a)})"
        if isinstance(e, Select):
            # Both branches are evaluated (as backends do), so an unsafe branch shows up.
            return f"_sel({self.expr(e.cond)}, {self.expr(e.t)}, {self.expr(e.f)})"
        if isinstance(e, IfThenElse):
            return f"({self.expr(e.t)} if {self.expr(e.cond)} else {self.expr(e.f)})"
        if isinstance(e, Cast):
            v = self.expr(e.value)
            if is_float(e.dtype):
                return f"float({v})"
            if is_bool(e.dtype):
                return f"bool({v})"
            return f"_int({v})"
        if isinstance(e, CheckedIndex):
            return f"_checked({self.expr(e.index)}, {e.extent}, {e.tensor!r}, {e.axis})"
        if isinstance(e, Call):
            args = ", ".join(self.expr(a) for a in e.args)
            return f"{_FUNCS[e.name]}({args})"
        raise LoopInterpError(
            f"cannot interpret expression node {type(e).__name__} ({e}); lowering must "
            "remove te-level nodes (TensorRead, Reduce) before running"
        )

    def const(self, e: Const) -> str:
        v = e.value
        if e.dtype == "bool":
            return "True" if v else "False"
        if is_float(e.dtype):
            v = float(v)
            if v != v:
                return "_nan"
            if v in (math.inf, -math.inf):
                return "_inf" if v > 0 else "(-_inf)"
            return repr(v)
        return repr(int(v))

    def access(self, buf: Buffer, index: Expr) -> str:
        b = self.name_of(buf, "b")
        idx = self.expr(index)
        if not self.check:
            return f"{b}[{idx}]"
        return (
            f"{b}[(_t if 0 <= (_t := {idx}) < {buf.size} else _oob({buf.name!r}, _t, {buf.size}))]"
        )

    # ------------------------------------------------------------------ statements
    def stmts(self, s: Stmt, ind: int, depth: int, scope: list[str], out: list[str]) -> None:
        pad = "    " * ind
        if isinstance(s, Seq):
            for st in s.stmts:
                self.stmts(st, ind, depth, scope, out)
            return
        if isinstance(s, For):
            if depth >= _MAX_DEPTH:
                self.outline(s, ind, scope, out)
                return
            if s.extent < 0:
                raise LoopInterpError(f"loop {s.var.name!r} has negative extent {s.extent}")
            v = self.name_of(s.var, "v")
            if self.simt and s.kind == "thread":
                # On a GPU a thread loop is no loop: the var is this thread's index.
                out.append(f"{pad}{v} = {_TID[s.thread_tag]}")
                if s.extent < self.dims[s.thread_tag]:
                    out.append(f"{pad}if {v} < {int(s.extent)}:")
                    n = len(out)
                    self.stmts(s.body, ind + 1, depth, [*scope, v], out)
                    if len(out) == n:
                        out.append(f"{pad}    pass")
                else:
                    self.stmts(s.body, ind, depth, [*scope, v], out)
                return
            out.append(f"{pad}for {v} in range({int(s.extent)}):")
            n = len(out)
            self.stmts(s.body, ind + 1, depth + 1, [*scope, v], out)
            if len(out) == n:
                out.append(f"{pad}    pass")
            return
        if isinstance(s, Store):
            val = self.expr(s.value)
            if s.buffer.dtype != "bool" and not is_float(s.buffer.dtype):
                val = f"_int({val})"
            elif is_float(s.buffer.dtype):
                val = f"float({val})"
            out.append(f"{pad}{self.access(s.buffer, s.index)} = {val}")
            return
        if isinstance(s, Allocate):
            b = self.name_of(s.buffer, "b")
            if not (self.simt and s.buffer.scope == "shared"):  # shared: one per block
                out.append(f"{pad}{b} = [{_fill(s.buffer.dtype)}] * {s.buffer.size}")
            self.stmts(s.body, ind, depth, [*scope, b], out)
            return
        if isinstance(s, If):
            out.append(f"{pad}if {self.expr(s.cond)}:")
            n = len(out)
            self.stmts(s.then, ind + 1, depth, scope, out)
            if len(out) == n:
                out.append(f"{pad}    pass")
            if s.else_ is not None:
                out.append(f"{pad}else:")
                n = len(out)
                self.stmts(s.else_, ind + 1, depth, scope, out)
                if len(out) == n:
                    out.append(f"{pad}    pass")
            return
        if isinstance(s, Barrier):
            if self.simt:
                out.append(f"{pad}yield")  # the launcher resumes threads block-wide
            return  # serial execution: every write is already visible
        raise LoopInterpError(f"cannot interpret statement {type(s).__name__}")

    def outline(self, s: For, ind: int, scope: list[str], out: list[str]) -> None:
        """Emit ``s`` as a separate function taking every name in scope (avoids Python's
        nesting limit)."""
        self.counter += 1
        fname = f"_h{self.counter}"
        body: list[str] = [f"def {fname}({', '.join(scope)}):"]
        if self.simt:
            body += ["    if False:", "        yield"]
        self.stmts(s, 1, 0, list(scope), body)
        self.helpers.append(body)
        call = f"{fname}({', '.join(scope)})"
        out.append(f"{'    ' * ind}{'yield from ' if self.simt else ''}{call}")

    def module(self) -> str:
        return self._module(lambda body, scope, out: self.stmts(body, 1, 0, scope, out))

    def module_simt(self) -> str:
        """Like :meth:`module`, but every top-level statement with thread loops is a kernel
        run as a generator per (block, thread); barriers are ``yield``s."""
        return self._module(self.host)

    def _module(self, emit_body) -> str:
        """``_main`` over the program's parameters and workspaces, its body written by
        ``emit_body(body, scope, out)``, after the helpers it needs."""
        p = self.program
        params = [self.name_of(b, "b") for b in p.params]
        out = [f"def _main({', '.join(params)}):"]
        scope = list(params)
        for w in p.workspaces:
            wn = self.name_of(w, "b")
            out.append(f"    {wn} = [{_fill(w.dtype)}] * {w.size}")
            scope.append(wn)
        n = len(out)
        emit_body(p.body, scope, out)
        if len(out) == n:
            out.append("    pass")
        lines = [line for h in self.helpers for line in h] + out
        return "\n".join(lines) + "\n"

    def host(self, s: Stmt, scope: list[str], out: list[str]) -> None:
        if isinstance(s, Seq):
            for st in s.stmts:
                self.host(st, scope, out)
            return
        if isinstance(s, Allocate) and s.buffer.scope == "global":
            b = self.name_of(s.buffer, "b")
            out.append(f"    {b} = [{_fill(s.buffer.dtype)}] * {s.buffer.size}")
            self.host(s.body, [*scope, b], out)
            return
        dims: dict = {}
        shared: list = []
        for node in walk_stmts(s):
            if isinstance(node, For) and node.kind == "thread":
                dims[node.thread_tag] = max(dims.get(node.thread_tag, 1), node.extent)
            if isinstance(node, Allocate) and node.buffer.scope == "shared":
                shared.append(node.buffer)
        if not dims:
            self.stmts(s, 1, 0, scope, out)
            return
        self.counter += 1
        kname = f"_k{self.counter}"
        snames = [self.name_of(b, "b") for b in shared]
        args = [*_TID.values(), *scope, *snames]
        body = [f"def {kname}({', '.join(args)}):", "    if False:", "        yield"]
        self.simt, self.dims = True, dims
        self.stmts(s, 1, 0, [*scope, *snames], body)
        self.simt, self.dims = False, {}
        self.helpers.append(body)
        grid = tuple(dims.get(f"blockIdx.{a}", 1) for a in "xyz")
        block = tuple(dims.get(f"threadIdx.{a}", 1) for a in "xyz")
        specs = [(_fill(b.dtype), b.size) for b in shared]
        spec_src = "[" + ", ".join(f"({f}, {n})" for f, n in specs) + "]"
        out.append(f"    _launch({kname}, {grid}, {block}, {spec_src}, ({', '.join(scope)},))")


def _fill(dtype: str) -> str:
    if is_float(dtype):
        return "_nan"
    if is_bool(dtype):
        return "False"
    return str(_INT_SENTINEL)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compile_program(program: Program, check_bounds: bool = True, simt: bool = False):
    """Translate ``program`` to a Python function ``f(*param_lists)`` (cached per Program).

    With ``simt``, top-level statements that contain thread loops run as GPU kernels: one
    generator per (block, thread), thread loops bind the thread's index, shared buffers are
    per block and barriers synchronize the block (see :func:`run_program`).

    Returns
    -------
    (function, source): the compiled entry point and its Python source (for debugging).
    """
    per = _CACHE.setdefault(program, {})
    key = (check_bounds, simt)
    if key not in per:
        em = _Emitter(program, check_bounds)
        src = em.module_simt() if simt else em.module()
        namespace = dict(_GLOBALS)
        exec(compile(src, f"<loop_interp {program.name}>", "exec"), namespace)
        per[key] = (namespace["_main"], src)
    return per[key]


def run_program(program: Program, arrays, check_bounds: bool = True, simt: bool = False) -> None:
    """Run ``program`` on numpy arrays, writing the results back into them in place.

    Parameters
    ----------
    program : Program
        A lowered program.
    arrays : dict or list
        numpy arrays for ``program.params``: a dict by buffer name, or a list in params order.
        Shapes must match (or have the same number of elements); dtypes are converted.
    check_bounds : bool
        Check every flat index against the buffer size (raises LoopInterpError).
    simt : bool
        Execute thread-bound loops as a GPU would (each thread sees one index, shared memory
        is per block, barriers are block-wide) instead of as serial loops. This checks
        cooperative fetching and barrier placement; a barrier that only some threads of a
        block reach raises LoopInterpError.
    """
    params = program.params
    if isinstance(arrays, dict):
        missing = [b.name for b in params if b.name not in arrays]
        if missing:
            raise LoopInterpError(
                f"run_program({program.name}): no array given for params {missing}; "
                f"expected {[b.name for b in params]}"
            )
        arrs = [arrays[b.name] for b in params]
    else:
        arrs = list(arrays)
        if len(arrs) != len(params):
            raise LoopInterpError(
                f"run_program({program.name}): got {len(arrs)} arrays for "
                f"{len(params)} params {[b.name for b in params]}"
            )
    lists = []
    for b, a in zip(params, arrs, strict=True):
        if not isinstance(a, np.ndarray):
            raise LoopInterpError(f"param {b.name!r}: expected a numpy array, got {type(a)}")
        if a.size != b.size:
            raise LoopInterpError(
                f"param {b.name!r}: array has {a.size} elements {a.shape}, buffer needs "
                f"{b.size} {list(b.shape)}"
            )
        flat = a.reshape(-1).tolist()
        lists.append(flat)
    fn, _ = compile_program(program, check_bounds, simt)
    fn(*lists)
    for b, a, lst in zip(params, arrs, lists, strict=True):
        if a.flags.writeable:
            a[...] = np.asarray(lst, dtype=to_numpy(b.dtype)).reshape(a.shape)
