"""Which stages the CPU sketches tile for x86's integer dot product (``vpdpbusd``).

A stage computing ``out[.., o] = sum_k int32(X[.., k]) * int32(W[.., k, .., o])`` with one
operand uint8 and the other int8 (a quantized conv2d in NHWC, a dense layer) runs fastest on a
VNNI CPU in the *vertical* form of :mod:`codegen.llvm_dot`: the two innermost loops are the
output axis ``o`` split by the vector's int32 lanes (vectorized: one accumulator per output)
and the reduction axis ``k`` split by 4 (the bytes one vpdpbusd lane sums). For that,

- ``o`` is the op's last axis (the accumulators are contiguous in it) and only the other
  operand ``W`` reads it (``X`` is the same for every lane: broadcast);
- ``k`` is ``X``'s last index, the bare axis (its 4 bytes are contiguous), a reduce axis
  that ``W`` reads too;
- the extents are multiples of the lanes and of 4 (the tiles divide them exactly).

The weight ``W`` is read as ``[.., o lanes][k 4]``, which is what the layout rewrite of the
network's constant weights produces from that loop order (one vector load per vpdpbusd).
"""

from __future__ import annotations

from tensorir.expr import Binary, Cast, Reduce, TensorRead, Var, walk

__all__ = ["DOT_GROUP", "dot_lanes", "int8_dot_axes"]

DOT_GROUP = 4  # reduction steps per vpdpbusd lane (codegen.llvm_dot.DOT_GROUP)


def dot_lanes(target) -> int | None:
    """int32 lanes of the widest vpdpbusd the code of ``target`` may use (16 with AVX-512
    VNNI, 8 with AVX-VNNI), or None: the features are the host's (or a cross target's
    ``-mattr``), as the code generator sees them."""
    from codegen.llvm_dot import dot_product_width
    from codegen.target import Target

    from ..kernel import cpu_features

    target = Target(target)
    if not target.backend.on_host:  # vpdpbusd is a CPU instruction
        return None
    width = dot_product_width(cpu_features(target))
    return None if width is None else width // 32


def _byte_read(e) -> TensorRead | None:
    if isinstance(e, Cast) and e.dtype == "int32" and isinstance(e.value, TensorRead):
        return e.value if e.value.dtype in ("int8", "uint8") else None
    return None


def _vars(e) -> set:
    return {n for n in walk(e) if isinstance(n, Var)}


def int8_dot_axes(op, lanes: int) -> tuple[str, str] | None:
    """``(output axis, reduce axis)`` names of ``op`` to split by ``lanes`` and by 4 for the
    vertical vpdpbusd form (module docstring), or None when ``op`` is not such a stage."""
    body = getattr(op, "body", None)
    if not (isinstance(body, Reduce) and body.combiner == "sum" and body.dtype == "int32"):
        return None
    if body.condition is not None or not op.axes:
        return None
    prod = body.source
    if not (isinstance(prod, Binary) and prod.op == "*"):
        return None
    reads = _byte_read(prod.a), _byte_read(prod.b)
    if None in reads or {r.dtype for r in reads} != {"uint8", "int8"}:
        return None
    lane_axis = op.axes[-1]
    if lane_axis.extent % lanes:
        return None
    for x, w in (reads, reads[::-1]):
        if lane_axis.var in set().union(*map(_vars, x.indices)):
            continue  # the broadcast operand must be the same for every lane
        if lane_axis.var not in set().union(*map(_vars, w.indices)):
            continue
        k = x.indices[-1]
        red = next((ax for ax in body.axes if ax.var is k), None)
        if red is None or red.extent % DOT_GROUP:
            continue
        if k not in set().union(*map(_vars, w.indices)):
            continue
        return lane_axis.var.name, red.var.name
    return None
