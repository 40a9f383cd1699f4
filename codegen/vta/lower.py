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

from tensorir.expr import Binary, Cast, Const, Expr, IfThenElse, Select, Var
from tensorir.loops import Allocate, For, If, Load, Program, Seq, Stmt, Store, walk_stmts

from .affine import eval_expr, eval_linear, linear, span
from .config import VTALowerError
from .tokens import interleave_with_tokens

#: The VTA buffer of each tagged scope (TVM's ``env.inp_scope`` ...).
SCOPE_BUFFERS = {"local.inp_buffer": "inp", "local.wgt_buffer": "wgt", "local.acc_buffer": "acc"}
_ALU_OPS = {">>": "SHR", "max": "MAX", "min": "MIN", "+": "ADD"}
_FACTOR_LIMITS = {"dst": 1 << 11, "src": 1 << 11, "wgt": 1 << 10}  # the ISA's field widths


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


# ----------------------------------------------------------------------------- helpers


def _stage_of(buffer) -> str:
    return f"stage of buffer {buffer.name!r}"


def _chain(s: Stmt) -> tuple[list[For], Stmt]:
    """The perfectly nested loops starting at ``s`` and the statement inside them."""
    loops = []
    while isinstance(s, For):
        loops.append(s)
        s = s.body
    return loops, s


def _pragma(s: For) -> str | None:
    for key, value in s.annotations:
        if key == "pragma":
            return value
    return None


# ----------------------------------------------------------------------------- the lowering


class _Lowering:
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

    # ------------------------------------------------------------------ compute

    def _reset(self, s: Stmt, env, ctx) -> dict:
        loops, store = _chain(s)
        buf = getattr(store, "buffer", None)
        if not (
            isinstance(store, Store)
            and isinstance(store.value, Const)
            and store.value.value == 0
            and SCOPE_BUFFERS.get(buf.scope) == "acc"
        ):
            what = _stage_of(buf) if buf is not None else "a loop nest"
            raise VTALowerError(
                f"{what}: a loop nest without a VTA pragma; mark copies between DRAM and VTA "
                "buffers 'dma_copy', accumulator arithmetic 'alu' and the GEMM block 'gemm'"
            )
        bgn, end = self._elementwise(loops, buf, store.index, env, ctx, _stage_of(buf))
        return dict(opcode="GEMM", reset=True, **_loops(bgn, end), _k="reset")

    def _gemm(self, s: For, env, ctx) -> dict:
        loops, store = _chain(s)
        k = next(i for i, lp in enumerate(loops) if _pragma(lp) == "gemm")
        outer, block = loops[:k], loops[k:]
        acc_buf = store.buffer
        what = _stage_of(acc_buf)
        reads = {SCOPE_BUFFERS.get(x.buffer.scope): x for x in _loads(store.value)}
        if set(reads) != {"acc", "inp", "wgt"} or SCOPE_BUFFERS.get(acc_buf.scope) != "acc":
            raise VTALowerError(
                f"{what}: the gemm pragma marks a reduction that must read its inputs from "
                f"local.inp_buffer and local.wgt_buffer into local.acc_buffer; found reads of "
                f"{sorted(x.buffer.name for x in _loads(store.value))}"
            )
        forms = {
            "dst": linear(store.index, what),
            "src": linear(reads["inp"].index, what),
            "wgt": linear(reads["wgt"].index, what),
        }
        kinds = {"dst": "acc", "src": "inp", "wgt": "wgt"}
        self._check_block(block, forms, what)
        bufs = {"dst": acc_buf, "src": reads["inp"].buffer, "wgt": reads["wgt"].buffer}
        start, factors = {}, {}
        for f, form in forms.items():
            kind, base = self._buffer_base(bufs[f], ctx)
            size = self.entry[kind]
            off = eval_linear(form, env)
            coefs = [form[0].get(lp.var, 0) for lp in outer]
            if off % size or any(c % size for c in coefs):
                raise VTALowerError(
                    f"{what}: the GEMM's {kinds[f]} index is not a whole number of entries; "
                    "keep the tensor block axes innermost"
                )
            start[f] = base + off // size
            factors[f] = [c // size for c in coefs]
        # The two outermost loops become the instruction's loops when their factors fit the
        # ISA's fields; the loops inside them are enumerated into micro-ops.
        n_iter = min(2, len(outer))
        while n_iter and any(
            abs(factors[f][i]) >= _FACTOR_LIMITS[f] or factors[f][i] < 0
            for f in factors
            for i in range(n_iter)
        ):
            n_iter -= 1
        inner = range(n_iter, len(outer))
        uops = []
        for vals in itertools.product(*(range(outer[i].extent) for i in inner)):
            uops.append(tuple(
                start[f] + sum(factors[f][i] * v for i, v in zip(inner, vals))
                for f in ("dst", "src", "wgt")
            ))  # fmt: skip
        bgn, end = self._kernel(uops)
        iters = [lp.extent for lp in outer[:n_iter]]
        fac = {f: [factors[f][i] for i in range(n_iter)] for f in factors}
        while len(iters) < 2:  # pad to (out, in) with loops of one iteration
            iters.insert(0, 1)
            for f in fac:
                fac[f].insert(0, 0)
        return dict(
            opcode="GEMM", reset=False, wgt_factor_out=fac["wgt"][0], wgt_factor_in=fac["wgt"][1],
            **_loops(bgn, end, iters, fac["dst"], fac["src"]), _k="gemm",
        )  # fmt: skip

    def _check_block(self, block, forms, what) -> None:
        """The loops under the gemm pragma must be exactly the BATCH x BLOCK_OUT x BLOCK_IN
        tensor block (TVM's tensorize of env.gemm checks the same)."""
        spec = self.spec
        want = {  # (acc, inp, wgt) element coefficients -> extent
            (1, 0, spec.BLOCK_IN): spec.BLOCK_OUT,
            (0, 1, 1): spec.BLOCK_IN,
            (spec.BLOCK_OUT, spec.BLOCK_IN, 0): spec.BATCH,
        }
        seen = {}
        for lp in block:
            key = tuple(forms[f][0].get(lp.var, 0) for f in ("dst", "src", "wgt"))
            if want.get(key) != lp.extent:
                seen = None
                break
            seen[key] = lp.extent
        expected = {k for k, v in want.items() if v > 1}
        if seen is None or set(seen) != expected:
            raise VTALowerError(
                f"{what}: the gemm pragma must mark the tensor block loops (b_tns, co_tns, "
                f"ic_tns: {spec.BATCH} x {spec.BLOCK_OUT} x {spec.BLOCK_IN}) and nothing else; "
                "put it on the b_tns loop with the block innermost"
            )

    def _alu(self, s: For, env, ctx) -> list:
        loops, store = _chain(s)
        what = _stage_of(store.buffer) if isinstance(store, Store) else "an alu nest"
        if not isinstance(store, Store):
            raise VTALowerError(f"{what}: the alu pragma must mark a perfect loop nest")
        ops, src = _alu_ops(store.value, what)
        if linear(src.index, what) != linear(store.index, what):
            raise VTALowerError(f"{what}: the ALU computes in place; read and write the same "
                                "accumulator element")  # fmt: skip
        if SCOPE_BUFFERS.get(src.buffer.scope) != "acc":
            raise VTALowerError(f"{what}: the alu pragma computes on local.acc_buffer, not "
                                f"{src.buffer.scope!r}")  # fmt: skip
        bgn, end = self._elementwise(loops, src.buffer, src.index, env, ctx, what)
        return [
            dict(opcode="ALU", alu_opcode=op, use_imm=True, imm=imm, **_loops(bgn, end), _k="alu")
            for op, imm in ops
        ]

    # ------------------------------------------------------------------ DMA

    def _dma(self, s: For, env, ctx) -> list:
        key = ("dma", id(s))
        if key not in self.plans:
            self.plans[key] = self._dma_plan(s)
        plan = self.plans[key]
        if plan[0] == "store":
            return self._store(*plan[1:], env, ctx)
        return self._load(*plan[1:], env, ctx)

    def _dma_plan(self, s: For) -> tuple:
        """What a dma_copy nest copies, from where to where, and its DMA dimensions."""
        loops, store = _chain(s)
        if not isinstance(store, Store):
            raise VTALowerError("a dma_copy pragma must mark a perfect loop nest of one copy")
        dst = store.buffer
        what = _stage_of(dst)
        cond, value = None, store.value
        if isinstance(value, IfThenElse | Select):
            if not (isinstance(value.f, Const) and value.f.value == 0):
                raise VTALowerError(f"{what}: a padded copy must pad with zeros")
            cond, value = value.cond, value.t
        while isinstance(value, Cast):
            value = value.value
        if not isinstance(value, Load):
            raise VTALowerError(f"{what}: a dma_copy nest must be a plain copy, got {store.value}")
        src = value.buffer
        if dst.scope == "global" and SCOPE_BUFFERS.get(src.scope) == "acc":
            what = _stage_of(value.buffer)
            self._bind_dram("out", store.buffer, what)
            sram_form = linear(value.index, what)
            dram_form = linear(store.index, what)
            dims = self._dims(loops, sram_form, dram_form, "acc", what, merge=True)
            return ("store", loops, store, value, sram_form, dram_form, dims)
        kind = SCOPE_BUFFERS.get(dst.scope)
        if src.scope != "global" or kind is None:
            raise VTALowerError(
                f"{what}: a dma_copy must copy global memory into local.inp_buffer / "
                f"local.wgt_buffer / local.acc_buffer, or local.acc_buffer out; it copies "
                f"{src.scope!r} into {dst.scope!r}"
            )
        self._bind_dram(kind, src, what)
        sram_form = linear(store.index, what)
        dram_form = linear(value.index, what)
        dims = self._dims(loops, sram_form, dram_form, kind, what, merge=cond is None)
        return ("load", loops, dst, kind, cond, sram_form, dram_form, dims)

    def _load(self, loops, dst, kind, cond, sram_form, dram_form, dims, env, ctx) -> list:
        what = _stage_of(dst)
        _, base = self._buffer_base(dst, ctx)
        size = self.entry[kind]
        outer, (ylp, xlp) = dims[:-2], dims[-2:]
        out = []
        for vals in itertools.product(*(range(d[3]) for d in outer)):
            e = {**env, **{d[0].var: v for d, v in zip(outer, vals)}}
            y_ext, x_ext = ylp[3], xlp[3]
            pads = (0, 0, 0, 0)
            if cond is not None:
                pads = self._pads(cond, loops, ylp, xlp, e, what)
            first = {**e}
            for d, v in ((ylp, pads[0]), (xlp, pads[2])):
                if d[0] is not None:
                    first[d[0].var] = v
            sram0 = {**e, **{d[0].var: 0 for d in (ylp, xlp) if d[0] is not None}}
            for lp in loops:
                first.setdefault(lp.var, 0)
                sram0.setdefault(lp.var, 0)
            dram = eval_linear(dram_form, first)
            sram = eval_linear(sram_form, sram0)
            if dram % size or sram % size:
                raise VTALowerError(f"{what}: the copy does not start at a whole {kind} entry")
            y_size, x_size = y_ext - pads[0] - pads[1], x_ext - pads[2] - pads[3]
            out.append(dict(
                _mem("LOAD", kind, base + sram // size, dram // size, y_size, x_size,
                     ylp[2] if ylp[0] is not None else x_size, pads), _k="load",
            ))  # fmt: skip
        return out

    def _pads(self, cond, loops, ylp, xlp, env, what) -> tuple:
        """(y_pad_0, y_pad_1, x_pad_0, x_pad_1): where the copy condition is false around the
        (y, x) rectangle, memoized on the values of the condition's other variables."""
        key = ("cond", id(cond))
        if key not in self.plans:
            inside = {d[0].var for d in (ylp, xlp) if d[0] is not None} | {lp.var for lp in loops}
            self.plans[key] = tuple(v for v in _expr_vars(cond) if v not in inside)
        memo_key = (id(cond), tuple(env.get(v) for v in self.plans[key]))
        if memo_key in self.memo:
            return self.memo[memo_key]
        y_ext, x_ext = ylp[3], xlp[3]
        grid = {**env}
        if ylp[0] is not None:
            grid[ylp[0].var] = np.arange(y_ext)[:, None]
        if xlp[0] is not None:
            grid[xlp[0].var] = np.arange(x_ext)[None, :]
        for lp in loops:  # element loops: any value (the condition is per entry)
            grid.setdefault(lp.var, 0)
        mask = np.broadcast_to(eval_expr(cond, grid), (y_ext, x_ext))
        y0, y1 = span(mask.any(axis=1), what)
        x0, x1 = span(mask.any(axis=0), what)
        if not mask[y0 : y_ext - y1, x0 : x_ext - x1].all():
            raise VTALowerError(f"{what}: the padding is not a border around the copy")
        self.memo[memo_key] = (y0, y1, x0, x1)
        return self.memo[memo_key]

    def _dims(self, loops, sram_form, dram_form, kind, what, merge: bool):
        """The copy's entry loops as [loop, sram stride, dram stride, extent] (outer first),
        adjacent loops merged where both sides are contiguous (not across padding), the last
        two being the DMA's rows (y) and columns (x); (None, ..) stands for a missing one."""
        entry_loops = self._entry_loops(loops, sram_form, kind, what, dram_form)
        size = self.entry[kind]
        dims = []
        for lp, s in entry_loops:
            d = dram_form[0].get(lp.var, 0)
            if d % size:
                raise VTALowerError(f"{what}: loop {lp.var.name} reads {d} elements apart in "
                                    f"DRAM, not whole {kind} entries")  # fmt: skip
            dims.append([lp, s, d // size, lp.extent])
        if merge:
            k = len(dims) - 1
            while k > 0:
                o, i = dims[k - 1], dims[k]
                if o[1] == i[1] * i[3] and o[2] == i[2] * i[3]:
                    # addressed through the inner loop's var alone (the outer one stays 0):
                    # contiguity makes inner_stride * v walk both
                    dims[k - 1 : k + 1] = [[i[0], i[1], i[2], o[3] * i[3]]]
                k -= 1
        if not dims or dims[-1][1] != 1 or dims[-1][2] != 1:
            dims.append([None, 1, 1, 1])  # a row of one entry
        if len(dims) == 1:
            dims.insert(0, [None, dims[0][3], dims[0][3], 1])
        y = dims[-2]
        if y[0] is not None and y[1] != dims[-1][3]:
            raise VTALowerError(f"{what}: the copy's rows are not dense in the buffer")
        return dims

    def _bind_dram(self, kind, param, what) -> None:
        name = self.dram.setdefault(kind, param.name)
        if name != param.name:
            raise VTALowerError(
                f"{what}: {kind} loads read both {name!r} and {param.name!r}; VTA binds one DRAM "
                "tensor per memory type"
            )

    def _store(self, loops, store, load, sram_form, dram_form, dims, env, ctx) -> list:
        _, base = self._buffer_base(load.buffer, ctx)
        size = self.entry["acc"]
        outer, (ylp, xlp) = dims[:-2], dims[-2:]
        stores = []
        for vals in itertools.product(*(range(d[3]) for d in outer)):
            e = {**env, **{d[0].var: v for d, v in zip(outer, vals)}}
            for lp in loops:
                e.setdefault(lp.var, 0)
            sram, dram = eval_linear(sram_form, e), eval_linear(dram_form, e)
            stride = ylp[2] if ylp[0] is not None else xlp[3]
            stores.append(_mem("STORE", "out", base + sram // size, dram // size, ylp[3],
                               xlp[3], stride))  # fmt: skip
        if store.buffer.dtype == "int8":
            return [dict(x, _k="store") for x in stores]
        return self._store_planes(stores, loops, load, env, ctx, store.buffer)

    def _store_planes(self, stores, loops, load, env, ctx, param) -> list:
        """An int32 result as four int8 byte planes: STORE writes the low 8 bits, so shift the
        accumulator right by 8 between the planes (tokens inside: the ALU waits for the
        previous plane's stores; the last ADD 0 waits for the last plane, freeing the tile)."""
        what = _stage_of(load.buffer)
        bgn, end = self._elementwise(loops, load.buffer, load.index, env, ctx, what)
        plane = self._entries(param.size, "acc", f"output {param.name!r}")

        def alu(op, imm, **deps):
            return dict(opcode="ALU", alu_opcode=op, use_imm=True, imm=imm,
                        **_loops(bgn, end), _k="alu", _sealed=True, **deps)  # fmt: skip

        out = []
        for p in range(4):
            if p:  # shift the next byte down once the previous plane is stored
                out.append(alu("SHR", 8, pop_next=True, push_next=True))
            else:
                out.append(alu("ADD", 0, push_next=True))  # a no-op that hands the tile over
            group = [dict(x, dram_base=x["dram_base"] + p * plane, _k="store", _sealed=True)
                     for x in stores]  # fmt: skip
            group[0]["pop_prev"] = True
            group[-1]["push_prev"] = True
            out += group
        out.append(alu("ADD", 0, pop_next=True))  # wait for the last plane: the tile is free
        return out


# ----------------------------------------------------------------------------- small pieces


def _loads(e: Expr) -> list:
    from tensorir.expr import walk

    return [x for x in walk(e) if isinstance(x, Load)]


def _expr_vars(e: Expr) -> tuple:
    from tensorir.expr import walk

    return tuple(dict.fromkeys(n for n in walk(e) if isinstance(n, Var)))


def _free_vars(s: Stmt) -> tuple:
    """The variables ``s`` reads that its own loops do not bind, in a stable order."""
    from tensorir.expr import walk

    bound, seen = set(), {}
    for x in walk_stmts(s):
        if isinstance(x, For):
            bound.add(x.var)
        exprs = (
            (x.index, x.value) if isinstance(x, Store) else (x.cond,) if isinstance(x, If) else ()
        )
        for e in exprs:
            for node in walk(e):
                if isinstance(node, Var):
                    seen.setdefault(node, None)
    return tuple(v for v in seen if v not in bound)


def _leads_to_gemm(s: For) -> bool:
    loops, _ = _chain(s)
    return any(_pragma(lp) == "gemm" for lp in loops)


def _alu_ops(value: Expr, what: str):
    """``value`` as in-place ALU operations with immediates, innermost first, and the Load
    they start from."""
    ops = []
    e = value
    while True:
        if isinstance(e, Cast):
            e = e.value  # int32 -> int8: what STORE's 8 bits keep anyway
        elif isinstance(e, Binary) and (e.op in _ALU_OPS or e.op in ("-", "<<")):
            a, b = e.a, e.b
            if isinstance(a, Const) and e.op in ("max", "min", "+"):
                a, b = b, a
            if not isinstance(b, Const):
                raise VTALowerError(f"{what}: the ALU takes immediates; {e} has none")
            imm = int(b.value)
            op = _ALU_OPS.get(e.op)
            if e.op == "-":
                op, imm = "ADD", -imm
            elif e.op == "<<":
                op, imm = "SHR", -imm
            if not -(1 << 15) <= imm < (1 << 15):
                raise VTALowerError(f"{what}: immediate {imm} does not fit the ALU's 16 bits")
            ops.append((op, imm))
            e = a
        elif isinstance(e, Load):
            return ops[::-1], e
        else:
            raise VTALowerError(
                f"{what}: the ALU computes >>, <<, max, min, + and - with immediates on the "
                f"accumulator; cannot compute {e}"
            )


def _mem(op, kind, sram, dram, y, x, stride, pads=(0, 0, 0, 0), **deps):
    y0, y1, x0, x1 = pads
    return dict(
        opcode=op, memory_type=kind, sram_base=sram, dram_base=dram, y_size=y, x_size=x,
        x_stride=stride, y_pad_0=y0, y_pad_1=y1, x_pad_0=x0, x_pad_1=x1, **deps,
    )  # fmt: skip


def _loops(bgn, end, iters=(1, 1), dst=(0, 0), src=(0, 0)):
    return dict(
        uop_bgn=bgn, uop_end=end, iter_out=iters[0], iter_in=iters[1],
        dst_factor_out=dst[0], dst_factor_in=dst[1], src_factor_out=src[0], src_factor_in=src[1],
    )  # fmt: skip
