"""Whole-word copies in tensor-core kernels: vectorized loops that copy (or, for an
implicit-GEMM conv2d's im2col tile, gather) 4, 8 or 16 contiguous bytes run as one load and
store of an ``unsigned int`` / ``uint2`` / ``uint4`` (:mod:`codegen.vector_gather` proves the
gather's words). A mixin of :class:`codegen.cuda.CUDARenderer` and the functions that find
those loops."""

from __future__ import annotations

from tensorir.arith import linear_form, simplify_expr
from tensorir.dtype import itemsize
from tensorir.expr import Const
from tensorir.loops import For, Load, Store, walk_stmts
from tensorir.transform import substitute

from .llvm_vector import depends_on
from .vector_gather import gather_copy

__all__ = ["VECTOR_GATHER", "WordCopies", "gather_copies", "vector_copy"]

_WORDS = {4: "unsigned int", 8: "uint2", 16: "uint4"}
_ZERO_WORDS = {4: "0u", 8: "make_uint2(0u, 0u)", 16: "make_uint4(0u, 0u, 0u, 0u)"}
VECTOR_GATHER = True
"""Fetch an implicit-GEMM conv2d's im2col tile to shared memory in 16-byte words
(:mod:`codegen.vector_gather`); False keeps the element-by-element gather."""


def gather_copies(stmt, vec_copies: dict) -> dict:
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


def vector_copy(s: For):
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


class WordCopies:
    """The word-copy part of the CUDA renderer."""

    def _gather_line(self, g) -> None:
        """One word of an im2col fetch: the source word, or zeros off the image."""
        dst, src, dbase, sbase, cond, nbytes = g
        word = _WORDS[nbytes]
        load = f"*(const {word}*)&{self._name(src)}[{self.expr(sbase)}]"
        if cond is not None:
            load = f"(({self.expr(cond)}) ? {load} : {_ZERO_WORDS[nbytes]})"
        to = self.store_index(dst, dbase)  # swizzled for wgmma operands
        self._line(f"*({word}*)&{self._name(dst)}[{to}] = {load};")
