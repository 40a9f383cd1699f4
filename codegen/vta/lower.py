"""Lower a VTA-scheduled loop nest (tensorir's loop IR) to VTA's instruction stream.

The input is what ``tensorir.lower`` makes of a State scheduled with VTA's scopes and pragmas
(codegen/vta/schedule.py): buffers in ``local.inp_buffer`` / ``local.wgt_buffer`` /
``local.acc_buffer``, loops annotated ``("pragma", "dma_copy" | "alu" | "gemm")``. The walk
runs the ordinary loops (tile loops, the ci-chunk loop) itself, with concrete values, and turns
each marked loop nest into instructions as a whole:

* a ``dma_copy`` nest copying global memory into a VTA buffer is a 2-D strided ``LOAD`` (or
  several: the loops outside the two innermost non-mergeable ones are unrolled); its padding is
  where the copy's bounds condition (``if_then_else(cond, data[...], 0)``, the inlined padding
  stage) is false, and must be a border of zeros around the rectangle. A ``dma_copy`` nest from
  the accumulator to global memory is a ``STORE`` (an int32 destination is stored as four
  int8 byte planes, ``SHR 8`` on the ALU between them, since STORE writes 8 bits);
* the nest above a ``gemm`` loop (the tensorized BATCH x BLOCK_OUT x BLOCK_IN block) is one
  ``GEMM``: its two outermost loops become the instruction's ``iter_out`` / ``iter_in`` with the
  index strides as factors, the loops inside them are enumerated into micro-ops;
* an ``alu`` nest ``acc[i] = f(acc[i])`` is one ``ALU`` instruction per operation of ``f``
  (``>>``, ``max``, ``min``, ``+`` with immediates, applied in place; the final cast to int8 is
  the STORE's truncation);
* the reduction's init nest (a store of 0 into the accumulator) is a ``GEMM`` with ``reset``.

Buffer indices are in elements; an instruction addresses *entries* (a BATCH x BLOCK tile), so
every index is checked to be a whole number of entries.

Virtual threads (``vthread`` loops around everything, from ``h_threading`` / ``oc_threading``)
are VTA's two-context latency hiding: each context gets its own part of every buffer, the walk
runs once per context, and the contexts' streams are interleaved step by step (a step: the loads
of a ci chunk, its GEMM, and the ALU and stores that follow). Dependence tokens then say which
step waits for which (codegen/vta/tokens.py); tests/codegen/vta_fixed_nest_oracle.py (the reference
generator, kept as a test oracle under tests/) describes the same protocol.

Micro-op kernels are deduplicated and loaded once at the start, as VTA's runtime caches them.
The result is the plain ``{"insns": [dict, ...], "uops": ndarray (n, 3)}`` that
runtime/vta/isa.py's ``from_dict`` assembles.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from tensorir.loops import Allocate, For, If, Program, Seq, Stmt, Store, walk_stmts

from .affine import eval_linear, linear
from .config import VTALowerError
from .insn_dict import _loops, _mem  # noqa: F401  (_loops: the test oracle imports it here)
from .lower_compute import _ComputeLowering
from .lower_dma import _DmaLowering
from .nest import SCOPE_BUFFERS, _chain, _free_vars, _leads_to_gemm, _loads, _pragma, _stage_of
from .tokens import interleave_with_tokens


def lower_to_vta(program: Program, spec) -> dict:
    """The instruction stream and uop table of a VTA-scheduled loop-IR ``program``.

    Parameters
    ----------
    program : tensorir.loops.Program
        ``tensorir.lower(state)`` of a State scheduled as codegen/vta/schedule.py does.
    spec : VTASpec
        The hardware (entry sizes, buffer depths); duck-typed.

    Returns
    -------
    dict
        ``{"insns": [dict, ...], "uops": ndarray (n, 3) int32}``.

    Raises
    ------
    VTALowerError
        A loop nest without a VTA pragma, a buffer in a scope VTA does not have, a copy or
        index that is not a whole number of entries, a buffer that overflows.
    """
    return _Lowering(program, spec).run()


# ----------------------------------------------------------------------------- the lowering


class _Lowering(_ComputeLowering, _DmaLowering):
    def __init__(self, program: Program, spec):
        self.program, self.spec = program, spec
        self.entry = {
            "inp": spec.BATCH * spec.BLOCK_IN,
            "wgt": spec.BLOCK_OUT * spec.BLOCK_IN,
            "acc": spec.BATCH * spec.BLOCK_OUT,
        }
        self.uops: list = []
        self.kernels: dict = {}  # uop tuple -> (bgn, end)
        self.plans: dict = {}  # per loop nest: what does not depend on the loop values
        self.memo: dict = {}  # (nest, context, outside values) -> its instructions
        self.dram: dict = {}  # memory type -> param buffer name
        self.body, self.vthreads = self._peel_vthreads(program.body)
        self.alias = self._alu_aliases()
        self.base, self.per_ctx = self._layout()

    # ------------------------------------------------------------------ setup

    def _peel_vthreads(self, body: Stmt):
        vthreads = []
        while isinstance(body, For) and body.kind == "vthread":
            vthreads.append(body)
            body = body.body
        for s in walk_stmts(body):
            if isinstance(s, For) and s.kind == "vthread":
                raise VTALowerError(
                    f"vthread loop {s.var.name}: virtual threads must be the outermost loops of "
                    "the output stage (bind h_threading / oc_threading splits outside the tiles)"
                )
        return body, vthreads

    def _alu_aliases(self) -> dict:
        """ALU stages compute in place: their buffer is the accumulator they read."""
        alias = {}
        for s in walk_stmts(self.body):
            if isinstance(s, For) and _pragma(s) == "alu":
                _, store = _chain(s)
                if isinstance(store, Store):
                    srcs = {x.buffer for x in _loads(store.value)}
                    if len(srcs) == 1:
                        alias[store.buffer] = srcs.pop()
        return alias

    def _layout(self):
        """Each VTA buffer's offset (entries) in one context's part of its on-chip buffer."""
        base, per_ctx = {}, dict.fromkeys(self.entry, 0)
        for s in walk_stmts(self.body):
            if not isinstance(s, Allocate):
                continue
            buf = s.buffer
            kind = SCOPE_BUFFERS.get(buf.scope)
            if kind is None:
                raise VTALowerError(
                    f"{_stage_of(buf)}: scope {buf.scope!r} is not a VTA buffer; cache it into "
                    f"{list(SCOPE_BUFFERS)} (cache_read / cache_write with that scope)"
                )
            if buf in self.alias:
                continue
            entries = self._entries(buf.size, kind, _stage_of(buf))
            base[buf] = per_ctx[kind]
            per_ctx[kind] += entries
        n = max(1, math.prod(v.extent for v in self.vthreads))
        for kind, need in per_ctx.items():
            if need * n > self.spec.depth(kind):
                raise VTALowerError(
                    f"the schedule needs {need * n} {kind} buffer entries ({n} virtual threads), "
                    f"more than its {self.spec.depth(kind)}; use smaller tiles or fewer threads"
                )
        return base, per_ctx

    def _entries(self, elems: int, kind: str, what: str) -> int:
        if elems % self.entry[kind]:
            raise VTALowerError(
                f"{what}: {elems} elements is not a whole number of {kind} entries "
                f"({self.entry[kind]} elements each)"
            )
        return elems // self.entry[kind]

    def _buffer_base(self, buf, ctx: int) -> tuple[str, int]:
        """(memory type, first entry) of VTA buffer ``buf`` in context ``ctx``."""
        buf = self.alias.get(buf, buf)
        kind = SCOPE_BUFFERS[buf.scope]
        return kind, ctx * self.per_ctx[kind] + self.base[buf]

    # ------------------------------------------------------------------ the walk

    def run(self) -> dict:
        streams = []
        extents = [v.extent for v in self.vthreads]
        for ctx, values in enumerate(itertools.product(*(range(e) for e in extents))):
            env = {v.var: x for v, x in zip(self.vthreads, values)}
            out: list = []
            self._walk(self.body, env, ctx, out)
            streams.append(out)
        insns = interleave_with_tokens(streams)
        n = len(self.uops)
        if n > self.spec.depth("uop"):
            raise VTALowerError(
                f"the schedule's micro-op kernels need {n} uop buffer entries, more than its "
                f"{self.spec.depth('uop')}; use smaller tiles"
            )
        head = [_mem("LOAD", "uop", 0, 0, 1, n, n)] if n else []
        return {
            "insns": head + insns + [{"opcode": "FINISH"}],
            "uops": np.asarray(self.uops, np.int32).reshape(-1, 3),
        }

    def _walk(self, s: Stmt, env: dict, ctx: int, out: list) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self._walk(x, env, ctx, out)
        elif isinstance(s, Allocate):
            self._walk(s.body, env, ctx, out)
        elif isinstance(s, For):
            prag = _pragma(s)
            if prag == "dma_copy":
                out.extend(self._emit(self._dma, s, env, ctx))
            elif prag == "alu":
                out.extend(self._emit(self._alu, s, env, ctx))
            elif prag == "gemm" or self._leads_to_gemm(s):
                out.extend(self._emit(self._gemm, s, env, ctx))
            elif self._has_pragma(s):
                for k in range(s.extent):
                    self._walk(s.body, {**env, s.var: k}, ctx, out)
            else:
                out.extend(self._emit(self._reset, s, env, ctx))
        elif isinstance(s, Store):
            out.extend(self._emit(self._reset, s, env, ctx))
        elif isinstance(s, If):
            raise VTALowerError(
                f"a guarded statement ({s.cond}): VTA tiles must divide their axes (check_config)"
            )
        else:
            raise VTALowerError(f"unexpected statement {type(s).__name__} in a VTA schedule")

    def _leads_to_gemm(self, s: For) -> bool:
        key = ("gemm_chain", id(s))
        if key not in self.plans:
            self.plans[key] = _leads_to_gemm(s)
        return self.plans[key]

    def _has_pragma(self, s: Stmt) -> bool:
        key = ("has_pragma", id(s))
        if key not in self.plans:
            self.plans[key] = any(isinstance(x, For) and _pragma(x) for x in walk_stmts(s))
        return self.plans[key]

    def _emit(self, fn, s: Stmt, env: dict, ctx: int) -> list:
        """``fn(s, env, ctx)``'s instructions (a list), memoized on the values of the variables
        ``s`` reads from outside (a GEMM's buffer-relative indices usually read none, so each
        context compiles it once); fresh dicts each time, since tokens are set on them."""
        key = ("free", id(s))
        if key not in self.plans:
            self.plans[key] = _free_vars(s)
        memo_key = (id(s), ctx, tuple(env.get(v) for v in self.plans[key]))
        insns = self.memo.get(memo_key)
        if insns is None:
            insns = fn(s, env, ctx)
            insns = self.memo[memo_key] = insns if isinstance(insns, list) else [insns]
        return [dict(i) for i in insns]

    # ------------------------------------------------------------------ kernels

    def _kernel(self, uops) -> tuple[int, int]:
        key = tuple(uops)
        if key not in self.kernels:
            bgn = len(self.uops)
            self.uops.extend(key)
            self.kernels[key] = (bgn, len(self.uops))
        return self.kernels[key]

    def _entry_loops(self, loops, form, kind: str, what: str, dram_form=None):
        """Split ``loops`` into entry loops [(loop, entry coefficient)] and the element loops
        inside one entry (their product must be one whole entry, laid out alike in DRAM)."""
        terms, _ = form
        size = self.entry[kind]
        entry_loops, elem = [], 1
        for lp in loops:
            c = terms.get(lp.var, 0)
            if 0 < c < size:
                elem *= lp.extent
                if dram_form is not None and dram_form[0].get(lp.var, 0) != c:
                    raise VTALowerError(
                        f"{what}: loop {lp.var.name} inside a {kind} entry is laid out "
                        "differently in DRAM; copy whole BATCH x BLOCK tiles"
                    )
            elif c % size:
                raise VTALowerError(f"{what}: loop {lp.var.name} moves {c} elements, not whole "
                                    f"{kind} entries of {size}")  # fmt: skip
            else:
                entry_loops.append((lp, c // size))
        if elem != size:
            raise VTALowerError(
                f"{what}: the innermost loops move {elem} elements per step, not one {kind} "
                f"entry of {size} (BATCH x BLOCK); keep the tensor block axes innermost"
            )
        return entry_loops

    def _elementwise(self, loops, buf, index, env, ctx, what) -> tuple[int, int]:
        """The elementwise kernel (dst = src = entry) over the entries ``loops`` touch."""
        kind, base = self._buffer_base(buf, ctx)
        form = linear(index, what)
        entry_loops = self._entry_loops(loops, form, kind, what)
        start = base + eval_linear(form, env) // self.entry[kind]
        uops = []
        for vals in itertools.product(*(range(lp.extent) for lp, _ in entry_loops)):
            e = start + sum(c * v for (_, c), v in zip(entry_loops, vals))
            uops.append((e, e, 0))
        return self._kernel(uops)
