"""CUDA C++ dialect of the C-like kernel generator (compiled by nvcc through pycuda).

Byte dot-product reduction loops (:mod:`codegen.dot_product`) run four products per
instruction with ``__dp4a`` (compute capability 6.1 and newer) when the loop's extent is a
multiple of 4 and both byte runs provably start 4-byte aligned: global buffers are whole device
allocations (cudaMalloc aligns to 256 bytes), shared and local arrays that feed ``__dp4a`` are
declared ``__align__(4)``, and every index term besides the loop variable is a multiple of 4.
Other loops, and every loop for an older ``-arch``, stay scalar. Without a known ``-arch`` the
kernel carries both, chosen by ``__CUDA_ARCH__`` when nvcc compiles it for the device.

Tensor-core nests (:mod:`tensorir.passes.tensor_core`) run as ``nvcuda::wmma`` calls on the
fragment shape of their operand dtype (:data:`tensorir.passes.tensor_core.FRAGMENT_SHAPES`):
fp16 / bf16 16x16x16, float32 as ``wmma::precision::tf32`` 16x16x8, each operand fragment
rounded with ``__float_to_tf32`` after its load (the documented use). float32 nests run on
fragments only when the target allows TF32 (``-allow_tf32=1``); otherwise they stay the exact
float32 scalar loops they are.
"""

from __future__ import annotations

import logging
import math
from functools import partial

from tensorir.dtype import itemsize
from tensorir.loops import (
    Allocate,
    Barrier,
    Buffer,
    For,
    Program,
    walk_stmts,
)
from tensorir.passes.double_buffer import lag_of
from tensorir.passes.tensor_core import (
    FRAGMENT,
    TF32_TENSOR_CORES,
    FragmentPlan,
    fragment_plan,
)

from . import cuda_arch
from .c_like import CRenderer
from .cuda_arch import (  # noqa: F401 - re-exported: codegen.cuda's public names
    CP_ASYNC_MIN_ARCH,
    DP4A_MIN_ARCH,
    WMMA_MIN_ARCH,
    cp_async_available,
    dp4a_available,
    wgmma_available,
    wmma_available,
    wmma_unavailable_reason,
)
from .cuda_async import _CP_ASYNC_COMMIT, _CP_ASYNC_WAIT, _CP_ASYNC_WAIT_GROUP, AsyncCopies
from .cuda_gather import VECTOR_GATHER, WordCopies, gather_copies, vector_copy  # noqa: F401
from .cuda_shared import SharedArray, shared_declarations
from .cuda_warpgroup import WarpgroupTiles
from .cuda_wmma import _WMMA, WmmaFragments
from .cuda_word_epilogue import WordEpilogues
from .dot_product import ByteDot, match_byte_dot, run_starts_aligned
from .source import Source

log = logging.getLogger(__name__)

_F32_MATH = {
    "exp": "expf", "log": "logf", "sqrt": "sqrtf", "rsqrt": "rsqrtf", "tanh": "tanhf",
    "erf": "erff", "pow": "powf", "fabs": "fabsf", "floor": "floorf", "ceil": "ceilf",
    "round": "rintf", "sin": "sinf", "cos": "cosf",
}  # fmt: skip
# numpy rounds half to even, so "round" is rint, not C's round (half away from zero).
_F64_MATH = {k: v[:-1] for k, v in _F32_MATH.items()}
_NARROW_INTS = ("int8", "int16", "uint8")

# PTX's dp4a takes each operand's signedness; CUDA's __dp4a overloads cover only equal ones.
_DP4A_MIXED = (
    "static __device__ __forceinline__ int {name}(unsigned int a, unsigned int b, int c) "
    '{{ int d; asm("dp4a.{ta}.{tb} %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); '
    "return d; }}"
)


class CUDARenderer(
    WmmaFragments, WarpgroupTiles, WordEpilogues, AsyncCopies, WordCopies, CRenderer
):
    """``extern "C" __global__`` kernels with blockIdx/threadIdx and ``__shared__`` buffers."""

    lang = "cuda"
    kernel_prefix = 'extern "C" __global__'
    restrict = "__restrict__"
    shared_qualifier = "__shared__"
    barrier = "__syncthreads();"
    thread_index = {
        "blockIdx.x": "blockIdx.x", "blockIdx.y": "blockIdx.y", "blockIdx.z": "blockIdx.z",
        "threadIdx.x": "threadIdx.x", "threadIdx.y": "threadIdx.y", "threadIdx.z": "threadIdx.z",
    }  # fmt: skip
    types = {
        "float16": "half", "bfloat16": "__nv_bfloat16", "float32": "float", "float64": "double",
        "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
        "uint8": "unsigned char", "uint32": "unsigned int", "bool": "bool",
    }  # fmt: skip
    helper_qualifier = "__device__ __forceinline__"
    int64_suffix = "LL"
    unsigned_prefix = "unsigned "
    # __nv_bfloat16's operators are native from sm_80 only (emulated, per CUDA version, below):
    # compute through float everywhere, as the references do.
    float_compute = frozenset({"bfloat16"})

    def __init__(
        self, inject_vthreads: bool = True, arch: str | None = None, allow_tf32: bool = False
    ):
        super().__init__(inject_vthreads)
        self.arch = arch
        self.allow_tf32 = allow_tf32 and TF32_TENSOR_CORES
        self.dp4a = dp4a_available(arch)
        self._dp4a_loops: dict[int, ByteDot] = {}  # id(For) -> its dot product, this kernel
        self._aligned: set[int] = set()  # id(Buffer) of arrays read 4 bytes at a time
        self._plan: FragmentPlan | None = None  # this kernel's wmma fragment nests
        self._wg_tiles: dict = {}  # id(mma loop) -> its WarpgroupTile (warpgroup plans)
        self._wg_outer: dict = {}  # id(For) -> the WarpgroupTile whose k steps it runs
        self._wg_lag = 0  # tiles of products a warpgroup pipeline leaves running (0 or 1)
        self._vec_copies: dict = {}  # id(For) -> a vectorized copy run as one wide word
        self._gathers: dict = {}  # id(For) -> a GatherCopy (an im2col fetch) as one wide word
        self._aligned16: set[int] = set()
        self._caches: dict = {}  # reused operand fragments (see _operand_caches)
        self._caches_declared = False
        self._wmma: bool | None = None  # wmma_available for the plan's dtype
        self._stage: Buffer | None = None  # shared staging tiles of the fragment stores
        self._uses_wmma = False
        self._cp_async: set[int] = set()  # id(For) of copies issued as cp.async, this kernel
        self._commits: set[int] = set()  # id(Stmt) after which a cp.async group is committed
        self._in_flight = 0  # cp.async groups each barrier leaves pending (N - 2; 0: wait_all)

    # ------------------------------------------------------------------ __dp4a

    def _dp4a_dot(self, s: For) -> ByteDot | None:
        """The dot product ``s`` computes, when it can run as ``__dp4a`` over 4-byte words."""
        if self.dp4a is False or s.extent % 4:
            return None
        dot = match_byte_dot(s, ("serial", "unrolled"))
        if dot is None or not all(run_starts_aligned(x.index, s.var, 4) for x in (dot.a, dot.b)):
            return None
        return dot

    def _kernel(self, program, info):
        # Found before any line is written: the arrays they read are declared aligned.
        self._dp4a_loops = {
            id(s): dot
            for s in walk_stmts(info.stmt)
            if isinstance(s, For) and (dot := self._dp4a_dot(s)) is not None
        }
        self._aligned = {id(x.buffer) for d in self._dp4a_loops.values() for x in (d.a, d.b)}
        plan, _ = fragment_plan(info.stmt, info.extents)
        where = f"{program.name} kernel {info.index}"
        if plan is not None and plan.dtype == "float32" and not self.allow_tf32:
            log.debug("%s: float32 fragment nests stay scalar (no -allow_tf32=1)", where)
            plan = None
        if plan is not None and wmma_unavailable_reason(self.arch, plan.dtype):
            log.debug("%s: %s", where, wmma_unavailable_reason(self.arch, plan.dtype))
        self._wmma = None if plan is None else wmma_available(self.arch, plan.dtype)
        if plan is not None and plan.warpgroup:
            self._wmma = wgmma_available(self.arch)
        self._plan = None if self._wmma is False else plan
        if self._plan is not None and self._plan.warpgroup:
            why = self._warpgroup_setup(info.stmt)
            if why:  # the GPU check refuses these; rendered anyway, as the scalar loops
                log.debug("%s: no wgmma: %s", where, why)
                self._plan = None
        self._stage = None
        self._vec_copies = {}
        self._caches, self._caches_declared = {}, False
        if self._plan is not None:
            self._uses_wmma = True
            self._dtypes.add(self._plan.dtype)
            self._caches = {} if self._plan.warpgroup else self._operand_caches()
            self._vec_copies = {
                id(x): c
                for x in walk_stmts(info.stmt)
                if isinstance(x, For) and (c := vector_copy(x)) is not None
            }
        self._gathers = gather_copies(info.stmt, self._vec_copies) if self._plan else {}
        self._aligned16 = {id(b) for d, sbuf, *_ in self._vec_copies.values() for b in (d, sbuf)}
        self._cp_async = self._async_copies(info.stmt)
        self._commits, self._in_flight = self._async_groups(info.stmt if self._cp_async else None)
        self._aligned16 |= {id(b) for d, sbuf, *_ in self._gathers.values() for b in (d, sbuf)}
        self._shared = []
        lines, launch = super()._kernel(program, info)
        arrays = [self._shared_array(b) for b in self._shared]
        if self._stage is not None:  # declared once a store nest named it
            acc = next(iter(self._plan.accumulators.values()))
            arrays.insert(0, self._shared_array(self._stage, acc.dtype, 32))
        body, before = shared_declarations(arrays, launch.name)
        lines[1:1] = [f"  {line}" for line in body] + self._grid_dependency_lines()
        return [*before, *lines], launch

    def _grid_dependency_lines(self) -> list[str]:
        """Programmatic dependent launch: wait on the grid dependency before the kernel's first
        memory access (sm_90 on).

        ``griddepcontrol.wait`` holds every thread until the kernels this launch depends on
        have finished and their writes are visible; it returns at once when the launch has no
        programmatic dependency, so the kernel is correct however it is launched. In a network's
        CUDA graph the runtime then links the kernels by programmatic edges (only when every
        kernel carries this line: ``runtime.cuda_graph``): each kernel is launched as the last
        blocks of the one before it exit, not after that kernel has completed.

        No ``griddepcontrol.launch_dependents``: triggering the next launch at the start of a
        kernel made networks slower on an H200 (resnet-18 TF32 0.283 ms against 0.251 with
        plain edges; waiting without the trigger: 0.247), as the next kernel's blocks take SM
        slots early. The implicit trigger, each block's exit, is what we keep.
        """
        available = cuda_arch.grid_dependency_available(self.arch)
        if available is False:
            return []
        lines = ['  asm volatile("griddepcontrol.wait;" ::: "memory");']
        if available is None:
            guard = f"#if __CUDA_ARCH__ >= {cuda_arch.GRID_DEPENDENCY_MIN_ARCH}0"
            lines = [guard, *lines, "#endif"]
        return lines

    def shared_declarations(self, buffers) -> list[str]:
        """None here: :meth:`_kernel` declares them once the store tiles are known too, static
        or in dynamic shared memory (:mod:`codegen.cuda_shared`)."""
        self._shared = buffers
        return []

    def _shared_array(self, buf, dtype=None, align=None) -> SharedArray:
        dtype = dtype or buf.dtype
        return SharedArray(
            self._name(buf), self.storage_type(dtype), buf.size, itemsize(dtype),
            self._alignment(buf) if align is None else align,
        )  # fmt: skip

    def _alignment(self, buf) -> int:
        """The ``__align__`` bytes an array needs (0: its type's own)."""
        if self._plan is not None and id(buf) in self._plan.operands:
            # wgmma's 128-byte swizzle works on address bits 4-9: 1024-byte aligned tiles;
            # load_matrix_sync needs 256-bit aligned rows
            return 1024 if self._plan.warpgroup else 32
        if id(buf) in self._aligned16:
            return 16
        return 4 if id(buf) in self._aligned else 0

    def array_decl(self, buf) -> str:
        decl = super().array_decl(buf)
        align = self._alignment(buf)
        return f"__align__({align}) {decl}" if align else decl

    # ------------------------------------------------------------------ wmma fragments

    def _stmt(self, s, guards: tuple = ()) -> None:
        plan = self._plan
        if plan is not None and plan.warpgroup and isinstance(s, Allocate) \
                and id(s.buffer) in plan.accumulators:  # fmt: skip
            b = s.buffer
            self._arch_split(partial(self._wg_declare_accumulator, b),
                             lambda: self._line(f"{self.array_decl(b)};"))  # fmt: skip
            self._stmt(s.body, guards)
            return
        if plan is not None and isinstance(s, Allocate) and id(s.buffer) in plan.accumulators:
            b = s.buffer
            frag = (
                f"{_WMMA}::fragment<{_WMMA}::accumulator, {self._mnk()}, "
                f"{self.ctype(b.dtype)}> {self._name(b)}[{b.size // (FRAGMENT * FRAGMENT)}];"
            )

            def declare():
                self._line(frag)
                if not self._caches_declared:
                    self._caches_declared = True
                    self._declare_operand_caches()

            self._arch_split(declare, lambda: self._line(f"{self.array_decl(b)};"))
            self._stmt(s.body, guards)
            return
        arch = str(cuda_arch.CP_ASYNC_MIN_ARCH)
        if self._cp_async and isinstance(s, Barrier) and self._in_flight:
            n = str(self._in_flight)
            wait = _CP_ASYNC_WAIT_GROUP.replace("{arch}", arch).replace("{n}", n)
            self._line(f"{self.helper(f'cp_async_wait_group{n}', wait)}();")
        elif self._cp_async and isinstance(s, Barrier):
            wait = _CP_ASYNC_WAIT.replace("{arch}", arch)
            self._line(f"{self.helper('cp_async_wait_all', wait)}();")
        if plan is not None and plan.warpgroup and isinstance(s, Barrier):
            self._wg_prelude()  # the copies, visible to the products (the async proxy)
            self._wg_guarded("fence_async_shared();")
        super()._stmt(s, guards)
        if id(s) in self._commits:
            commit = _CP_ASYNC_COMMIT.replace("{arch}", arch)
            self._line(f"{self.helper('cp_async_commit', commit)}();")

    def _for(self, s: For, guards: tuple) -> None:
        plan = self._plan
        if plan is not None and plan.warpgroup and not guards and id(s) in self._wg_outer:
            self._wg_outer_loop(s, guards, self._fragment_for)
            return
        self._fragment_for(s, guards)
        if plan is not None and plan.warpgroup and lag_of(s):
            # The main loop left the last tile's products running: the epilogue reads them.
            self._wg_guarded("wgmma_wait<0>();")

    def _fragment_for(self, s: For, guards: tuple) -> None:
        plan = self._plan
        if plan is not None and not guards:
            emitters = ((plan.mma, self._wmma_mma), (plan.fill, self._wmma_fill),
                        (plan.store, self._wmma_store))  # fmt: skip
            if plan.warpgroup:
                emitters = ((plan.mma, self._wg_mma), (plan.fill, self._wg_fill),
                            (plan.store, self._wg_store))  # fmt: skip
            for group, emit in emitters:
                m = group.get(id(s))
                if m is not None:
                    scalar = super()._for
                    self._arch_split(partial(emit, m), partial(scalar, s, ()))
                    return
            if id(s) in plan.unroll and s.kind == "serial":
                self._line("#pragma unroll")  # fragment indices must be constants
            copy = self._vec_copies.get(id(s))
            if copy is not None and id(s) in self._cp_async:
                self._cp_async_copy(copy)
                return
            if copy is not None:
                dst, src, dbase, sbase, word = copy
                self._line(
                    f"*({word}*)&{self._name(dst)}[{self.store_index(dst, dbase)}] = "
                    f"*(const {word}*)&{self._name(src)}[{self.expr(sbase)}];"
                )
                return
            gather = self._gathers.get(id(s))
            if gather is not None and id(s) in self._cp_async:
                self._cp_async_gather(gather)
                return
            if gather is not None:
                self._gather_line(gather)
                return
        dot = None if guards else self._dp4a_loops.get(id(s))
        if dot is None:
            super()._for(s, guards)
        elif self.dp4a:
            self._dp4a_loop(s, dot)
        else:  # the architecture is decided when nvcc compiles for the device
            self._k.lines.append(f"#if __CUDA_ARCH__ >= {DP4A_MIN_ARCH}0")
            self._dp4a_loop(s, dot)
            self._k.lines.append("#else")
            super()._for(s, guards)
            self._k.lines.append("#endif")

    def _dp4a_loop(self, s: For, dot: ByteDot) -> None:
        """``acc += dot(a[k:k+4], b[k:k+4])`` for k = 0, 4, 8, ...: loads of 4-byte words."""
        v = self._name(s.var)
        acc = f"{self._name(dot.acc)}[{self.expr(dot.acc_index)}]"
        signed = [x.buffer.dtype == "int8" for x in (dot.a, dot.b)]
        words = [
            f"*(const {'int' if sg else 'unsigned int'}*)&{self.expr(x)}"
            for x, sg in zip((dot.a, dot.b), signed)
        ]
        if all(signed):
            call = f"__dp4a({words[0]}, {words[1]}, {acc})"
        elif not any(signed):  # mod 2**32 the unsigned sum is the int32 one
            call = f"((int)__dp4a({words[0]}, {words[1]}, (unsigned int){acc}))"
        else:
            ta, tb = ("s32" if sg else "u32" for sg in signed)
            name = self.helper(
                f"dp4a_{ta}_{tb}", _DP4A_MIXED.format(name=f"dp4a_{ta}_{tb}", ta=ta, tb=tb)
            )
            call = f"{name}({words[0]}, {words[1]}, {acc})"
        if s.kind == "unrolled":
            self._line("#pragma unroll")
        self._open(f"for (int {v} = 0; {v} < {s.extent}; {v} += 4)")
        self._line(f"{acc} = {call};")
        self._close()

    def header(self) -> list[str]:
        out = ["#include <cuda_fp16.h>"] if "float16" in self._dtypes else []
        out += ["#include <cuda_bf16.h>"] if "bfloat16" in self._dtypes else []
        return out + (["#include <mma.h>"] if self._uses_wmma else [])

    def kernel_signature(self, name, params, info) -> str:
        # The launch always uses exactly this block, so tell ptxas the bound (register budget).
        bounds = f"__launch_bounds__({info.threads_per_block})"
        return f"{self.kernel_prefix} void {bounds} {name}({', '.join(params)})"

    def float_const(self, value: float, dtype: str) -> str:
        if dtype == "float16":
            return f"__float2half({self.float_const(value, 'float32')})"
        if dtype == "bfloat16":
            return f"__float2bfloat16({self.float_const(value, 'float32')})"
        if math.isnan(value):
            text = (
                "__int_as_float(0x7fc00000)"
                if dtype == "float32"
                else ("__longlong_as_double(0x7ff8000000000000LL)")
            )
            return text
        if math.isinf(value):
            text = (
                "__int_as_float(0x7f800000)"
                if dtype == "float32"
                else ("__longlong_as_double(0x7ff0000000000000LL)")
            )
            return f"(-{text})" if value < 0 else text
        text = self.float_text(value) + ("f" if dtype == "float32" else "")
        return f"({text})" if value < 0 else text

    def cast(self, dtype: str, src_dtype: str, v: str) -> str:
        # Go through float for half: __half's own conversions differ between CUDA versions.
        if dtype == src_dtype:
            return v
        if src_dtype in ("float16", "bfloat16"):
            to_float = "__half2float" if src_dtype == "float16" else "__bfloat162float"
            v, src_dtype = f"{to_float}({v})", "float32"
            if dtype == "float32":
                return v
        if dtype == "float16":
            return f"__float2half((float)({v}))"
        if dtype == "bfloat16":
            return f"__float2bfloat16((float)({v}))"
        return f"(({self.ctype(dtype)})({v}))"

    def math_call(self, name: str, args: list[str], dtype: str) -> str:
        one = "1.0f" if dtype == "float32" else "1.0"
        if name == "sigmoid":
            exp = _F32_MATH["exp"] if dtype == "float32" else "exp"
            return f"({one} / ({one} + {exp}(-({args[0]}))))"
        table = _F32_MATH if dtype == "float32" else _F64_MATH
        if name not in table:
            raise ValueError(f"math function {name!r} has no CUDA equivalent")
        return f"{table[name]}({', '.join(args)})"

    def minmax(self, op: str, a: str, b: str, dtype: str) -> str:
        if dtype == "float32":
            return f"f{op}f({a}, {b})"
        if dtype == "float64":
            return f"f{op}({a}, {b})"
        if dtype in _NARROW_INTS:
            return f"(({self.ctype(dtype)}){op}((int)({a}), (int)({b})))"
        return f"{op}({a}, {b})"


def render(program: Program, target, options) -> Source:
    """The backend table's renderer (codegen.target.BACKENDS): :func:`build_cuda` for the
    target's ``-arch``."""
    return build_cuda(program, arch=target.get("arch"), allow_tf32=target.allow_tf32)


def build_cuda(
    program: Program,
    inject_vthreads: bool = True,
    arch: str | None = None,
    allow_tf32: bool = False,
) -> Source:
    """Generate CUDA C++ for ``program``: one kernel per top-level statement.

    Parameters
    ----------
    program : Program
        Lowered loop IR whose top-level statements are bound to blockIdx/threadIdx.
    inject_vthreads : bool
        Push vthread loops down to the statements that depend on them (see
        :func:`tensorir.passes.inject_vthread.inject_virtual_threads`); False runs them as
        plain loops.
    arch : str, optional
        The ``-arch`` nvcc compiles for (``"sm_90"``): byte dot products use ``__dp4a`` from
        ``sm_61`` on. None (unknown) emits both forms under ``#if __CUDA_ARCH__ >= 610``.
    allow_tf32 : bool
        Run float32 tensor-core nests on TF32 fragments (the target's ``-allow_tf32=1``);
        False keeps them exact float32 scalar loops.

    Returns
    -------
    Source
        ``lang="cuda"``; kernels are ``extern "C"`` (compile with pycuda's
        ``no_extern_c=True``), launches give each kernel's grid, block and buffer arguments.
    """
    return CUDARenderer(inject_vthreads, arch, allow_tf32).render(program)
