"""Warpgroup tensor-core tiles in the CUDA backend: a kernel whose fragment nests
:mod:`tensorir.passes.warpgroup` reads as warpgroup tiles runs them as Hopper's
``wgmma.mma_async`` (:mod:`codegen.cuda_wgmma`'s pieces). A mixin of
:class:`codegen.cuda.CUDARenderer`, beside the wmma one (:mod:`codegen.cuda_wmma`).

What changes against the loops as written (every lane of a warpgroup computing the whole
tile):

- the accumulator is ``m_tiles * N / 2`` float registers a thread, the tile spread over the
  128 lanes as ``wgmma`` leaves it (:func:`codegen.cuda_wgmma.accumulator_position`); the fill
  sets a fragment's 8 registers, the store nest writes the 8 elements each lane holds of the
  16 x 16 fragment of its own warp, straight from the registers;
- the mma nest at the first fragment of each 64-row, N-column tile is one ``m64nNk16`` product
  of two shared-memory descriptors; the other fragments' nests emit nothing;
- the operand tiles are stored with the 128-byte swizzle (16-byte chunk ``c`` of row ``r`` at
  chunk ``c ^ (r % 8)``, rows of 128 bytes: 64 halves or 32 floats, arrays 1024-byte
  aligned), by rewriting the index of every store into them;
- ``fence.proxy.async`` before each barrier (the copies become visible to the products),
  ``wgmma.fence`` before the k steps of a shared tile, and commit / wait after them, so the
  next copy into a stage finds its products done.

Code that uses ``wgmma`` must be compiled for ``sm_90a`` (:mod:`runtime.cuda` does when the
source has it); where the architecture is unknown when rendering, the kernel carries the
scalar loops too, under ``#if defined(__CUDA_ARCH_FEAT_SM90_ALL)``.
"""

from __future__ import annotations

from tensorir.expr import Binary, Const, Var
from tensorir.loops import Buffer, If, Load, Store, walk_stmts
from tensorir.passes.double_buffer import lag_of
from tensorir.passes.warpgroup import SWIZZLE_ROW, WARPGROUP_LANES, swizzle_row, warpgroup_tile
from tensorir.transform import rewrite

from .cuda_wgmma import PRELUDE, mma_function, mma_function_name
from .warpgroup_epilogue import quad_transpose
from .wide_epilogue import word_store_plan

__all__ = ["SWIZZLE_GUARD", "WARPGROUP_WORDS", "WarpgroupTiles", "swizzled_index"]

WARPGROUP_WORDS = True
"""Store warpgroup epilogues 16 bytes a lane where the output allows it (a quad of lanes
trades accumulators first: :mod:`codegen.warpgroup_epilogue`); off, one element a lane as
``wgmma`` leaves them. A switch for A/B timing (``benchmarks/bench_epilogue_words.py``)."""

SWIZZLE_GUARD = "defined(__CUDA_ARCH_FEAT_SM90_ALL)"
"""The preprocessor test of code compiled for sm_90a (where ``wgmma`` exists)."""
_FRAG = 16
_REGS_PER_FRAGMENT = _FRAG * _FRAG // 32  # a warp's 16 x 16 fragment over its 32 lanes


def swizzled_index(index: str, row: int = SWIZZLE_ROW) -> str:
    """C text of the element where an operand tile of ``row``-element rows (128 bytes: 64
    halves, 32 floats) keeps element ``index`` (its row-major offset) under the 128-byte
    swizzle: the 16-byte chunk's bits XORed with the row mod 8 (for halves bits 3-5 with bits
    6-8, for floats bits 2-4 with bits 5-7)."""
    if row not in (64, 32):
        raise ValueError(f"swizzled_index: rows of {row} elements; 64 (16-bit) or 32 (32-bit)")
    row_shift = row.bit_length() - 1
    chunk_shift = row_shift - 3  # 8 chunks of 16 bytes a row
    return f"(({index}) ^ (((({index}) >> {row_shift}) & 7) << {chunk_shift}))"


def _swizzle_macro(row: int) -> str:
    """Where the arch is unknown when rendering, stores into operand tiles swizzle only in code
    for sm_90a (the scalar loops of other architectures read them row-major)."""
    return (
        f"#if {SWIZZLE_GUARD}\n#define SWIZZLE_OR_PLAIN_{row}(i) {swizzled_index('i', row)}\n"
        f"#else\n#define SWIZZLE_OR_PLAIN_{row}(i) (i)\n#endif\n"
    )


class WarpgroupTiles:
    """The wgmma part of the CUDA renderer; ``_plan.warpgroup`` kernels only. ``_wg_tiles``
    (id(mma loop) -> WarpgroupTile) and ``_wg_outer`` (id(outer loop) -> tile) are set up in
    its ``_kernel`` (:meth:`_warpgroup_setup`)."""

    def _warpgroup_setup(self, stmt) -> str:
        """Read the tiles of kernel ``stmt``'s plan; "" or why they cannot run as wgmma."""
        self._wg_tiles, self._wg_outer = {}, {}
        self._wg_lag = max((lag_of(x) for x in walk_stmts(stmt)), default=0)
        for key in self._plan.mma:
            tile = warpgroup_tile(self._plan, key)
            if isinstance(tile, str):
                return tile
            self._wg_tiles[key] = tile
            self._wg_outer[id(tile.outer)] = tile
        return ""

    def _wg_guarded(self, line: str) -> None:
        """A line only code for sm_90a runs (all of it when the arch is known to be sm_90)."""
        if self._wmma:
            self._line(line)
            return
        self._k.lines.append(f"#if {SWIZZLE_GUARD}")
        self._line(line)
        self._k.lines.append("#endif")

    def _wg_prelude(self) -> None:
        self.helper("wgmma_prelude", PRELUDE)

    def _wg_declare_accumulator(self, buf) -> None:
        self._line(f"float {self._name(buf)}[{buf.size // WARPGROUP_LANES}];")

    def _wg_register(self, base: str, ldm: int) -> str:
        """The first of the 8 registers of the fragment at accumulator offset ``base`` (a
        row-major tile ``ldm`` wide): its 64-row tile's ``ldm / 2``, then 8 a 16-column step."""
        return f"(({base}) / {64 * ldm}) * {ldm // 2} + ((({base}) % {ldm}) / {_FRAG}) * 8"

    def _wg_mma(self, m) -> None:
        tile = self._wg_tiles[id(m.loop)]
        dtype = self._plan.dtype
        self._wg_prelude()
        name = self.helper(mma_function_name(tile.n, dtype), mma_function(tile.n, dtype))
        acc = self.expr(m.acc_base)
        ldm = m.acc_ldm
        first = f"((({acc}) / {_FRAG * ldm}) & 3) == 0 && (({acc}) % {ldm}) == 0"
        descs = [
            f"wgmma_desc(&{self._name(op.buffer)}[{self.expr(op.base)}], 16, 1024, 1)"
            for op in (m.a, m.b)
        ]
        regs = f"&{self._name(m.acc)}[(({acc}) / {64 * ldm}) * {ldm // 2}]"
        self._open(f"if ({first})")
        self._line(f"{name}({regs}, {descs[0]}, {descs[1]}, 1);")
        self._close()

    def _wg_fill(self, m) -> None:
        reg = self._wg_register(self.expr(m.acc_base), m.acc_ldm)
        value = self.expr(m.value)
        self._line("#pragma unroll")
        self._open(f"for (int wg_q = 0; wg_q < {_REGS_PER_FRAGMENT}; ++wg_q)")
        self._line(f"{self._name(m.acc)}[{reg} + wg_q] = {value};")
        self._close()

    def _wg_store(self, m) -> None:
        """The lane's 8 elements of the fragment, when the fragment's rows are its warp's:
        as 16-byte words of one row where :func:`codegen.wide_epilogue.word_store_plan`
        allows (:meth:`_wg_word_store`), else as they lie, row ``lane / 4`` (+ 8), columns
        ``2 (lane % 4)`` (+ 1, + 8)."""
        base, ldm = self.expr(m.acc_base), m.acc_ldm
        own = f"((({base}) / {_FRAG * ldm}) & 3) == (threadIdx.x >> 5)"
        self._open(f"if ({own})")
        words = word_store_plan(m.store, m.j, m.guard, m.acc.dtype) if WARPGROUP_WORDS else None
        if words is not None:
            self._wg_word_store(m, words, self._wg_register(base, ldm))
            self._close()
            return
        r = Var("wg_r", "int32")
        self._line("#pragma unroll")
        self._open(f"for (int wg_q = 0; wg_q < {_REGS_PER_FRAGMENT}; ++wg_q)")
        iv, jv = self._name(m.i), self._name(m.j)
        self._line(f"int {iv} = ((threadIdx.x & 31) >> 2) + ((wg_q & 2) << 2);")
        self._line(f"int {jv} = ((wg_q & 4) << 1) + ((threadIdx.x & 3) << 1) + (wg_q & 1);")
        self._line(f"int {self._name(r)} = {self._wg_register(base, ldm)} + wg_q;")
        reg = Load(m.acc, r, m.acc.dtype)

        def swap(n):
            return reg if isinstance(n, Load) and n.buffer is m.acc else None

        st = m.store
        out = Store(st.buffer, rewrite(st.index, swap), rewrite(st.value, swap))
        guard = m.guard
        super()._stmt(out if guard is None else If(guard, out), ())
        self._close()
        self._close()

    def _wg_word_store(self, m, words, first_register: str) -> None:
        """The fragment's epilogue as whole runs of ``words.lanes`` columns a lane: the quad
        trades accumulators by ``__shfl_xor_sync`` (:func:`quad_transpose`; the register a
        lane sends or keeps depends on its place in the quad, chosen by selects so that the
        accumulators stay in registers), then each run reads its word inputs and stores one
        16-byte word. The shuffles come before the guard: every lane of the warp takes part."""
        plan, acc = quad_transpose(words.lanes), self._name(m.acc)
        self._line("const int wg_t = threadIdx.x & 3;")
        self._line(f"const int wg_r0 = {first_register};")

        def by_lane(options) -> str:
            if len(set(options)) == 1:
                return options[0]
            head = " : ".join(f"wg_t == {t} ? {o}" for t, o in enumerate(options[:-1]))
            return f"({head} : {options[-1]})"

        for step, (k, regs) in enumerate(plan.sends):
            for x, lane_regs in enumerate(regs):
                sent = by_lane([f"{acc}[wg_r0 + {q}]" for q in lane_regs])
                shuffled = f"__shfl_xor_sync(0xffffffffu, {sent}, {k})"
                self._line(f"const float wg_s{step}_{x} = {shuffled};")

        def source(src) -> str:
            return f"{acc}[wg_r0 + {src[1]}]" if src[0] == "own" else f"wg_s{src[1]}_{src[2]}"

        values = Buffer("wg_e", (len(plan.sources[0]),), m.acc.dtype, "local")
        self._line(f"float {self._name(values)}[{values.size}];")
        for e in range(values.size):
            picked = by_lane([source(lane[e]) for lane in plan.sources])
            self._line(f"{self._name(values)}[{e}] = {picked};")
        iv, jv = self._name(m.i), self._name(m.j)
        for u in range(len(plan.runs[0])):
            half = by_lane([str(runs[u][0]) for runs in plan.runs])
            first = by_lane([str(runs[u][1]) for runs in plan.runs])
            self._open("")
            self._line(f"int {iv} = ((threadIdx.x & 31) >> 2) + 8 * {half};")
            self._line(f"int {jv} = {first};")
            at = u * plan.run

            def column(v, at=at):
                return Load(values, Binary("+", v, Const(at, "int32"), "int32") if at else v,
                            m.acc.dtype)  # fmt: skip

            self._word_run(m, words, column, m.guard, "wg")
            self._close()

    def _wg_outer_loop(self, s, guards, emit) -> None:
        """The k steps of one shared tile: fenced before, committed and waited for after."""
        self._wg_prelude()
        self._wg_guarded("wgmma_fence();")
        emit(s, guards)
        self._wg_guarded("wgmma_commit();")
        # A lagging pipeline (tensorir.passes.double_buffer) leaves this tile's products
        # running past the barrier; the store nests wait for them.
        self._wg_guarded(f"wgmma_wait<{self._wg_lag}>();")

    def store_index(self, buf, index) -> str:
        """``index`` into ``buf``, swizzled when ``buf`` is a wgmma operand tile (every store
        into one: copies, gathers, plain stores)."""
        text = self.expr(index)
        if self._plan is not None and self._plan.warpgroup and id(buf) in self._plan.operands:
            row = swizzle_row(buf.dtype)
            if self._wmma:
                return swizzled_index(text, row)
            self.helper(f"swizzle_or_plain_{row}", _swizzle_macro(row))
            return f"SWIZZLE_OR_PLAIN_{row}({text})"
        return text
