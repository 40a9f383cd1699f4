"""The ``dma_copy`` nests of a VTA lowering (codegen/vta/lower.py): copies from DRAM into a VTA
buffer as 2-D strided LOADs with zero padding, the accumulator out as STOREs (an int32 result as
four int8 byte planes)."""

from __future__ import annotations

import itertools

import numpy as np

from tensorir.expr import Cast, Const, IfThenElse, Select
from tensorir.loops import For, Load, Store

from .affine import eval_expr, eval_linear, linear, span
from .config import VTALowerError
from .insn_dict import _loops, _mem
from .nest import SCOPE_BUFFERS, _chain, _expr_vars, _stage_of


class _DmaLowering:
    """The copies' instructions; mixed into ``lower._Lowering``, whose buffer layout (``entry``,
    ``_buffer_base``, ``_entries``), memo tables and kernels (``_entry_loops``, ``_elementwise``)
    they use."""

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
