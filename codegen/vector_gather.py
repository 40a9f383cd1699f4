"""Vectorized copies that gather: an implicit-GEMM conv2d's im2col copy to shared memory as
16-byte words.

The tensor-core sketch copies each GEMM operand to shared memory 8 halves (16 bytes; 4 floats
for a float32 conv on TF32 fragments, where ``8`` below reads ``4``) at a time:
a vectorized loop ``v`` over ``dst[b + v] = src[index(v)]``. For a dense operand the source
index is ``base + v``; for the im2col operand of :mod:`tensorir.ops.conv2d_gemm` it is a gather
through the tap ``r = 8*a + v`` (``8*a``: the run's start, a multiple of 8)::

    dst[b + v] = if_then_else(cond(r), data[(.. ih(floordiv(r, KW*CI)) ..)*CI + floormod(r, CI)], 0)

With ``CI`` a multiple of 8 the 8 lanes read 8 consecutive channels of one pixel: every
``floordiv(8*a + v, c)`` with ``8 | c`` equals ``floordiv(8*a, c)`` and every
``floormod(8*a + v, c)`` equals ``floormod(8*a, c) + v``. :func:`gather_copy` applies those two
identities (:func:`lane_invariant`) and then asks what ``codegen.cuda``'s plain vector copy
asks: the source index is ``start + v`` with ``start`` a multiple of 8 (:func:`known_multiple`
sees through ``floormod``), and the condition does not depend on ``v``. The copy is then one
16-byte load, or zeros where the condition fails (the image's border).
"""

from __future__ import annotations

import math

from tensorir.arith import linear_form, simplify_expr
from tensorir.expr import Binary, Const, Expr, IfThenElse, Select, Var
from tensorir.loops import For, Load, Store
from tensorir.transform import map_children, substitute

from .llvm_vector import depends_on

__all__ = ["GatherCopy", "aligned_rest", "gather_copy", "known_multiple", "lane_invariant"]


def known_multiple(e: Expr) -> int:
    """A positive ``g`` with ``e % g == 0`` for every value of its variables (1 if unknown)."""
    form = linear_form(e)
    if form is None:
        return 1
    terms, const = form
    g = abs(const)
    for atom, coef in terms.items():
        m = 1
        if isinstance(atom, Binary) and atom.op == "floormod" and isinstance(atom.b, Const):
            m = math.gcd(known_multiple(atom.a), int(atom.b.value))
        g = math.gcd(g, abs(coef) * m)
    return g or 1 << 30  # 0 is a multiple of anything


def aligned_rest(e: Expr, var: Var, lanes: int) -> Expr | None:
    """``e - var`` when ``e = var + rest`` with ``rest`` a known multiple of ``lanes``."""
    form = linear_form(e)
    if form is None or form[0].get(var) != 1:
        return None
    rest = simplify_expr(substitute(e, {var: Const(0, var.dtype)}))
    if depends_on(rest, var) or known_multiple(rest) % lanes:
        return None
    return rest


def lane_invariant(e: Expr, var: Var, lanes: int) -> Expr:
    """``e`` with ``floordiv(x, c)`` -> ``floordiv(x - var, c)`` and ``floormod(x, c)`` ->
    ``floormod(x - var, c) + var`` wherever ``x = var + (a multiple of lanes)`` and
    ``lanes | c``: equal for ``0 <= var < lanes`` (the run ``x - var .. x - var + lanes - 1``
    does not cross a multiple of ``c``)."""

    def visit(node: Expr) -> Expr:
        node = map_children(node, visit)
        if not (isinstance(node, Binary) and node.op in ("floordiv", "floormod")):
            return node
        c = node.b.value if isinstance(node.b, Const) else None
        if not isinstance(c, int) or c <= 0 or c % lanes:
            return node
        rest = aligned_rest(node.a, var, lanes)
        if rest is None:
            return node
        out = Binary(node.op, rest, node.b, node.dtype)
        return out if node.op == "floordiv" else Binary("+", out, var, node.dtype)

    return visit(e)


class GatherCopy(tuple):
    """``(dst, src, dst_base, src_base, cond)``: ``dst[dst_base + v] = cond ? src[src_base + v]
    : 0`` for the lanes ``v`` of one word (``cond`` None: always)."""

    __slots__ = ()


def gather_copy(s: For, word_elems: int) -> GatherCopy | None:
    """The vectorized loop ``s`` as one word-wide copy (module docstring), or None.

    ``word_elems`` is the loop's extent (the caller checked that it makes a 4, 8 or 16-byte
    word). Both the shared destination and the source must start at a multiple of it."""
    if s.kind != "vectorized" or not isinstance(s.body, Store) or s.extent != word_elems:
        return None
    st, v, n = s.body, s.var, s.extent
    value, cond = st.value, None
    if isinstance(value, IfThenElse | Select):
        if not (isinstance(value.f, Const) and value.f.value == 0):
            return None
        cond, value = lane_invariant(value.cond, v, n), value.t
        if depends_on(cond, v):
            return None
    if not isinstance(value, Load) or value.dtype != st.buffer.dtype:
        return None
    bases = []
    for index in (st.index, lane_invariant(value.index, v, n)):
        base = aligned_rest(simplify_expr(index), v, n)
        if base is None:
            return None
        bases.append(base)
    return GatherCopy((st.buffer, value.buffer, bases[0], bases[1], cond))
