"""The operator table's data-movement entries: concatenate, pad, reshape, flatten,
transpose, squeeze, layout_transform, slicing, broadcast_to, trilu, take and gather (assembled
into :data:`tensorir.ops.registry.OPS`)."""

from __future__ import annotations

from . import indexing, packed_layout, slicing, transform
from . import reference as ref
from . import shape_rules as rules
from .op_entry import REQUIRED, OpEntry, on_first, unary_entry

ENTRIES = (
    OpEntry(
        "concatenate",
        ("*data",),
        {"axis": 0},
        rules.INJECTIVE,
        rules.concatenate_rule,
        lambda ins, a: transform.concatenate(ins, a["axis"]),
        ref.concatenate_ref,
    ),
    unary_entry(
        "nn.pad",
        lambda ins, a: transform.pad(ins[0], a["pad_width"], a["pad_value"]),
        ref.pad_ref,
        {"pad_width": REQUIRED, "pad_value": 0.0},
        rules.pad_rule,
        rules.INJECTIVE,
    ),
    unary_entry(
        "reshape",
        lambda ins, a: transform.reshape(ins[0], a["newshape"]),
        ref.reshape_ref,
        {"newshape": REQUIRED},
        rules.reshape_rule,
        rules.INJECTIVE,
    ),
    OpEntry(
        "nn.batch_flatten",
        ("data",),
        {},
        rules.INJECTIVE,
        rules.batch_flatten_rule,
        on_first(transform.batch_flatten),
        ref.reshape_ref,
    ),
    unary_entry(
        "transpose",
        lambda ins, a: transform.transpose(ins[0], a["axes"]),
        ref.transpose_ref,
        {"axes": None},
        rules.transpose_rule,
        rules.INJECTIVE,
    ),
    OpEntry(
        "squeeze",
        ("data",),
        {"axis": None},
        rules.INJECTIVE,
        rules.squeeze_rule,
        lambda ins, a: transform.squeeze(ins[0], a["axis"]),
        ref.reshape_ref,
        rules.fix_squeeze,
    ),
    unary_entry(
        "layout_transform",
        packed_layout.layout_transform_compute(
            lambda ins, a: transform.layout_transform(ins[0], a["src_layout"], a["dst_layout"])
        ),
        packed_layout.layout_transform_ref(ref.layout_transform_ref),
        {"src_layout": REQUIRED, "dst_layout": REQUIRED},
        packed_layout.layout_transform_rule(rules.layout_transform_rule),
        rules.INJECTIVE,
    ),
    unary_entry(
        "strided_slice",
        lambda ins, a: slicing.strided_slice(ins[0], *rules.full_slice(ins[0].shape, a)),
        ref.strided_slice_ref,
        {"begin": REQUIRED, "end": REQUIRED, "strides": None, "axes": None},
        rules.strided_slice_rule,
        rules.INJECTIVE,
    ),
    unary_entry(
        "broadcast_to",
        lambda ins, a: slicing.broadcast_to(ins[0], a["shape"]),
        ref.broadcast_to_ref,
        {"shape": REQUIRED},
        rules.broadcast_to_rule,
        rules.BROADCAST,
    ),
    # INJECTIVE, not elemwise: the triangle is of the last two dims, so convert_layout must
    # not move it into channels-last as it does elementwise ops.
    unary_entry(
        "trilu",
        lambda ins, a: slicing.trilu(ins[0], a["k"], a["upper"]),
        ref.trilu_ref,
        {"k": 0, "upper": True},
        rules.trilu_rule,
        rules.INJECTIVE,
    ),
    # --- ONNX import: gather, einsum (issue 26) ---
    OpEntry(
        "take",
        ("data", "indices"),
        {"axis": 0, "mode": "clip"},
        rules.INJECTIVE,
        indexing.take_rule,
        lambda ins, a: indexing.take(ins[0], ins[1], a["axis"], a["mode"]),
        indexing.take_ref,
    ),
    OpEntry(
        "gather",
        ("data", "indices"),
        {"axis": 0, "mode": "fast"},
        rules.INJECTIVE,
        indexing.gather_rule,
        lambda ins, a: indexing.gather(ins[0], a["axis"], ins[1], a["mode"]),
        indexing.gather_ref,
    ),
)
