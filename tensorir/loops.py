"""Loop IR: what lowering produces and every backend consumes.

A :class:`Program` is a loop nest over flat buffers. Conventions every pass and backend relies on:

- Buffers are addressed by a flat element offset (``Load(buf, index)``, ``Store(buf, index, v)``);
  ``Buffer.shape`` is kept for printing and bound checks. Index expressions have dtype int32.
- Every loop runs ``var`` over ``range(0, extent)`` with a constant int extent; tails of
  non-divisible splits are guarded by ``If`` statements (or ``IfThenElse`` expressions).
- ``For.kind`` is one of FOR_KINDS. ``"thread"`` loops carry ``thread_tag`` (blockIdx.x ...
  threadIdx.z) and are not loops on a GPU: each thread sees one value of ``var``; a tag may
  appear on several loops of one kernel (e.g. a cache stage and its consumer), all with the
  same meaning. ``"vthread"`` loops are virtual threads: correct to run as serial loops.
- ``For.annotations`` holds ``("auto_unroll_max_step", n)`` when the pragma was set, and
  ``("pragma", name)`` for an accelerator pragma (``steps.LOOP_PRAGMAS``; when the loop has
  extent 1 and disappears, the annotation moves to the loops just inside).
- ``Program.params`` are the DAG's tensors (inputs then outputs), ``Program.workspaces`` are
  global intermediates computed at the root; ``Allocate`` introduces everything else
  (shared / local scopes, and CPU buffers of stages attached inside loops).
- On GPU targets each statement of the top-level ``Seq`` (or the single body) is one kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dtype import itemsize
from .expr import Expr, Var

FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread", "vthread")
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z")  # fmt: skip
SCOPES = ("global", "shared", "local")


@dataclass(frozen=True, eq=False)
class Buffer:
    """A named array; compared by identity."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scope: str = "global"

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.size * itemsize(self.dtype)

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {list(self.shape)}, {self.dtype}, {self.scope})"


@dataclass(frozen=True, repr=False)
class Load(Expr):
    """``buffer[index]`` with a flat element offset."""

    buffer: Buffer
    index: Expr
    dtype: str

    def expr_children(self) -> tuple[Expr, ...]:
        return (self.index,)

    def with_children(self, new: tuple[Expr, ...]) -> Load:
        return Load(self.buffer, new[0], self.dtype)

    def to_text(self, fmt) -> str:
        return f"{self.buffer.name}[{fmt(self.index)}]"


@dataclass(frozen=True, repr=False)
class CheckedIndex(Expr):
    """``index`` along ``axis`` of tensor ``tensor`` (extent ``extent``), checked at run time.

    Lowering wraps every index of a read that is data dependent (it reads a tensor, as
    ``A[B[i], j]`` does), since nothing proves it in range. Its value is ``index`` when
    ``0 <= index < extent``; otherwise the kernel records the error (the CPU backend makes its
    entry return ``codegen.llvm.INDEX_ERROR_STATUS`` and the runtime raises an error naming
    the value, the tensor and the axis), and the value is clamped into ``[0, extent)`` (as
    bound inference clamps such an index when it sizes a buffer), so the kernel never reads
    outside the tensor or a buffer computed for the read. ``AUTOSCHED_CHECK_INDICES=0`` makes
    the LLVM backend emit the bare index (docs/graph-ops.md).
    """

    index: Expr
    extent: int
    tensor: str
    axis: int

    @property
    def dtype(self) -> str:
        return self.index.dtype

    def expr_children(self) -> tuple[Expr, ...]:
        return (self.index,)

    def with_children(self, new: tuple[Expr, ...]) -> CheckedIndex:
        return CheckedIndex(new[0], self.extent, self.tensor, self.axis)

    def to_text(self, fmt) -> str:
        return f"checked({fmt(self.index)}, {self.extent}, {self.tensor}.{self.axis})"


class Stmt:
    """Base class of loop-IR statements."""

    def __str__(self) -> str:
        from .loops_printer import stmt_str

        return stmt_str(self)


@dataclass(frozen=True, eq=False, repr=False)
class For(Stmt):
    var: Var
    extent: int
    body: Stmt
    kind: str = "serial"
    thread_tag: str | None = None
    annotations: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, eq=False, repr=False)
class Store(Stmt):
    buffer: Buffer
    index: Expr
    value: Expr


@dataclass(frozen=True, eq=False, repr=False)
class Allocate(Stmt):
    """Storage for ``buffer`` (its ``scope`` says where) live while ``body`` runs."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False, repr=False)
class If(Stmt):
    cond: Expr
    then: Stmt
    else_: Stmt | None = None


@dataclass(frozen=True, eq=False, repr=False)
class Barrier(Stmt):
    """Synchronize the threads of a block and make shared-memory writes visible."""


@dataclass(frozen=True, eq=False)
class Program:
    """A lowered schedule: the loop nest plus the buffers it reads and writes.

    ``param_layouts`` lists the weights stored in a rewritten layout
    (:mod:`tensorir.passes.layout_rewrite`): callers pass those params transformed.
    """

    name: str
    params: tuple[Buffer, ...]
    workspaces: tuple[Buffer, ...]
    body: Stmt
    param_layouts: tuple = ()

    def __str__(self) -> str:
        from .loops_printer import program_str

        return program_str(self)


def row_major_strides(shape) -> tuple[int, ...]:
    """Element strides of a C-contiguous array of ``shape`` (the last dimension's is 1)."""
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def stmt_children(s: Stmt) -> tuple[Stmt, ...]:
    if isinstance(s, For | Allocate):
        return (s.body,)
    if isinstance(s, Seq):
        return s.stmts
    if isinstance(s, If):
        return (s.then,) if s.else_ is None else (s.then, s.else_)
    return ()


def walk_stmts(s: Stmt):
    """Yield ``s`` and all nested statements, parents first."""
    stack = [s]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(stmt_children(node)))


def seq(*stmts: Stmt) -> Stmt:
    """A Seq without nesting or empty parts; a single statement is returned as is."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))
