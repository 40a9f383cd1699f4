"""Byte dot products in loop IR: which reduction loops the integer dot-product instructions run.

Target-independent pattern matching shared by the backends that emit such instructions: x86's
``vpdpbusd`` (:mod:`codegen.llvm_dot`) and CUDA's ``__dp4a`` (:mod:`codegen.cuda`). A loop

    for k in range(K):
        C[c] = C[c] + int32(A[a + k]) * int32(B[b + k])      # A, B int8/uint8, c free of k

is a dot product of two byte runs, each contiguous in ``k``. Integer addition is associative
(mod 2**32, wrapping as the scalar loop does), so summing the products four (or 64) at a time
gives the scalar loop's result bit for bit. Each backend adds its own conditions (operand
signedness, extent, alignment).
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorir.arith import linear_form
from tensorir.expr import Binary, Cast, Expr, Var
from tensorir.loops import Buffer, For, Load, Store

from .llvm_vector import depends_on, stride

__all__ = [
    "BYTE_DTYPES", "ByteDot", "accumulated_products", "match_byte_dot", "run_starts_aligned",
]  # fmt: skip

BYTE_DTYPES = ("int8", "uint8")


@dataclass(frozen=True)
class ByteDot:
    """A matched reduction loop: ``acc[acc_index] += sum_k int32(a) * int32(b)``.

    ``a`` and ``b`` are the byte loads (int8 or uint8) in the product's order, both with
    stride 1 in the loop variable.
    """

    acc: Buffer
    acc_index: Expr
    a: Load
    b: Load


def _widened_byte_load(e: Expr) -> Load | None:
    if isinstance(e, Cast) and e.dtype == "int32" and isinstance(e.value, Load):
        return e.value if e.value.buffer.dtype in BYTE_DTYPES else None
    return None


def accumulated_products(st: Store) -> list[Binary]:
    """The int32 products ``p`` of an accumulating store ``C[c] = C[c] + p`` (either operand
    order of the ``+``): none, one, or two when both sides are products."""
    v = st.value
    if st.buffer.dtype != "int32" or not (
        isinstance(v, Binary) and v.op == "+" and v.dtype == "int32"
    ):
        return []
    return [
        prod
        for acc, prod in ((v.a, v.b), (v.b, v.a))
        if isinstance(acc, Load) and acc.buffer is st.buffer and acc.index == st.index
        and isinstance(prod, Binary) and prod.op == "*" and prod.dtype == "int32"
    ]  # fmt: skip


def match_byte_dot(s: For, kinds: tuple[str, ...] = ("serial",)) -> ByteDot | None:
    """The byte dot product of loop ``s`` as the module docstring shows it, or None.

    Parameters
    ----------
    s : For
        The candidate reduction loop; its body must be the one accumulating store.
    kinds : tuple of str
        Loop kinds the caller can replace (``"serial"``, ``"unrolled"``).
    """
    if s.kind not in kinds or not isinstance(s.body, Store):
        return None
    st = s.body
    if st.buffer.dtype != "int32" or depends_on(st.index, s.var):
        return None
    for prod in accumulated_products(st):
        a, b = _widened_byte_load(prod.a), _widened_byte_load(prod.b)
        if a is None or b is None:
            continue
        if stride(a.index, s.var) == 1 and stride(b.index, s.var) == 1:
            return ByteDot(st.buffer, st.index, a, b)
    return None


def run_starts_aligned(index: Expr, var: Var, multiple: int) -> bool:
    """Whether ``index`` (stride 1 in ``var``) is a multiple of ``multiple`` whenever ``var``
    is: every other term's coefficient and the constant are multiples of it.

    A proof over the index's linear form, true for every value of the other variables; an
    atom it cannot see into (``floordiv(i, 3)``) counts only through its coefficient.
    """
    form = linear_form(index)
    if form is None:
        return False
    terms, const = form
    if const % multiple:
        return False
    for atom, coef in terms.items():
        if atom is var:
            if coef != 1:
                return False
        elif depends_on(atom, var) or coef % multiple:
            return False
    return True
