"""One run of a tensor-core epilogue in 16-byte words, for both fragment renderers: the wmma one
(:mod:`codegen.cuda_wmma`, accumulators read as words from the shared staging tile) and the
warpgroup one (:mod:`codegen.cuda_warpgroup`, accumulators traded between lanes by shuffles).
Either way a lane ends with the accumulators of ``lanes`` consecutive columns of one row; this
reads each input of :func:`codegen.wide_epilogue.word_store_plan` as one word, computes the
epilogue column by column in registers and stores one word. A mixin of
:class:`codegen.cuda.CUDARenderer`."""

from __future__ import annotations

from tensorir.dtype import itemsize
from tensorir.expr import Binary, Var
from tensorir.loops import Buffer, For, Load, Store
from tensorir.transform import rewrite, substitute

from .wide_epilogue import WORD_BYTES

__all__ = ["WordEpilogues"]


class WordEpilogues:
    """The word epilogue part of the CUDA renderer."""

    def _word_run(self, m, words, acc_value, guard, prefix: str) -> None:
        """Store nest ``m``'s run of ``words.lanes`` columns starting at its column variable
        (declared by the caller, with the row), under ``guard`` (rows only): its word inputs
        into registers, the epilogue with ``acc_value(v)`` (an Expr) as the accumulator of
        column ``v`` of the run, one 16-byte store. Local names start with ``prefix``."""
        st, n, v = m.store, words.lanes, Var(f"{prefix}_v", "int32")
        if guard is not None:
            self._open(f"if ({self.expr(guard)})")
        inputs = {}
        for i, load in enumerate(words.word_loads):
            buf = Buffer(f"{prefix}_in{i}", (n,), load.dtype, "local")
            self._word_read(buf, f"{self._name(load.buffer)}[{self.expr(load.index)}]")
            inputs[id(load)] = Load(buf, v, load.dtype)

        def swap(node):
            if isinstance(node, Load) and node.buffer is m.acc:
                return acc_value(v)
            return inputs.get(id(node))

        value = substitute(rewrite(st.value, swap), {m.j: Binary("+", m.j, v, "int32")})
        out = Buffer(f"{prefix}_out", (n,), st.buffer.dtype, "local")
        self._line(f"{self._aligned_array(out)};")
        super()._stmt(For(v, n, Store(out, v, value), kind="unrolled"), ())
        self._line(
            f"*(uint4*)&{self._name(st.buffer)}[{self.expr(st.index)}] = "
            f"*(const uint4*){self._name(out)};"
        )
        if guard is not None:
            self._close()

    def _aligned_array(self, buf: Buffer) -> str:
        return f"__align__(16) {self.storage_type(buf.dtype)} {self._name(buf)}[{buf.size}]"

    def _word_read(self, buf: Buffer, src: str) -> None:
        """Declare the 16-byte aligned register array ``buf`` and fill it from ``&src`` in
        16-byte words."""
        self._line(f"{self._aligned_array(buf)};")
        per_word = WORD_BYTES // itemsize(buf.dtype)
        name = self._name(buf)
        for w in range(buf.size // per_word):
            at = f" + {w * per_word}" if w else ""
            self._line(f"*(uint4*)&{name}[{w * per_word}] = *(const uint4*)(&{src}{at});")
