"""``cp.async`` in the CUDA backend: which 16-byte global-to-shared copies of a pipelined
tensor-core kernel run asynchronously (sm_80+), where an N-stage pipeline commits its groups
and how many each barrier leaves in flight (:mod:`tensorir.passes.double_buffer`), and the
device helpers that issue, commit and wait for them. A mixin of
:class:`codegen.cuda.CUDARenderer`."""

from __future__ import annotations

from tensorir.loops import For, If, Seq, Stmt, walk_stmts
from tensorir.passes.double_buffer import (
    PIPELINE_PROLOGUE,
    is_double_buffered,
    lag_of,
    pipeline_stages,
)

from . import cuda_arch
from .cuda_arch import cp_async_available

__all__ = ["AsyncCopies", "cp_async_prelude"]

# Guarded: sources of several programs may be concatenated into one translation unit.
_CP_ASYNC = (
    "#ifndef AUTOSCHED_CP_ASYNC16\n"
    "#define AUTOSCHED_CP_ASYNC16\n"
    "static __device__ __forceinline__ void cp_async16(void* dst, const void* src) {\n"
    "#if __CUDA_ARCH__ >= {arch}0\n"
    "  unsigned int d = (unsigned int)__cvta_generic_to_shared(dst);\n"
    '  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(src) '
    ': "memory");\n'
    "#else\n"
    "  *(uint4*)dst = *(const uint4*)src;\n"
    "#endif\n"
    "}\n"
    "#endif"
)
# An im2col gather's word: the 16 source bytes, or 16 zeros where the tap is off the image
# (src-size 0 reads nothing, so the source pointer falls back to the array's start).
_CP_ASYNC_ZFILL = (
    "#ifndef AUTOSCHED_CP_ASYNC16_ZFILL\n"
    "#define AUTOSCHED_CP_ASYNC16_ZFILL\n"
    "static __device__ __forceinline__ void cp_async16_zfill(void* dst, const void* src, "
    "bool valid) {\n"
    "#if __CUDA_ARCH__ >= {arch}0\n"
    "  unsigned int d = (unsigned int)__cvta_generic_to_shared(dst);\n"
    "  int n = valid ? 16 : 0;\n"
    '  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(d), "l"(src), '
    '"r"(n) : "memory");\n'
    "#else\n"
    "  *(uint4*)dst = valid ? *(const uint4*)src : make_uint4(0u, 0u, 0u, 0u);\n"
    "#endif\n"
    "}\n"
    "#endif"
)
_CP_ASYNC_WAIT = (
    "#ifndef AUTOSCHED_CP_ASYNC_WAIT\n"
    "#define AUTOSCHED_CP_ASYNC_WAIT\n"
    "static __device__ __forceinline__ void cp_async_wait_all() {\n"
    "#if __CUDA_ARCH__ >= {arch}0\n"
    '  asm volatile("cp.async.wait_all;" ::: "memory");\n'
    "#endif\n"
    "}\n"
    "#endif"
)
# N >= 3 stage pipelines: one group per k tile, and a wait that leaves N - 2 of them in flight.
_CP_ASYNC_COMMIT = (
    "#ifndef AUTOSCHED_CP_ASYNC_COMMIT\n"
    "#define AUTOSCHED_CP_ASYNC_COMMIT\n"
    "static __device__ __forceinline__ void cp_async_commit() {\n"
    "#if __CUDA_ARCH__ >= {arch}0\n"
    '  asm volatile("cp.async.commit_group;" ::: "memory");\n'
    "#endif\n"
    "}\n"
    "#endif"
)
_CP_ASYNC_WAIT_GROUP = (
    "#ifndef AUTOSCHED_CP_ASYNC_WAIT_GROUP{n}\n"
    "#define AUTOSCHED_CP_ASYNC_WAIT_GROUP{n}\n"
    "static __device__ __forceinline__ void cp_async_wait_group{n}() {\n"
    "#if __CUDA_ARCH__ >= {arch}0\n"
    '  asm volatile("cp.async.wait_group {n};" ::: "memory");\n'
    "#endif\n"
    "}\n"
    "#endif"
)


def cp_async_prelude(wait_groups: tuple[int, ...] = ()) -> str:
    """The device helpers of a hand-built pipeline (``benchmarks/bench_wgmma_probe.py``):
    ``cp_async16``, ``cp_async_commit`` and ``cp_async_wait_group{n}`` for each ``n``."""
    arch = str(cuda_arch.CP_ASYNC_MIN_ARCH)
    parts = [_CP_ASYNC, _CP_ASYNC_COMMIT]
    parts += [_CP_ASYNC_WAIT_GROUP.replace("{n}", str(n)) for n in wait_groups]
    return "\n".join(p.replace("{arch}", arch) for p in parts) + "\n"


class AsyncCopies:
    """The ``cp.async`` part of the CUDA renderer (state set up in its ``_kernel``)."""

    def _async_copies(self, stmt) -> set[int]:
        """The 16-byte global-to-shared copies of a kernel with a double-buffered loop
        (:mod:`tensorir.passes.double_buffer`), im2col gathers of 16-byte words included (zero
        filled off the image), run as ``cp.async`` on sm_80+: each barrier of
        such a kernel first waits for them (``cp.async.wait_all``), which is where the
        pipeline needs its copies complete (see the race argument there). Other kernels, and
        every kernel for an older ``-arch``, keep their synchronous copies."""
        if cp_async_available(self.arch) is False or not (self._vec_copies or self._gathers):
            return set()
        if not any(is_double_buffered(x) for x in walk_stmts(stmt)):
            return set()
        copies = {
            key
            for key, (dst, src, *_, word) in self._vec_copies.items()
            if word == "uint4" and dst.scope == "shared" and src.scope == "global"
        }
        # An im2col gather (a 16-byte word, or zeros off the image) is the same copy with a
        # zero fill: without it a 3x3 or strided conv loaded its next tile synchronously.
        gathers = {
            key
            for key, (dst, src, *_, nbytes) in self._gathers.items()
            if nbytes == 16 and dst.scope == "shared" and src.scope == "global"
        }
        return copies | gathers

    @staticmethod
    def _async_groups(stmt: Stmt | None) -> tuple[set[int], int]:
        """Where an N >= 3 stage pipeline commits its ``cp.async`` groups (after the body of
        its prologue loop and after the guarded copies that start each iteration) and how many
        groups each barrier leaves in flight (N - 2, N - 3 for a pipeline that lags a tile):
        see the race argument of
        :mod:`tensorir.passes.double_buffer`. ``(set(), 0)`` (``wait_all`` before every barrier,
        no groups) for two stages, or where the loops are not of the pass's shape."""
        if stmt is None:
            return set(), 0
        loops = [x for x in walk_stmts(stmt) if pipeline_stages(x) >= 3]
        prologues = [x for x in walk_stmts(stmt) if isinstance(x, For)
                     and any(a[0] == PIPELINE_PROLOGUE for a in x.annotations)]  # fmt: skip
        stages = {pipeline_stages(x) - lag_of(x) for x in loops}  # lagging: a tile fewer ahead
        firsts = [x.body.stmts[0] for x in loops if isinstance(x.body, Seq)]
        if (len(stages) != 1 or len(prologues) != len(loops) or len(firsts) != len(loops)
                or not all(isinstance(f, If) for f in firsts)):  # fmt: skip
            return set(), 0
        return {id(x) for x in firsts} | {id(p.body) for p in prologues}, stages.pop() - 2

    def _cp_async_copy(self, copy) -> None:
        dst, src, dbase, sbase, _ = copy
        name = self.helper(
            "cp_async16", _CP_ASYNC.replace("{arch}", str(cuda_arch.CP_ASYNC_MIN_ARCH))
        )
        to, frm = self._copy_refs(dst, src, dbase, sbase)
        self._line(f"{name}(&{to}, &{frm});")

    def _copy_refs(self, dst, src, dbase, sbase) -> tuple[str, str]:
        """The C elements a word copy writes and reads: ``dst[dbase]``, ``src[sbase]``."""
        to = self.store_index(dst, dbase)  # swizzled for wgmma operands
        return f"{self._name(dst)}[{to}]", f"{self._name(src)}[{self.expr(sbase)}]"

    def _cp_async_gather(self, gather) -> None:
        """One 16-byte word of an im2col gather as ``cp.async`` with a zero fill."""
        dst, src, dbase, sbase, cond, _ = gather
        if cond is None:
            self._cp_async_copy((dst, src, dbase, sbase, "uint4"))
            return
        name = self.helper(
            "cp_async16_zfill", _CP_ASYNC_ZFILL.replace("{arch}", str(cuda_arch.CP_ASYNC_MIN_ARCH))
        )
        to, frm = self._copy_refs(dst, src, dbase, sbase)
        self._open("")
        self._line(f"bool on_image = {self.expr(cond)};")
        fallback = f"(const void*){self._name(src)}"
        self._line(f"{name}(&{to}, on_image ? (const void*)&{frm} : {fallback}, on_image);")
        self._close()
