"""The compute nests of a VTA lowering (codegen/vta/lower.py): the accumulator's reset, the
``gemm`` block as one GEMM with micro-ops, an ``alu`` nest as in-place ALU instructions."""

from __future__ import annotations

import itertools

from tensorir.expr import Binary, Cast, Const, Expr
from tensorir.loops import For, Load, Stmt, Store

from .affine import eval_linear, linear
from .config import VTALowerError
from .insn_dict import _loops
from .nest import SCOPE_BUFFERS, _chain, _loads, _pragma, _stage_of

_ALU_OPS = {">>": "SHR", "max": "MAX", "min": "MIN", "+": "ADD"}
_FACTOR_LIMITS = {"dst": 1 << 11, "src": 1 << 11, "wgt": 1 << 10}  # the ISA's field widths


class _ComputeLowering:
    """The compute nests' instructions; mixed into ``lower._Lowering``, whose buffer layout
    (``entry``, ``_buffer_base``) and micro-op kernels (``_kernel``, ``_elementwise``) they use."""

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
