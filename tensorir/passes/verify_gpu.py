"""Static checks that a lowered Program fits a GPU's limits (TVM's ``VerifyGPUCode``).

The search uses :func:`gpu_program_errors` to drop candidates that would fail to launch (too many
threads, too much shared memory ...) before paying for compilation. It splits a Program into
kernels with :mod:`tensorir.kernels`, as the CUDA and OpenCL code generators do, so they compute
grid/block exactly as the verifier does.
"""

from __future__ import annotations

from ..kernels import BLOCK_TAGS, THREAD_TAGS, kernels
from ..loops import (
    Allocate,
    For,
    Program,
    Stmt,
    stmt_children,
    walk_stmts,
)
from .double_buffer import shared_memory_limit
from .tensor_core import tensor_core_errors


class GPUVerifyError(ValueError):
    """A Program breaks a GPU limit; the message lists every problem found."""


def _alloc_bytes(stmt: Stmt, scope: str) -> int:
    seen: dict = {}
    for s in walk_stmts(stmt):
        if isinstance(s, Allocate) and s.buffer.scope == scope:
            seen.setdefault(id(s.buffer), s.buffer.nbytes)
    return sum(seen.values())


def _local_bytes(stmt: Stmt, vthreads: int = 1) -> int:
    """Bytes of local buffers per thread once each virtual thread has its own copy (as after
    vthread injection, which is what TVM verifies)."""
    if isinstance(stmt, For) and stmt.kind == "vthread":
        vthreads *= stmt.extent
    own = stmt.buffer.nbytes * vthreads if isinstance(stmt, Allocate) else 0
    if isinstance(stmt, Allocate) and stmt.buffer.scope != "local":
        own = 0
    return own + sum(_local_bytes(k, vthreads) for k in stmt_children(stmt))


def _max_vthreads(stmt: Stmt, outer: int = 1) -> int:
    """The largest product of nested vthread extents along any path (virtual threads per thread)."""
    here = outer * stmt.extent if isinstance(stmt, For) and stmt.kind == "vthread" else outer
    kids = stmt_children(stmt)
    return max((_max_vthreads(k, here) for k in kids), default=here)


def structural_errors(program: Program) -> list[str]:
    """Problems that make ``program`` impossible to run on any GPU, whatever the limits."""
    errors = []
    for info in kernels(program):
        where = info.describe(program.name)
        if not info.extents:
            errors.append(
                f"stage {', '.join(info.outputs) or '?'} ({where}) is not bound to GPU threads; "
                "bind its outer loops to blockIdx.x/threadIdx.x"
            )
        for s in walk_stmts(info.stmt):
            if isinstance(s, For) and s.kind == "parallel":
                errors.append(
                    f"{where}: loop {s.var.name} is 'parallel', which only CPU targets run; "
                    "bind it to blockIdx/threadIdx instead"
                )
            elif isinstance(s, Allocate) and s.buffer.scope == "global" and s is not info.stmt:
                errors.append(
                    f"{where}: buffer {s.buffer.name} is allocated in global memory inside the "
                    "kernel; compute it at root (a workspace) or give it scope 'shared'/'local'"
                )
        if isinstance(info.stmt, Allocate) and info.stmt.buffer.scope == "global":
            errors.append(
                f"{where}: buffer {info.stmt.buffer.name} is allocated in global memory around "
                "the kernel; compute it at root so it becomes a workspace"
            )
    return errors


def gpu_program_errors(program: Program, limits: dict) -> list[str]:
    """Every reason ``program`` cannot run on a GPU with ``limits``, as messages (empty: valid).

    Parameters
    ----------
    program : Program
        A lowered program; each top-level statement is one kernel.
    limits : dict
        Keys (all optional; a missing key is not checked): ``max_threads_per_block``,
        ``max_shared_memory_per_block`` (bytes), ``max_shared_memory_per_block_optin`` (bytes
        a kernel with a pipelined loop may opt in to instead,
        :func:`~tensorir.passes.double_buffer.shared_memory_limit`),
        ``max_local_memory_per_block`` (bytes of
        ``local`` buffers per thread, times the enclosing vthread extents, as TVM counts them
        after vthread injection), ``max_vthread_extent`` (product of
        nested vthread extents), ``max_thread_x``/``_y``/``_z`` (threadIdx extents),
        ``max_grid_x``/``_y``/``_z`` (blockIdx extents), and
        ``warp_size`` with ``enforce_warp_multiple`` (reject blocks whose thread count is not a
        multiple of the warp size; off by default because odd shapes legitimately need such
        blocks).
    """
    errors = structural_errors(program)
    for info in kernels(program):
        where = info.describe(program.name)
        n = info.threads_per_block
        cap = limits.get("max_threads_per_block")
        if cap is not None and n > cap:
            errors.append(
                f"{where}: {n} threads per block (block={info.block}) exceed "
                f"max_threads_per_block={cap}; use smaller threadIdx split factors"
            )
        for axis, tag in zip("xyz", THREAD_TAGS):
            cap = limits.get(f"max_thread_{axis}")
            ext = info.extents.get(tag, 1)
            if cap is not None and ext > cap:
                errors.append(
                    f"{where}: {tag} extent {ext} exceeds max_thread_{axis}={cap}; "
                    f"split the loop bound to {tag} further"
                )
        for axis, tag in zip("xyz", BLOCK_TAGS):
            cap = limits.get(f"max_grid_{axis}")
            ext = info.extents.get(tag, 1)
            if cap is not None and ext > cap:
                errors.append(
                    f"{where}: {tag} extent {ext} exceeds max_grid_{axis}={cap}; "
                    f"bind fewer blocks to {tag} (fuse into blockIdx.x, or loop inside a block)"
                )
        cap, key = shared_memory_limit(info.stmt, limits)
        used = _alloc_bytes(info.stmt, "shared")
        if cap is not None and used > cap:
            errors.append(
                f"{where}: {used} bytes of shared memory exceed "
                f"{key}={cap}; use smaller tiles for the shared cache stages"
            )
        cap = limits.get("max_local_memory_per_block")
        used = _local_bytes(info.stmt)
        if cap is not None and used > cap:
            errors.append(
                f"{where}: {used} bytes of local memory exceed "
                f"max_local_memory_per_block={cap}; use smaller register tiles for local stages"
            )
        cap = limits.get("max_vthread_extent")
        vt = _max_vthreads(info.stmt)
        if cap is not None and vt > cap:
            errors.append(
                f"{where}: {vt} virtual threads exceed max_vthread_extent={cap}; "
                "use smaller vthread split factors"
            )
        errors += tensor_core_errors(info, program.name, limits)
        warp = limits.get("warp_size")
        if warp and limits.get("enforce_warp_multiple") and n % warp:
            errors.append(
                f"{where}: {n} threads per block is not a multiple of warp_size={warp}; "
                "pick threadIdx extents whose product is a multiple of the warp size"
            )
    return errors


def verify_gpu_program(program: Program, limits: dict) -> None:
    """Raise :class:`GPUVerifyError` listing every problem :func:`gpu_program_errors` finds."""
    errors = gpu_program_errors(program, limits)
    if errors:
        raise GPUVerifyError(
            f"program {program.name} does not fit the GPU:\n  " + "\n  ".join(errors)
        )
