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
import re
from functools import partial

from tensorir.arith import linear_form, simplify_expr
from tensorir.dtype import itemsize
from tensorir.expr import Const, Var, walk
from tensorir.loops import (
    Allocate,
    Barrier,
    Buffer,
    For,
    If,
    Load,
    Program,
    Seq,
    Stmt,
    Store,
    walk_stmts,
)
from tensorir.passes.double_buffer import PIPELINE_PROLOGUE, is_double_buffered, pipeline_stages
from tensorir.passes.tensor_core import (
    FRAGMENT,
    FRAGMENT_SHAPES,
    LANES,
    TF32_TENSOR_CORES,
    FragmentPlan,
    fragment_plan,
)
from tensorir.transform import rewrite, substitute

from .c_like import CRenderer
from .dot_product import ByteDot, match_byte_dot, run_starts_aligned
from .llvm_vector import depends_on
from .source import Source
from .vector_gather import gather_copy

log = logging.getLogger(__name__)

_F32_MATH = {
    "exp": "expf", "log": "logf", "sqrt": "sqrtf", "rsqrt": "rsqrtf", "tanh": "tanhf",
    "erf": "erff", "pow": "powf", "fabs": "fabsf", "floor": "floorf", "ceil": "ceilf",
    "round": "rintf", "sin": "sinf", "cos": "cosf",
}  # fmt: skip
# numpy rounds half to even, so "round" is rint, not C's round (half away from zero).
_F64_MATH = {k: v[:-1] for k, v in _F32_MATH.items()}
_NARROW_INTS = ("int8", "int16", "uint8")

DP4A_MIN_ARCH = 61
"""``__dp4a`` needs compute capability 6.1 (sm_61) or newer."""

# PTX's dp4a takes each operand's signedness; CUDA's __dp4a overloads cover only equal ones.
_DP4A_MIXED = (
    "static __device__ __forceinline__ int {name}(unsigned int a, unsigned int b, int c) "
    '{{ int d; asm("dp4a.{ta}.{tb} %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); '
    "return d; }}"
)


WMMA_MIN_ARCH = {dtype: shape.min_arch for dtype, shape in FRAGMENT_SHAPES.items()}
"""``nvcuda::wmma`` fragments of each operand dtype need this compute capability or newer."""
_WMMA = "nvcuda::wmma"
_WMMA_TYPES = {"float32": f"{_WMMA}::precision::tf32"}  # operand dtype -> element type if not C's


CP_ASYNC_MIN_ARCH = 80
"""``cp.async`` (global to shared copies that bypass registers) needs sm_80 or newer. The
switch for the asynchronous copies of double-buffered tensor-core kernels: a number above
every real architecture (1000) makes them plain 16-byte loads and stores again."""

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


def _arch_number(arch: str | None) -> int | None:
    found = re.fullmatch(r"(?:sm|compute)_(\d+)[a-z]?", arch or "")
    return None if found is None else int(found.group(1))


def dp4a_available(arch: str | None) -> bool | None:
    """Whether code for ``-arch=arch`` may use ``__dp4a``: True, False, or None where the
    architecture is not known here (None, ``native``, ``all``), to be decided by nvcc."""
    n = _arch_number(arch)
    return None if n is None else n >= DP4A_MIN_ARCH


def cp_async_available(arch: str | None) -> bool | None:
    """Whether code for ``-arch=arch`` may use ``cp.async`` (sm_80 on): True, False, or None
    (unknown architecture: the helpers choose by ``__CUDA_ARCH__`` when nvcc compiles)."""
    n = _arch_number(arch)
    return None if n is None else n >= CP_ASYNC_MIN_ARCH


def wmma_available(arch: str | None, dtype: str) -> bool | None:
    """Whether code for ``-arch=arch`` may use wmma fragments of ``dtype`` (float16 from
    sm_70, bfloat16 from sm_80): True, False, or None (unknown architecture: decided by nvcc
    through ``__CUDA_ARCH__``)."""
    n = _arch_number(arch)
    return None if n is None else n >= WMMA_MIN_ARCH[dtype]


def wmma_unavailable_reason(arch: str | None, dtype: str) -> str:
    """Why code for ``-arch=arch`` cannot run fragments of operand ``dtype`` (one line), or ""
    when it can or the architecture is unknown (see :func:`wmma_available`)."""
    if wmma_available(arch, dtype) is not False:
        return ""
    what = "TF32 tensor cores (float32 operands)" if dtype == "float32" else f"{dtype} wmma"
    need = WMMA_MIN_ARCH[dtype]
    return (
        f"-arch={arch} has no {what}: they need sm_{need} or newer; the loops stay scalar "
        f"(compile for -arch=sm_{need} or newer to use them)"
    )


class CUDARenderer(CRenderer):
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
        self._plan = None if self._wmma is False else plan
        self._stage = None
        self._vec_copies = {}
        self._caches, self._caches_declared = {}, False
        if self._plan is not None:
            self._uses_wmma = True
            self._dtypes.add(self._plan.dtype)
            self._caches = self._operand_caches()
            self._vec_copies = {
                id(x): c
                for x in walk_stmts(info.stmt)
                if isinstance(x, For) and (c := _vector_copy(x)) is not None
            }
        self._gathers = _gather_copies(info.stmt, self._vec_copies) if self._plan else {}
        self._aligned16 = {id(b) for d, sbuf, *_ in self._vec_copies.values() for b in (d, sbuf)}
        self._cp_async = self._async_copies(info.stmt)
        self._commits, self._in_flight = self._async_groups(info.stmt if self._cp_async else None)
        self._aligned16 |= {id(b) for d, sbuf, *_ in self._gathers.values() for b in (d, sbuf)}
        lines, launch = super()._kernel(program, info)
        if self._stage is not None:  # declared once a store nest named it
            acc = next(iter(self._plan.accumulators.values()))
            decl = f"__align__(32) {self.storage_type(acc.dtype)} {self._name(self._stage)}"
            lines.insert(1, f"  {self.shared_qualifier} {decl}[{self._stage.size}];")
        return lines, launch

    def _async_copies(self, stmt) -> set[int]:
        """The 16-byte global-to-shared copies of a kernel with a double-buffered loop
        (:mod:`tensorir.passes.double_buffer`), run as ``cp.async`` on sm_80+: each barrier of
        such a kernel first waits for them (``cp.async.wait_all``), which is where the
        pipeline needs its copies complete (see the race argument there). Other kernels, and
        every kernel for an older ``-arch``, keep their synchronous copies."""
        if cp_async_available(self.arch) is False or not self._vec_copies:
            return set()
        if not any(is_double_buffered(x) for x in walk_stmts(stmt)):
            return set()
        return {
            key
            for key, (dst, src, *_, word) in self._vec_copies.items()
            if word == "uint4" and dst.scope == "shared" and src.scope == "global"
        }

    @staticmethod
    def _async_groups(stmt: Stmt | None) -> tuple[set[int], int]:
        """Where an N >= 3 stage pipeline commits its ``cp.async`` groups (after the body of
        its prologue loop and after the guarded copies that start each iteration) and how many
        groups each barrier leaves in flight (N - 2): see the race argument of
        :mod:`tensorir.passes.double_buffer`. ``(set(), 0)`` (``wait_all`` before every barrier,
        no groups) for two stages, or where the loops are not of the pass's shape."""
        if stmt is None:
            return set(), 0
        loops = [x for x in walk_stmts(stmt) if pipeline_stages(x) >= 3]
        prologues = [x for x in walk_stmts(stmt) if isinstance(x, For)
                     and any(a[0] == PIPELINE_PROLOGUE for a in x.annotations)]  # fmt: skip
        stages = {pipeline_stages(x) for x in loops}
        firsts = [x.body.stmts[0] for x in loops if isinstance(x.body, Seq)]
        if (len(stages) != 1 or len(prologues) != len(loops) or len(firsts) != len(loops)
                or not all(isinstance(f, If) for f in firsts)):  # fmt: skip
            return set(), 0
        return {id(x) for x in firsts} | {id(p.body) for p in prologues}, stages.pop() - 2

    def _cp_async_copy(self, copy) -> None:
        dst, src, dbase, sbase, _ = copy
        name = self.helper("cp_async16", _CP_ASYNC.replace("{arch}", str(CP_ASYNC_MIN_ARCH)))
        to, frm = f"{self._name(dst)}[{self.expr(dbase)}]", f"{self._name(src)}[{self.expr(sbase)}]"
        self._line(f"{name}(&{to}, &{frm});")

    def array_decl(self, buf) -> str:
        decl = super().array_decl(buf)
        if self._plan is not None and id(buf) in self._plan.operands:
            return f"__align__(32) {decl}"  # load_matrix_sync needs 256-bit aligned rows
        if id(buf) in self._aligned16:
            return f"__align__(16) {decl}"
        return f"__align__(4) {decl}" if id(buf) in self._aligned else decl

    # ------------------------------------------------------------------ wmma fragments

    def _arch_split(self, wmma, scalar) -> None:
        """``wmma()``'s lines, or both under ``#if __CUDA_ARCH__`` when the arch is unknown."""
        if self._wmma:
            wmma()
            return
        self._k.lines.append(f"#if __CUDA_ARCH__ >= {WMMA_MIN_ARCH[self._plan.dtype]}0")
        wmma()
        self._k.lines.append("#else")
        scalar()
        self._k.lines.append("#endif")

    def _stmt(self, s, guards: tuple = ()) -> None:
        plan = self._plan
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
        arch = str(CP_ASYNC_MIN_ARCH)
        if self._cp_async and isinstance(s, Barrier) and self._in_flight:
            n = str(self._in_flight)
            wait = _CP_ASYNC_WAIT_GROUP.replace("{arch}", arch).replace("{n}", n)
            self._line(f"{self.helper(f'cp_async_wait_group{n}', wait)}();")
        elif self._cp_async and isinstance(s, Barrier):
            wait = _CP_ASYNC_WAIT.replace("{arch}", arch)
            self._line(f"{self.helper('cp_async_wait_all', wait)}();")
        super()._stmt(s, guards)
        if id(s) in self._commits:
            commit = _CP_ASYNC_COMMIT.replace("{arch}", arch)
            self._line(f"{self.helper('cp_async_commit', commit)}();")

    def _mnk(self) -> str:
        """The template's ``M, N, K`` of this kernel's fragments (FRAGMENT_SHAPES)."""
        shape = self._plan.shape
        return f"{shape.m}, {shape.n}, {shape.k}"

    def _operand_fragment(self, use: str, layout: str) -> str:
        """The operand fragment type: ``fragment<matrix_a, M, N, K, element, layout>``."""
        dtype = self._plan.dtype
        t = _WMMA_TYPES.get(dtype) or self.ctype(dtype)
        return f"{_WMMA}::fragment<{_WMMA}::{use}, {self._mnk()}, {t}, {_WMMA}::{layout}>"

    def _load_operand(self, name: str, ptr: str, ldm: int) -> str:
        """The statement that loads operand fragment ``name``; TF32 fragments are then rounded
        element by element (``load_matrix_sync`` leaves them float32: CUDA's documented use)."""
        load = f"{_WMMA}::load_matrix_sync({name}, {ptr}, {ldm});"
        if self._plan.dtype != "float32":
            return load
        e = "wmma_t"
        return (
            f"{{ {load} for (int {e} = 0; {e} < {name}.num_elements; {e}++) "
            f"{name}.x[{e}] = {_WMMA}::__float_to_tf32({name}.x[{e}]); }}"
        )

    def _frag(self, acc: Buffer, base, ldm: int) -> str:
        """The accumulator fragment holding the 16x16 tile at ``acc[base]`` (row length
        ``ldm``): tiles are numbered row-major."""
        b = self.expr(base)
        index = f"(({b}) / {FRAGMENT * ldm}) * {ldm // FRAGMENT} + ((({b}) % {ldm}) / {FRAGMENT})"
        return f"{self._name(acc)}[{index}]"

    def _operand_caches(self) -> dict:
        """``(id(mma loop), "a"|"b") -> (Buffer naming the cache, [key loops], reload loops)``.

        An operand fragment whose address does not depend on some of the unrolled loops around
        the nest is loaded once when those loops are all at 0 and reused by their other
        iterations: a tile of fi x fj accumulators then loads fi + fj fragments per k step,
        not 2 fi fj (shared-memory bandwidth is what bounds wmma). The cache holds one
        fragment per value of the loops it depends on inside the outermost loop it does not.
        """
        out = {}
        for key, m in self._plan.mma.items():
            chain = self._plan.chains.get(key, ())
            for tag, op in (("a", m.a), ("b", m.b)):
                deps = {n for n in walk(op.base) if isinstance(n, Var)}
                free = [k for k, f in enumerate(chain) if f.var not in deps]
                if not free:
                    continue
                keyed = [f for f in chain[free[0] :] if f.var in deps]
                size = math.prod(f.extent for f in keyed)
                buf = Buffer(f"wmma_{tag}", (size,), op.buffer.dtype, "local")
                out[(key, tag)] = (buf, keyed, [chain[k] for k in free])
        return out

    def _declare_operand_caches(self) -> None:
        for (key, tag), (buf, _, _) in self._caches.items():
            op = getattr(self._plan.mma[key], tag)
            use = "matrix_a" if tag == "a" else "matrix_b"
            frag = self._operand_fragment(use, op.layout)
            self._line(f"{frag} {self._name(buf)}[{buf.size}];")

    def _wmma_mma(self, m) -> None:
        self._open("")
        names = []
        for tag, op, use in (("a", m.a, "matrix_a"), ("b", m.b, "matrix_b")):
            ptr = f"&{self._name(op.buffer)}[{self.expr(op.base)}]"
            cache = self._caches.get((id(m.loop), tag))
            if cache is None:
                name = f"wmma_{tag}"
                self._line(f"{self._operand_fragment(use, op.layout)} {name};")
                self._line(self._load_operand(name, ptr, op.ldm))
            else:
                buf, keyed, free = cache
                index = "0"
                for f in keyed:
                    index = f"({index}) * {f.extent} + {self._name(f.var)}"
                name = f"{self._name(buf)}[{index}]"
                first = " && ".join(f"{self._name(f.var)} == 0" for f in free)
                self._line(f"if ({first}) {self._load_operand(name, ptr, op.ldm)}")
            names.append(name)
        acc = self._frag(m.acc, m.acc_base, m.acc_ldm)
        self._line(f"{_WMMA}::mma_sync({acc}, {names[0]}, {names[1]}, {acc});")
        self._close()

    def _wmma_store(self, m) -> None:
        plan, ext = self._plan, self._k.info.extents
        if self._stage is None:
            tile = FRAGMENT * FRAGMENT
            self._stage = Buffer("wmma_stage", (plan.warps * tile,), m.acc.dtype, "shared")
        y, z = ext.get("threadIdx.y", 1), ext.get("threadIdx.z", 1)
        warp = f"(threadIdx.y + {y} * threadIdx.z)" if z > 1 else "threadIdx.y"
        tile_buf = Buffer("wmma_tile", (FRAGMENT * FRAGMENT,), m.acc.dtype, "local")
        e = Var("wmma_e")
        self._open("")
        tname, stage = self._name(tile_buf), self._name(self._stage)
        self._line(f"{self.storage_type(m.acc.dtype)}* {tname} = &{stage}[{warp} * 256];")
        acc = self._frag(m.acc, m.acc_base, m.acc_ldm)
        self._line(f"{_WMMA}::store_matrix_sync({tname}, {acc}, 16, {_WMMA}::mem_row_major);")
        self._line("__syncwarp();")
        ev, iv, jv = self._name(e), self._name(m.i), self._name(m.j)
        self._open(f"for (int {ev} = threadIdx.x; {ev} < 256; {ev} += {LANES})")
        self._line(f"int {iv} = {ev} >> 4;")
        self._line(f"int {jv} = {ev} & 15;")
        tile_load = Load(tile_buf, e, m.acc.dtype)
        st = m.store

        def swap(n):
            return tile_load if isinstance(n, Load) and n.buffer is m.acc else None

        out = Store(st.buffer, rewrite(st.index, swap), rewrite(st.value, swap))
        guard = getattr(m, "guard", None)  # masked rows / columns of a padded conv GEMM
        super()._stmt(out if guard is None else If(guard, out), ())
        self._close()
        self._line("__syncwarp();")
        self._close()

    def _wmma_fill(self, m) -> None:
        acc = self._frag(m.acc, m.acc_base, m.acc_ldm)
        self._line(f"{_WMMA}::fill_fragment({acc}, {self.expr(m.value)});")

    def _for(self, s: For, guards: tuple) -> None:
        plan = self._plan
        if plan is not None and not guards:
            for group, emit in ((plan.mma, self._wmma_mma), (plan.fill, self._wmma_fill),
                                (plan.store, self._wmma_store)):  # fmt: skip
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
                    f"*({word}*)&{self._name(dst)}[{self.expr(dbase)}] = "
                    f"*(const {word}*)&{self._name(src)}[{self.expr(sbase)}];"
                )
                return
            gather = self._gathers.get(id(s))
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

    def _gather_line(self, g) -> None:
        """One word of an im2col fetch: the source word, or zeros off the image."""
        dst, src, dbase, sbase, cond, nbytes = g
        word = _WORDS[nbytes]
        load = f"*(const {word}*)&{self._name(src)}[{self.expr(sbase)}]"
        if cond is not None:
            load = f"(({self.expr(cond)}) ? {load} : {_ZERO_WORDS[nbytes]})"
        self._line(f"*({word}*)&{self._name(dst)}[{self.expr(dbase)}] = {load};")

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


_WORDS = {4: "unsigned int", 8: "uint2", 16: "uint4"}
_ZERO_WORDS = {4: "0u", 8: "make_uint2(0u, 0u)", 16: "make_uint4(0u, 0u, 0u, 0u)"}
VECTOR_GATHER = True
"""Fetch an implicit-GEMM conv2d's im2col tile to shared memory in 16-byte words
(:mod:`codegen.vector_gather`); False keeps the element-by-element gather."""


def _gather_copies(stmt, vec_copies: dict) -> dict:
    """id(For) -> GatherCopy for the vectorized loops of a tensor-core kernel that are no plain
    vector copy but gather whole words (:data:`VECTOR_GATHER`)."""
    if not VECTOR_GATHER:
        return {}
    out = {}
    for x in walk_stmts(stmt):
        if not isinstance(x, For) or x.kind != "vectorized" or id(x) in vec_copies:
            continue
        if not isinstance(x.body, Store) or x.body.buffer.scope != "shared":
            continue
        nbytes = x.extent * itemsize(x.body.buffer.dtype)
        if nbytes in _WORDS:
            g = gather_copy(x, x.extent)
            if g is not None and g[1].scope == "global":
                out[id(x)] = (*g, nbytes)
    return out


def _vector_copy(s: For):
    """``(dst, src, dst_base, src_base, word type)`` when the vectorized loop ``s`` copies
    ``extent`` contiguous elements that fit one 4/8/16-byte word, both runs starting at a
    multiple of the word (a proof over the indices' linear forms), else None.

    Used in tensor-core kernels only (their shared fetches): global buffers there are whole
    allocations or 64-byte aligned workspaces, and the arrays are declared ``__align__(16)``.
    """
    if s.kind != "vectorized" or not isinstance(s.body, Store):
        return None
    st = s.body
    if not isinstance(st.value, Load) or st.value.dtype != st.buffer.dtype:
        return None
    nbytes = s.extent * itemsize(st.buffer.dtype)
    if nbytes not in _WORDS or st.buffer.scope == "local" or st.value.buffer.scope == "local":
        return None
    bases = []
    for index in (st.index, st.value.index):
        form = linear_form(index)
        if form is None:
            return None
        terms, const = form
        if terms.get(s.var) != 1 or const % s.extent:
            return None
        for atom, coef in terms.items():
            if atom is not s.var and (depends_on(atom, s.var) or coef % s.extent):
                return None
        bases.append(simplify_expr(substitute(index, {s.var: Const(0, "int32")})))
    return st.buffer, st.value.buffer, bases[0], bases[1], _WORDS[nbytes]


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
