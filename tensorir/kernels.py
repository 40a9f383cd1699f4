"""Splitting a lowered Program into GPU kernels, and each kernel's launch dimensions.

What a GPU code generator (codegen/c_like.py for CUDA and OpenCL) renders one kernel at a time,
and what the GPU verifier (tensorir/passes/verify_gpu.py) checks kernel by kernel: both split a
Program here, so grid/block come out the same in both.

Each top-level statement of ``program.body`` (a Seq's items, or the single body) is one kernel.
Its grid is the extents of its ``blockIdx.*`` loops and its block the extents of its
``threadIdx.*`` loops; when a tag occurs on several loops, the largest extent wins (code
generators guard the smaller loops).
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import walk
from .loops import Barrier, Buffer, For, If, Load, Program, Seq, Stmt, Store, walk_stmts

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(frozen=True)
class KernelInfo:
    """What the verifier and the code generators need to know about one kernel.

    Attributes
    ----------
    index : int
        Position of the kernel among the top-level statements.
    stmt : Stmt
        The kernel's statement.
    extents : dict
        Thread tag -> largest extent of a loop bound to it.
    grid, block : tuple of int
        Launch dimensions (x, y, z); missing tags count 1.
    outputs : tuple of str
        Names of the buffers the kernel stores into (used to name the stage in messages).
    """

    index: int
    stmt: Stmt
    extents: dict
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    outputs: tuple[str, ...]

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def describe(self, program_name: str) -> str:
        stage = ", ".join(self.outputs) or "nothing"
        return f"kernel {program_name}_kernel{self.index} (stage writing {stage})"


def kernel_stmts(program: Program) -> tuple[Stmt, ...]:
    """The top-level statements of ``program``, one per GPU kernel."""
    body = program.body
    return body.stmts if isinstance(body, Seq) else (body,)


def thread_extents(stmt: Stmt) -> dict:
    """Thread tag -> the largest extent among the loops of ``stmt`` bound to it."""
    out: dict = {}
    for s in walk_stmts(stmt):
        if isinstance(s, For) and s.kind == "thread":
            out[s.thread_tag] = max(out.get(s.thread_tag, 0), s.extent)
    return out


def stored_buffers(stmt: Stmt) -> tuple[Buffer, ...]:
    """The buffers ``stmt`` stores into, in first-store order, each once."""
    seen: dict = {}
    for s in walk_stmts(stmt):
        if isinstance(s, Store):
            seen.setdefault(id(s.buffer), s.buffer)
    return tuple(seen.values())


def stmt_exprs(s: Stmt) -> tuple:
    """The expressions held directly by statement ``s`` (not by nested statements)."""
    if isinstance(s, Store):
        return (s.index, s.value)
    if isinstance(s, If):
        return (s.cond,)
    return ()


def loaded_buffers(stmt: Stmt) -> tuple[Buffer, ...]:
    """The buffers read anywhere in ``stmt`` (indices and conditions included), each once."""
    seen: dict = {}
    for s in walk_stmts(stmt):
        for e in stmt_exprs(s):
            for node in walk(e):
                if isinstance(node, Load):
                    seen.setdefault(id(node.buffer), node.buffer)
    return tuple(seen.values())


def kernel_info(index: int, stmt: Stmt) -> KernelInfo:
    """Launch dimensions and outputs of the kernel ``stmt`` (no validity checks)."""
    ext = thread_extents(stmt)
    grid = tuple(ext.get(t, 1) for t in BLOCK_TAGS)
    block = tuple(ext.get(t, 1) for t in THREAD_TAGS)
    outputs = tuple(b.name for b in stored_buffers(stmt))
    return KernelInfo(index, stmt, ext, grid, block, outputs)


def kernels(program: Program) -> tuple[KernelInfo, ...]:
    """One :class:`KernelInfo` per top-level statement of ``program``."""
    return tuple(kernel_info(i, s) for i, s in enumerate(kernel_stmts(program)))


def has_barrier(stmt: Stmt) -> bool:
    return any(isinstance(s, Barrier) for s in walk_stmts(stmt))
