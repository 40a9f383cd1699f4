"""The operator table: one :class:`OpEntry` per op, and ``compute_op``, which builds an op's
te computation from its Relay name and attributes.

The op names, input orders and attribute names are those of docs/graph-ops.md. Every op has
one entry here (as in Relay's op registry) holding its inputs, its attributes with Relay's
defaults, its fusion pattern, its shape rule (``tensorir.ops.shape_rules``), its te compute and
its numpy reference (``tensorir.ops.reference``). The graph layer (``tensorir.graph.shapes``,
``make_call``, ``evaluate``, the fusion and layout passes) looks ops up in the same table and
validates attributes with the same :meth:`OpEntry.normalize` as ``compute_op``. An unknown op,
an unknown attribute, a missing required attribute or the wrong number of inputs raises an
:class:`OpAttrError` that names the op and says what is supported.

Chaining several ops into one ComputeDAG: stage names must be unique in a DAG, so pass the
same :class:`NameScope` to every call (``compute_op(op, ins, attrs, name_scope=scope)``); a
second ``T_add`` then becomes ``T_add_1``. ``scope.placeholder(shape)`` names inputs
``placeholder``, ``placeholder_1``, ... the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from ..tensor import Tensor, TensorError

# Import functions, not submodules: the package re-exports functions named like their modules
# (``ops.dense``, ``ops.pool``, ``ops.softmax``), which shadow the module attributes.
from . import (
    broadcast,
    elemwise,
    indexing,
    nn_rules,
    packed_layout,
    reduce,
    slicing,
    transform,
    winograd,
)
from . import nn_reference as nn_ref
from . import reference as ref
from . import shape_rules as rules
from ._util import NameScope
from .conv2d import conv2d
from .conv2d_transpose import conv2d_transpose
from .conv3d import conv3d
from .dense import batch_matmul, dense
from .norm import group_norm
from .pool import adaptive_pool, global_pool, pool
from .resize import resize2d
from .softmax import softmax

__all__ = [
    "OPS",
    "REQUIRED",
    "OpEntry",
    "SUPPORTED_OPS",
    "OpAttrError",
    "compute_op",
    "get_entry",
    "op_arity",
    "op_attr_defaults",
    "op_attrs",
]

REQUIRED = object()  # marks an attribute without a default


class OpAttrError(TensorError, TypeError):
    """An op is called with an unknown or missing attribute, or the wrong number of inputs.

    The one error of attribute validation, for ``compute_op`` and the graph's ``make_call``
    alike; it is a :class:`TensorError` (a ValueError) and, as Python does for bad
    arguments, a TypeError.
    """


_KERNEL_LAYOUTS = {"NCHW": "OIHW", "NHWC": "HWIO", "NCDHW": "OIDHW", "NDHWC": "DHWIO"}


def _default_kernel_layout(attrs: dict) -> str:
    # Relay's default kernel layout follows the data layout (OIHW for NCHW, HWIO for NHWC).
    return _KERNEL_LAYOUTS.get(attrs["data_layout"], "")


@dataclass(frozen=True)
class OpEntry:
    """Everything the project knows about one operator, in one place (Relay's op registry).

    Attributes
    ----------
    name : str
        The Relay op name (docs/graph-ops.md).
    inputs : tuple of str
        The input names in Relay's order; ``("*data",)`` means any number, at least one.
    attrs : mapping
        Attribute name -> Relay default (:data:`REQUIRED`: no default; a callable: follows
        from the other attributes).
    pattern : int
        Relay's fusion pattern (``tensorir.ops.shape_rules.ELEMWISE`` ... ``OPAQUE``).
    shape_rule : callable
        ``(shapes, dtypes, attrs) -> (shape, dtype)`` on plain shapes; may complete
        attributes that follow from the shapes (conv's ``channels``, dense's ``units``).
    compute : callable
        ``(input tensors, attrs) -> Tensor``: the te computation (``compute_op``).
    reference : callable
        ``(attrs, out_shape, *arrays) -> array``: the numpy implementation
        (``tensorir.ops.reference``), the ground truth compiled code is checked against.
    fix : callable, optional
        Canonicalises attribute values (int padding -> 4-tuple, ...).
    """

    name: str
    inputs: tuple[str, ...]
    attrs: Mapping
    pattern: int
    shape_rule: Callable
    compute: Callable
    reference: Callable
    fix: Callable | None = None

    def __post_init__(self):
        object.__setattr__(self, "attrs", MappingProxyType(dict(self.attrs)))

    @property
    def variadic(self) -> bool:
        return self.inputs[:1] == ("*data",)

    @property
    def arity(self) -> int | None:
        """How many inputs the op takes (None: any number, at least one)."""
        return None if self.variadic else len(self.inputs)

    @property
    def defaults(self) -> Mapping:
        """The attribute defaults (the name the graph layer's OpDef used)."""
        return self.attrs

    @property
    def infer(self) -> Callable:
        """The shape rule (the name the graph layer's OpDef used)."""
        return self.shape_rule

    def input_names(self, nargs: int) -> list[str]:
        if self.variadic:
            return [f"data{i}" for i in range(nargs)]
        return list(self.inputs)

    def normalize(self, attrs: Mapping | None, nargs: int) -> dict:
        """Check the input count and attribute names, fill defaults, canonicalise values.

        The one attribute validation of ``compute_op`` and the graph's ``make_call``.

        Raises
        ------
        OpAttrError
            Wrong number of inputs, unknown attribute, missing required attribute or an
            attribute value of the wrong form (a layout the op does not take, ...).
        """
        if self.variadic:
            if nargs < 1:
                raise OpAttrError(f"{self.name}: takes at least 1 input(s), got {nargs}")
        elif nargs != len(self.inputs):
            raise OpAttrError(
                f"{self.name}: takes {len(self.inputs)} input(s) ({', '.join(self.inputs)}), "
                f"got {nargs}"
            )
        full = op_attrs(self.name, attrs)
        if self.fix is not None:
            try:
                full = self.fix(full)
            except TypeError as e:  # the canonicalisers do not know the op's name
                raise OpAttrError(f"{self.name}: {e}") from None
        return full


def _conv2d(ins, a):
    return conv2d(
        ins[0],
        ins[1],
        a["strides"],
        a["padding"],
        a["dilation"],
        a["groups"],
        a["data_layout"],
        a["kernel_layout"],
        a["out_dtype"],
    )


def _winograd(ins, a):
    if a["data_layout"] != "NHWC":
        raise TensorError(
            "nn.contrib_conv2d_winograd_without_weight_transform: attribute "
            f"'data_layout' = {a['data_layout']!r} is not supported; use 'NHWC'"
        )
    if tuple(a["kernel_size"]) != (3, 3):
        raise TensorError(
            "nn.contrib_conv2d_winograd_without_weight_transform: attribute "
            f"'kernel_size' = {a['kernel_size']!r}; only (3, 3) is supported"
        )
    tile = a["tile_size"] if a["tile_size"] is not None else ins[1].shape[0] - 2
    return winograd.conv2d_winograd_nhwc_without_weight_transform(
        ins[0], ins[1], tile, a["padding"], a["strides"], a["dilation"], a["out_dtype"]
    )


def _pool(kind: str, nsp: int):
    op = f"nn.{kind}_pool{nsp}d"

    def build(ins, a):  # the entry's fix has checked the layout
        return pool(
            ins[0],
            kind,
            a["pool_size"],
            a["strides"],
            a["padding"],
            a["dilation"],
            a["layout"],
            a["ceil_mode"],
            a.get("count_include_pad", False),
            op,
        )

    return build


_CONV2D = {
    "strides": (1, 1),
    "padding": (0, 0, 0, 0),
    "dilation": (1, 1),
    "groups": 1,
    "channels": None,
    "kernel_size": None,
    "data_layout": "NCHW",
    "kernel_layout": _default_kernel_layout,
    "out_dtype": "",
}
_POOL2D = {
    "pool_size": REQUIRED,
    "strides": (1, 1),
    "padding": (0, 0, 0, 0),
    "dilation": (1, 1),
    "layout": "NCHW",
    "ceil_mode": False,
}
_POOL3D = {
    "pool_size": REQUIRED,
    "strides": (1, 1, 1),
    "padding": (0,) * 6,
    "dilation": (1, 1, 1),
    "layout": "NCDHW",
    "ceil_mode": False,
}


def _adaptive_avg(ins, a):
    # Relay's output_size None (or a None entry) keeps that input dimension.
    data, layout, size = ins[0], a["layout"], a["output_size"]
    spatial = tuple(data.shape[layout.index(c)] for c in "HW" if c in layout)
    if size is None:
        size = spatial
    elif not isinstance(size, int) and len(size) == len(spatial):
        size = tuple(s or d for s, d in zip(size, spatial, strict=True))
    return adaptive_pool(data, size, "avg", layout)


_CONV2D_LAYOUTS = {"NCHW": "OIHW", "NHWC": "HWIO"}
_CONV3D_LAYOUTS = {"NCDHW": "OIDHW", "NDHWC": "DHWIO"}
_WINOGRAD = {
    "tile_size": None,
    "strides": (1, 1),
    "padding": (0, 0, 0, 0),
    "dilation": (1, 1),
    "channels": None,
    "kernel_size": (3, 3),
    "data_layout": "NHWC",
    "out_dtype": "",
}
_CONV3D = {
    "strides": (1, 1, 1),
    "padding": (0,) * 6,
    "dilation": (1, 1, 1),
    "groups": 1,
    "channels": None,
    "kernel_size": None,
    "data_layout": "NCDHW",
    "kernel_layout": _default_kernel_layout,
    "out_dtype": "",
}


def _conv3d(ins, a):
    return conv3d(
        ins[0],
        ins[1],
        a["strides"],
        a["padding"],
        a["dilation"],
        a["groups"],
        a["data_layout"],
        a["kernel_layout"],
        a["out_dtype"],
    )


def _unary(name, compute, reference, attrs=None, rule=rules.unary_rule, pattern=rules.ELEMWISE):
    if attrs is None:  # attribute-free: the compute and reference take the input alone
        compute, reference = _on_first(compute), ref.unary_ref(reference)
    return OpEntry(name, ("data",), attrs or {}, pattern, rule, compute, reference)


def _on_first(f):
    return lambda ins, a: f(ins[0])


def _binary(name, compute, reference):
    return OpEntry(
        name,
        ("lhs", "rhs"),
        {},
        rules.BROADCAST,
        rules.binary_rule,
        lambda ins, a: compute(ins[0], ins[1]),
        ref.binary_ref(reference),
    )


def _predicate(name, compute, reference):
    """A broadcasting two-input op with a bool result (comparisons, logical and/or)."""
    rule = rules.logical_rule if name.startswith("logical") else rules.compare_rule
    return OpEntry(
        name,
        ("lhs", "rhs"),
        {},
        rules.BROADCAST,
        rule,
        lambda ins, a: compute(ins[0], ins[1]),
        reference,
    )


def _pool_entry(kind, nsp, attrs, layouts):
    return OpEntry(
        f"nn.{kind}_pool{nsp}d",
        ("data",),
        attrs,
        rules.OUT_ELEMWISE_FUSABLE,
        rules.pool_nd_rule(nsp),
        _pool(kind, nsp),
        ref.pool_ref(kind),
        rules.fix_pool(nsp, layouts),
    )


def _global_pool_entry(kind):
    return OpEntry(
        f"nn.global_{kind}_pool2d",
        ("data",),
        {"layout": "NCHW"},
        rules.OUT_ELEMWISE_FUSABLE,
        rules.global_pool_rule,
        lambda ins, a: global_pool(ins[0], kind, a["layout"]),
        ref.global_pool_ref(np.mean if kind == "avg" else np.max),
        rules.check_layout(("NCHW", "NHWC")),
    )


_ENTRIES = (
    OpEntry(
        "nn.conv2d",
        ("data", "weight"),
        _CONV2D,
        rules.OUT_ELEMWISE_FUSABLE,
        # NCHW / NHWC, and VTA's packed NCHW1n16c (packed_layout.py wraps the plain rules)
        packed_layout.conv2d_rule(rules.conv_nd_rule(2)),
        packed_layout.conv2d_compute(_conv2d),
        packed_layout.conv2d_ref(ref.conv_ref),
        packed_layout.conv2d_fix(rules.fix_conv(2, _CONV2D_LAYOUTS)),
    ),
    OpEntry(
        "nn.conv3d",
        ("data", "weight"),
        _CONV3D,
        rules.OUT_ELEMWISE_FUSABLE,
        rules.conv_nd_rule(3),
        _conv3d,
        ref.conv_ref,
        rules.fix_conv(3, _CONV3D_LAYOUTS),
    ),
    OpEntry(
        "nn.contrib_conv2d_winograd_weight_transform",
        ("weight",),
        {"tile_size": REQUIRED},
        rules.OPAQUE,
        rules.winograd_weight_transform_rule,
        lambda ins, a: winograd.winograd_weight_transform(ins[0], a["tile_size"]),
        ref.winograd_weight_transform_ref,
    ),
    OpEntry(
        "nn.contrib_conv2d_winograd_without_weight_transform",
        ("data", "weight"),
        _WINOGRAD,
        rules.OUT_ELEMWISE_FUSABLE,
        rules.winograd_conv_rule,
        _winograd,
        ref.winograd_conv_ref,
        rules.fix_window(2, "kernel_size"),
    ),
    OpEntry(
        "nn.dense",
        ("data", "weight"),
        {"units": None, "out_dtype": ""},
        rules.OUT_ELEMWISE_FUSABLE,
        rules.dense_rule,
        lambda ins, a: dense(ins[0], ins[1], a["units"], a["out_dtype"]),
        ref.dense_ref,
    ),
    OpEntry(
        "nn.batch_matmul",
        ("x", "y"),
        {"out_dtype": "", "transpose_b": True},
        rules.OUT_ELEMWISE_FUSABLE,
        rules.batch_matmul_rule,
        lambda ins, a: batch_matmul(ins[0], ins[1], a["out_dtype"], a["transpose_b"]),
        ref.batch_matmul_ref,
    ),
    OpEntry(
        "nn.bias_add",
        ("data", "bias"),
        {"axis": 1},
        rules.BROADCAST,
        rules.bias_add_rule,
        lambda ins, a: broadcast.bias_add(ins[0], ins[1], a["axis"]),
        ref.bias_add_ref,
    ),
    OpEntry(
        "nn.batch_norm",
        ("data", "gamma", "beta", "moving_mean", "moving_var"),
        {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True},
        rules.OPAQUE,
        rules.batch_norm_rule,
        lambda ins, a: broadcast.batch_norm(*ins, a["axis"], a["epsilon"], a["center"], a["scale"]),
        ref.batch_norm_ref,
    ),
    _unary("nn.relu", elemwise.relu, ref.relu),
    _unary("sigmoid", elemwise.sigmoid, ref.sigmoid),
    _unary("tanh", elemwise.tanh, np.tanh),
    _unary("exp", elemwise.exp, np.exp),
    _unary("sqrt", elemwise.sqrt, np.sqrt),
    _unary("floor", elemwise.floor, np.floor),
    _unary("negative", elemwise.negative, np.negative),
    _unary(
        "clip",
        lambda ins, a: elemwise.clip(ins[0], a["a_min"], a["a_max"]),
        ref.clip_ref,
        {"a_min": REQUIRED, "a_max": REQUIRED},
    ),
    _binary("add", broadcast.add, np.add),
    _binary("subtract", broadcast.subtract, np.subtract),
    _binary("multiply", broadcast.multiply, np.multiply),
    _binary("divide", broadcast.divide, np.divide),
    _binary("right_shift", broadcast.right_shift, np.right_shift),
    _binary("left_shift", broadcast.left_shift, np.left_shift),
    _binary("maximum", broadcast.maximum, np.maximum),
    _binary("minimum", broadcast.minimum, np.minimum),
    _pool_entry("max", 2, _POOL2D, ("NCHW", "NHWC")),
    _pool_entry("avg", 2, {**_POOL2D, "count_include_pad": False}, ("NCHW", "NHWC")),
    _pool_entry("max", 3, _POOL3D, ("NCDHW", "NDHWC")),
    _pool_entry("avg", 3, {**_POOL3D, "count_include_pad": False}, ("NCDHW", "NDHWC")),
    _global_pool_entry("avg"),
    _global_pool_entry("max"),
    OpEntry(
        "nn.adaptive_avg_pool2d",
        ("data",),
        {"output_size": None, "layout": "NCHW"},
        rules.OUT_ELEMWISE_FUSABLE,
        rules.adaptive_pool_rule,
        _adaptive_avg,
        ref.adaptive_avg_pool2d_ref,
        rules.fix_adaptive,
    ),
    _unary(
        "nn.softmax",
        lambda ins, a: softmax(ins[0], a["axis"]),
        ref.softmax_ref,
        {"axis": -1},
        rules.softmax_rule,
        rules.OPAQUE,
    ),
    OpEntry(
        "concatenate",
        ("*data",),
        {"axis": 0},
        rules.INJECTIVE,
        rules.concatenate_rule,
        lambda ins, a: transform.concatenate(ins, a["axis"]),
        ref.concatenate_ref,
    ),
    _unary(
        "nn.pad",
        lambda ins, a: transform.pad(ins[0], a["pad_width"], a["pad_value"]),
        ref.pad_ref,
        {"pad_width": REQUIRED, "pad_value": 0.0},
        rules.pad_rule,
        rules.INJECTIVE,
    ),
    _unary(
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
        _on_first(transform.batch_flatten),
        ref.reshape_ref,
    ),
    _unary(
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
    _unary(
        "layout_transform",
        packed_layout.layout_transform_compute(
            lambda ins, a: transform.layout_transform(ins[0], a["src_layout"], a["dst_layout"])
        ),
        packed_layout.layout_transform_ref(ref.layout_transform_ref),
        {"src_layout": REQUIRED, "dst_layout": REQUIRED},
        packed_layout.layout_transform_rule(rules.layout_transform_rule),
        rules.INJECTIVE,
    ),
    _unary(
        "cast",
        lambda ins, a: elemwise.cast(ins[0], a["dtype"]),
        ref.cast_ref,
        {"dtype": REQUIRED},
        rules.cast_rule,
    ),
    # --- ONNX import: reductions, logic, math (issue 26) ---
    _unary("erf", elemwise.erf, ref.erf, rule=rules.float_unary_rule),
    _unary("log", elemwise.log, np.log, rule=rules.float_unary_rule),
    _unary("abs", elemwise.abs, np.abs),
    _unary("isnan", elemwise.isnan, np.isnan, rule=rules.predicate_rule(True)),
    _unary("isinf", elemwise.isinf, np.isinf, rule=rules.predicate_rule(True)),
    _unary("logical_not", elemwise.logical_not, np.logical_not, rule=rules.predicate_rule(False)),
    _binary("power", broadcast.power, np.power),
    _predicate("equal", broadcast.equal, ref.binary_ref(np.equal)),
    _predicate("not_equal", broadcast.not_equal, ref.binary_ref(np.not_equal)),
    _predicate("less", broadcast.less, ref.binary_ref(np.less)),
    _predicate("less_equal", broadcast.less_equal, ref.binary_ref(np.less_equal)),
    _predicate("greater", broadcast.greater, ref.binary_ref(np.greater)),
    _predicate("greater_equal", broadcast.greater_equal, ref.binary_ref(np.greater_equal)),
    _predicate("logical_and", broadcast.logical_and, ref.logical_ref(np.logical_and)),
    _predicate("logical_or", broadcast.logical_or, ref.logical_ref(np.logical_or)),
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
    OpEntry(
        "nn.layer_norm",
        ("data", "gamma", "beta"),
        {"axis": -1, "epsilon": 1e-5, "center": True, "scale": True},
        rules.OPAQUE,
        rules.layer_norm_rule,
        lambda ins, a: reduce.layer_norm(*ins, a["axis"], a["epsilon"], a["center"], a["scale"]),
        ref.layer_norm_ref,
    ),
    _unary(
        "cumsum",
        lambda ins, a: reduce.cumsum(ins[0], a["axis"], a["exclusive"], a["reverse"]),
        ref.cumsum_ref,
        {"axis": 0, "exclusive": False, "reverse": False},
        rules.axis_unary_rule,
        rules.OPAQUE,
    ),
    _unary(
        "strided_slice",
        lambda ins, a: slicing.strided_slice(ins[0], *rules.full_slice(ins[0].shape, a)),
        ref.strided_slice_ref,
        {"begin": REQUIRED, "end": REQUIRED, "strides": None, "axes": None},
        rules.strided_slice_rule,
        rules.INJECTIVE,
    ),
    _unary(
        "broadcast_to",
        lambda ins, a: slicing.broadcast_to(ins[0], a["shape"]),
        ref.broadcast_to_ref,
        {"shape": REQUIRED},
        rules.broadcast_to_rule,
        rules.BROADCAST,
    ),
    # INJECTIVE, not elemwise: the triangle is of the last two dims, so convert_layout must
    # not move it into channels-last as it does elementwise ops.
    _unary(
        "trilu",
        lambda ins, a: slicing.trilu(ins[0], a["k"], a["upper"]),
        ref.trilu_ref,
        {"k": 0, "upper": True},
        rules.trilu_rule,
        rules.INJECTIVE,
    ),
    # --- ONNX import: conv transpose, resize, norms (issue 26) ---
    OpEntry(
        "nn.conv2d_transpose",
        ("data", "weight"),
        {
            "strides": (1, 1),
            "padding": (0, 0, 0, 0),
            "output_padding": (0, 0),
            "dilation": (1, 1),
            "groups": 1,
            "channels": None,
            "kernel_size": None,
            "data_layout": "NCHW",
            "kernel_layout": "",
            "out_dtype": "",
        },
        rules.OUT_ELEMWISE_FUSABLE,
        nn_rules.conv2d_transpose_rule,
        lambda ins, a: conv2d_transpose(
            ins[0],
            ins[1],
            a["strides"],
            a["padding"],
            a["output_padding"],
            a["dilation"],
            a["groups"],
            a["data_layout"],
            a["kernel_layout"],
            a["out_dtype"],
        ),
        nn_ref.conv2d_transpose_ref,
        nn_rules.fix_conv2d_transpose,
    ),
    OpEntry(
        "nn.group_norm",
        ("data", "gamma", "beta"),
        {"num_groups": REQUIRED, "axis": 1, "epsilon": 1e-5, "center": True, "scale": True},
        rules.OPAQUE,
        nn_rules.group_norm_rule,
        lambda ins, a: group_norm(
            *ins, a["num_groups"], a["axis"], a["epsilon"], a["center"], a["scale"]
        ),
        nn_ref.group_norm_ref,
    ),
    OpEntry(
        "nn.instance_norm",
        ("data", "gamma", "beta"),
        {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True},
        rules.OPAQUE,
        nn_rules.instance_norm_rule,
        lambda ins, a: group_norm(
            *ins,
            ins[0].shape[a["axis"] % ins[0].ndim],
            a["axis"],
            a["epsilon"],
            a["center"],
            a["scale"],
            op="nn.instance_norm",
        ),
        nn_ref.instance_norm_ref,
    ),
    OpEntry(
        "image.resize2d",
        ("data",),
        {
            "size": REQUIRED,
            "layout": "NCHW",
            "method": "linear",
            "coordinate_transformation_mode": "half_pixel",
            "rounding_method": "",
            "cubic_alpha": -0.5,
            "scales": None,
        },
        rules.INJECTIVE,
        nn_rules.resize2d_rule,
        lambda ins, a: resize2d(
            ins[0],
            a["size"],
            a["layout"],
            a["method"],
            a["coordinate_transformation_mode"],
            a["rounding_method"],
            a["cubic_alpha"],
            a["scales"],
        ),
        nn_ref.resize2d_ref,
        nn_rules.fix_resize2d,
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

OPS: Mapping[str, OpEntry] = MappingProxyType({e.name: e for e in _ENTRIES})
"""The operator table: Relay op name -> its one :class:`OpEntry` (read-only)."""

SUPPORTED_OPS: tuple[str, ...] = tuple(sorted(OPS))


def op_attrs(op: str, attrs: Mapping | None = None) -> dict:
    """``attrs`` completed with the op's defaults, after checking the names.

    Raises
    ------
    OpAttrError
        For an unknown op, an unknown attribute or a missing required attribute.
    """
    spec = _spec(op)
    attrs = dict(attrs or {})
    unknown = sorted(set(attrs) - set(spec.attrs))
    if unknown:
        raise OpAttrError(
            f"{op}: unknown attribute(s) {unknown}; {op} takes "
            f"{sorted(spec.attrs) or 'no attributes'}"
        )
    out = {}
    for name, default in spec.attrs.items():
        if name in attrs:
            out[name] = attrs[name]
        elif default is REQUIRED:
            raise OpAttrError(f"{op}: attribute {name!r} is required")
        else:
            out[name] = default
    for name, value in out.items():  # defaults that depend on other attributes
        if callable(value):
            out[name] = value(out)
    return out


def op_attr_defaults(op: str) -> Mapping:
    """``op``'s attribute names and Relay defaults (read-only; :data:`REQUIRED` marks the
    ones without a default, a callable one that follows from the others)."""
    return MappingProxyType(_spec(op).attrs)


def op_arity(op: str) -> int | None:
    """How many inputs ``op`` takes (None: any number, at least one)."""
    return _spec(op).arity


def get_entry(op: str) -> OpEntry:
    """The table entry of ``op`` (:class:`OpAttrError` listing the known ops otherwise)."""
    return _spec(op)


def _spec(op: str) -> OpEntry:
    spec = OPS.get(op)
    if spec is None:
        raise OpAttrError(f"unknown op {op!r}; supported ops are {list(SUPPORTED_OPS)}")
    return spec


def compute_op(
    op: str,
    inputs: Sequence[Tensor],
    attrs: Mapping | None = None,
    *,
    name_scope: NameScope | None = None,
) -> Tensor:
    """The output tensor of Relay op ``op`` applied to ``inputs``.

    Parameters
    ----------
    op : str
        A Relay op name from :data:`SUPPORTED_OPS` (the table of docs/graph-ops.md).
    inputs : sequence of Tensor
        The op's inputs in Relay's order (e.g. data, weight).
    attrs : mapping, optional
        Relay attribute names to plain Python values; missing ones take Relay's defaults.
    name_scope : NameScope, optional
        Uniquifies stage names across calls that build one DAG (``T_add``, ``T_add_1``...).
        Without it stages get topi's names, which repeat from call to call.

    Returns
    -------
    Tensor
        The op's output; its producers (padding, winograd stages...) hang off it.

    Raises
    ------
    TensorError
        Unknown op or attribute, missing required attribute, wrong input count, or attribute
        values / shapes the op does not support; the message names the op.
    """
    spec = _spec(op)
    inputs = list(inputs)
    full = spec.normalize(attrs, len(inputs))
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TensorError(f"{op}: inputs must be tensors, got {type(t).__name__}")
    if name_scope is None:
        out = spec.compute(inputs, full)
    else:
        with name_scope:
            out = spec.compute(inputs, full)
    _check_conv_attrs(op, inputs, full, out)
    return out


def _check_conv_attrs(op: str, inputs, a: dict, out: Tensor) -> None:
    """Relay's informational conv attributes (channels, kernel_size) must match the shapes."""
    if "channels" not in a or packed_layout.is_packed(a["data_layout"]):
        return  # a packed conv's rule checked them on the unpacked shapes
    layout = a["data_layout"]
    channels = out.shape[layout.index("C")]
    if a["channels"] is not None and int(a["channels"]) != channels:
        raise TensorError(
            f"{op}: attribute 'channels' = {a['channels']} but the output has {channels} channels"
        )
    if a["kernel_size"] is None or op.startswith("nn.contrib_conv2d_winograd"):
        return
    nsp = len(layout) - 2
    w = inputs[1].shape
    ks = w[2:] if layout.startswith("NC") else w[:nsp]
    if tuple(int(k) for k in a["kernel_size"]) != tuple(ks):
        raise TensorError(
            f"{op}: attribute 'kernel_size' = {a['kernel_size']!r} but the weight "
            f"{list(w)} has a {'x'.join(map(str, ks))} kernel"
        )
