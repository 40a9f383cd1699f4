"""The operator table's element-wise and reduction entries: unary math, broadcasting
arithmetic, comparisons and logic, where, cast, the reductions and cumsum (assembled into
:data:`tensorir.ops.registry.OPS`)."""

from __future__ import annotations

import numpy as np

from . import broadcast, elemwise, reduce
from . import reference as ref
from . import shape_rules as rules
from .op_entry import REQUIRED, OpEntry, binary_entry, predicate_entry, unary_entry

ENTRIES = (
    unary_entry("nn.relu", elemwise.relu, ref.relu),
    unary_entry("sigmoid", elemwise.sigmoid, ref.sigmoid),
    unary_entry("tanh", elemwise.tanh, np.tanh),
    unary_entry("exp", elemwise.exp, np.exp),
    unary_entry("sqrt", elemwise.sqrt, np.sqrt),
    unary_entry("floor", elemwise.floor, np.floor),
    unary_entry("negative", elemwise.negative, np.negative),
    unary_entry(
        "clip",
        lambda ins, a: elemwise.clip(ins[0], a["a_min"], a["a_max"]),
        ref.clip_ref,
        {"a_min": REQUIRED, "a_max": REQUIRED},
    ),
    binary_entry("add", broadcast.add, np.add),
    binary_entry("subtract", broadcast.subtract, np.subtract),
    binary_entry("multiply", broadcast.multiply, np.multiply),
    binary_entry("divide", broadcast.divide, np.divide),
    binary_entry("right_shift", broadcast.right_shift, np.right_shift),
    binary_entry("left_shift", broadcast.left_shift, np.left_shift),
    binary_entry("maximum", broadcast.maximum, np.maximum),
    binary_entry("minimum", broadcast.minimum, np.minimum),
    unary_entry(
        "cast",
        lambda ins, a: elemwise.cast(ins[0], a["dtype"]),
        ref.cast_ref,
        {"dtype": REQUIRED},
        rules.cast_rule,
    ),
    # --- ONNX import: reductions, logic, math (issue 26) ---
    unary_entry("erf", elemwise.erf, ref.erf, rule=rules.float_unary_rule),
    unary_entry("log", elemwise.log, np.log, rule=rules.float_unary_rule),
    unary_entry("abs", elemwise.abs, np.abs),
    unary_entry("isnan", elemwise.isnan, np.isnan, rule=rules.predicate_rule(True)),
    unary_entry("isinf", elemwise.isinf, np.isinf, rule=rules.predicate_rule(True)),
    unary_entry(
        "logical_not", elemwise.logical_not, np.logical_not, rule=rules.predicate_rule(False)
    ),
    binary_entry("power", broadcast.power, np.power),
    predicate_entry("equal", broadcast.equal, ref.binary_ref(np.equal)),
    predicate_entry("not_equal", broadcast.not_equal, ref.binary_ref(np.not_equal)),
    predicate_entry("less", broadcast.less, ref.binary_ref(np.less)),
    predicate_entry("less_equal", broadcast.less_equal, ref.binary_ref(np.less_equal)),
    predicate_entry("greater", broadcast.greater, ref.binary_ref(np.greater)),
    predicate_entry("greater_equal", broadcast.greater_equal, ref.binary_ref(np.greater_equal)),
    predicate_entry("logical_and", broadcast.logical_and, ref.logical_ref(np.logical_and)),
    predicate_entry("logical_or", broadcast.logical_or, ref.logical_ref(np.logical_or)),
    OpEntry(
        "where",
        ("condition", "x", "y"),
        {},
        rules.BROADCAST,
        rules.where_rule,
        lambda ins, a: broadcast.where(*ins),
        ref.where_ref,
    ),
    *(
        OpEntry(
            kind,
            ("data",),
            {"axis": None, "keepdims": False, "exclude": False},
            rules.COMM_REDUCE,
            rules.reduce_rule,
            lambda ins, a, k=kind: reduce.reduce(ins[0], k, a["axis"], a["keepdims"], a["exclude"]),
            ref.reduce_ref(f),
            rules.fix_reduce,
        )
        for kind, f in (("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min))
    ),
    unary_entry(
        "cumsum",
        lambda ins, a: reduce.cumsum(ins[0], a["axis"], a["exclusive"], a["reverse"]),
        ref.cumsum_ref,
        {"axis": 0, "exclusive": False, "reverse": False},
        rules.axis_unary_rule,
        rules.OPAQUE,
    ),
)
