"""Tensor-core fragment nests in the CUDA backend: the ``nvcuda::wmma`` declarations, operand
loads (cached across the unrolled loops they do not depend on; TF32 rounding), ``mma_sync``,
the fill and the store through a shared staging tile, each under ``#if __CUDA_ARCH__`` when the
architecture is unknown. A mixin of :class:`codegen.cuda.CUDARenderer`, which finds the nests
(:func:`tensorir.passes.tensor_core.fragment_plan`) and dispatches to these."""

from __future__ import annotations

import math

from tensorir.expr import Var, walk
from tensorir.loops import Buffer, If, Load, Store
from tensorir.passes.tensor_core import FRAGMENT, LANES
from tensorir.transform import rewrite

from .cuda_arch import WMMA_MIN_ARCH
from .cuda_warpgroup import SWIZZLE_GUARD
from .wide_epilogue import wide_store

__all__ = ["WmmaFragments"]

_WMMA = "nvcuda::wmma"
_WMMA_TYPES = {"float32": f"{_WMMA}::precision::tf32"}  # operand dtype -> element type if not C's


class WmmaFragments:
    """The wmma part of the CUDA renderer (``_plan``, ``_caches``, ``_stage`` are set up in
    its ``_kernel``)."""

    def _arch_split(self, wmma, scalar) -> None:
        """``wmma()``'s lines, or both under ``#if __CUDA_ARCH__`` when the arch is unknown."""
        if self._wmma:
            wmma()
            return
        if self._plan.warpgroup:
            self._k.lines.append(f"#if {SWIZZLE_GUARD}")
        else:
            self._k.lines.append(f"#if __CUDA_ARCH__ >= {WMMA_MIN_ARCH[self._plan.dtype]}0")
        wmma()
        self._k.lines.append("#else")
        scalar()
        self._k.lines.append("#endif")

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
        e = Var("wmma_e", "int32")
        self._open("")
        tname, stage = self._name(tile_buf), self._name(self._stage)
        self._line(f"{self.storage_type(m.acc.dtype)}* {tname} = &{stage}[{warp} * 256];")
        acc = self._frag(m.acc, m.acc_base, m.acc_ldm)
        self._line(f"{_WMMA}::store_matrix_sync({tname}, {acc}, 16, {_WMMA}::mem_row_major);")
        self._line("__syncwarp();")
        ev, iv, jv = self._name(e), self._name(m.i), self._name(m.j)
        st = m.store
        guard = getattr(m, "guard", None)  # masked rows / columns of a padded conv GEMM
        wide = wide_store(st, m.j, guard, m.acc.dtype)
        tile = FRAGMENT * FRAGMENT
        if wide is None:
            self._open(f"for (int {ev} = threadIdx.x; {ev} < {tile}; {ev} += {LANES})")
        else:  # a fixed trip count (1 for halves, 2 for floats), so nvcc unrolls it whole
            w = Var("wmma_w", "int32")
            runs = tile // (LANES * wide.lanes)
            self._line("#pragma unroll")
            self._open(
                f"for (int {self._name(w)} = 0; {self._name(w)} < {runs}; ++{self._name(w)})"
            )
            self._line(f"int {ev} = ({self._name(w)} * {LANES} + threadIdx.x) * {wide.lanes};")
        self._line(f"int {iv} = {ev} >> 4;")
        self._line(f"int {jv} = {ev} & 15;")
        if wide is not None:
            self._wide_epilogue(m, wide, tile_buf, e, guard)
        else:
            tile_load = Load(tile_buf, e, m.acc.dtype)

            def swap(n):
                return tile_load if isinstance(n, Load) and n.buffer is m.acc else None

            out = Store(st.buffer, rewrite(st.index, swap), rewrite(st.value, swap))
            super()._stmt(out if guard is None else If(guard, out), ())
        self._close()
        self._line("__syncwarp();")
        self._close()

    def _wide_epilogue(self, m, wide, tile_buf: Buffer, e: Var, guard) -> None:
        """One lane's run of ``wide.lanes`` columns (codegen.wide_epilogue): its accumulators
        read from the staging tile as 16-byte words, then the run
        (:meth:`codegen.cuda_word_epilogue.WordEpilogues._word_run`)."""
        acc = Buffer("wmma_acc", (wide.lanes,), m.acc.dtype, "local")
        self._word_read(acc, f"{self._name(tile_buf)}[{self._name(e)}]")
        self._word_run(m, wide, lambda v: Load(acc, v, m.acc.dtype), guard, "wmma")

    def _wmma_fill(self, m) -> None:
        acc = self._frag(m.acc, m.acc_base, m.acc_ldm)
        self._line(f"{_WMMA}::fill_fragment({acc}, {self.expr(m.value)});")
