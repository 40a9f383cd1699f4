"""The one attribute table of the operators, and ``compute_op``, which builds an op's te
computation from its Relay name and attributes.

The op names, input orders and attribute names are those of docs/graph-ops.md. Every op has
one entry here with its attributes and Relay's defaults (:func:`op_attr_defaults`) and its
compute; the graph layer (``tensorir.graph.shapes``) adds the shape rule and fusion pattern to
the same entry and validates attributes with the same :func:`op_attrs`. An unknown op, an
unknown attribute, a missing required attribute or the wrong number of inputs raises an
:class:`OpAttrError` that names the op and says what is supported.

Chaining several ops into one ComputeDAG: stage names must be unique in a DAG, so pass the
same :class:`NameScope` to every call (``compute_op(op, ins, attrs, name_scope=scope)``); a
second ``T_add`` then becomes ``T_add_1``. ``scope.placeholder(shape)`` names inputs
``placeholder``, ``placeholder_1``, ... the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from ..tensor import Tensor, TensorError

# Import functions, not submodules: the package re-exports functions named like their modules
# (``ops.dense``, ``ops.pool``, ``ops.softmax``), which shadow the module attributes.
from . import broadcast, elemwise, transform, winograd
from ._util import NameScope
from .conv2d import conv2d
from .conv3d import conv3d
from .dense import batch_matmul, dense
from .pool import adaptive_pool, global_pool, pool
from .softmax import softmax

__all__ = [
    "REQUIRED",
    "SUPPORTED_OPS",
    "OpAttrError",
    "compute_op",
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
class _OpDef:
    arity: int | None  # None: any number (>= 1) of inputs
    attrs: dict = field(default_factory=dict)
    build: Callable | None = None


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

    def build(ins, a):
        if len(a["layout"]) != nsp + 2:
            raise TensorError(f"{op}: attribute 'layout' = {a['layout']!r} is not {nsp}-D")
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


def _unary(f):
    return _OpDef(1, {}, lambda ins, a: f(ins[0]))


def _binary(f):
    return _OpDef(2, {}, lambda ins, a: f(ins[0], ins[1]))


_OPS: dict[str, _OpDef] = {
    "nn.conv2d": _OpDef(2, _CONV2D, _conv2d),
    "nn.contrib_conv2d_winograd_without_weight_transform": _OpDef(
        2,
        {
            "tile_size": None,
            "strides": (1, 1),
            "padding": (0, 0, 0, 0),
            "dilation": (1, 1),
            "channels": None,
            "kernel_size": (3, 3),
            "data_layout": "NHWC",
            "out_dtype": "",
        },
        _winograd,
    ),
    "nn.contrib_conv2d_winograd_weight_transform": _OpDef(
        1,
        {"tile_size": REQUIRED},
        lambda ins, a: winograd.winograd_weight_transform(ins[0], a["tile_size"]),
    ),
    "nn.conv3d": _OpDef(
        2,
        {
            "strides": (1, 1, 1),
            "padding": (0,) * 6,
            "dilation": (1, 1, 1),
            "groups": 1,
            "channels": None,
            "kernel_size": None,
            "data_layout": "NCDHW",
            "kernel_layout": _default_kernel_layout,
            "out_dtype": "",
        },
        lambda ins, a: conv3d(
            ins[0],
            ins[1],
            a["strides"],
            a["padding"],
            a["dilation"],
            a["groups"],
            a["data_layout"],
            a["kernel_layout"],
            a["out_dtype"],
        ),
    ),
    "nn.dense": _OpDef(
        2,
        {"units": None, "out_dtype": ""},
        lambda ins, a: dense(ins[0], ins[1], a["units"], a["out_dtype"]),
    ),
    "nn.batch_matmul": _OpDef(
        2,
        {"out_dtype": "", "transpose_b": True},
        lambda ins, a: batch_matmul(ins[0], ins[1], a["out_dtype"], a["transpose_b"]),
    ),
    "nn.bias_add": _OpDef(
        2, {"axis": 1}, lambda ins, a: broadcast.bias_add(ins[0], ins[1], a["axis"])
    ),
    "nn.batch_norm": _OpDef(
        5,
        {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True},
        lambda ins, a: broadcast.batch_norm(*ins, a["axis"], a["epsilon"], a["center"], a["scale"]),
    ),
    "nn.relu": _unary(elemwise.relu),
    "sigmoid": _unary(elemwise.sigmoid),
    "tanh": _unary(elemwise.tanh),
    "exp": _unary(elemwise.exp),
    "sqrt": _unary(elemwise.sqrt),
    "negative": _unary(elemwise.negative),
    "clip": _OpDef(
        1,
        {"a_min": REQUIRED, "a_max": REQUIRED},
        lambda ins, a: elemwise.clip(ins[0], a["a_min"], a["a_max"]),
    ),
    "add": _binary(broadcast.add),
    "subtract": _binary(broadcast.subtract),
    "multiply": _binary(broadcast.multiply),
    "divide": _binary(broadcast.divide),
    "maximum": _binary(broadcast.maximum),
    "minimum": _binary(broadcast.minimum),
    "nn.max_pool2d": _OpDef(1, _POOL2D, _pool("max", 2)),
    "nn.avg_pool2d": _OpDef(1, {**_POOL2D, "count_include_pad": False}, _pool("avg", 2)),
    "nn.max_pool3d": _OpDef(1, _POOL3D, _pool("max", 3)),
    "nn.avg_pool3d": _OpDef(1, {**_POOL3D, "count_include_pad": False}, _pool("avg", 3)),
    "nn.global_avg_pool2d": _OpDef(
        1, {"layout": "NCHW"}, lambda ins, a: global_pool(ins[0], "avg", a["layout"])
    ),
    "nn.global_max_pool2d": _OpDef(
        1, {"layout": "NCHW"}, lambda ins, a: global_pool(ins[0], "max", a["layout"])
    ),
    "nn.adaptive_avg_pool2d": _OpDef(1, {"output_size": None, "layout": "NCHW"}, _adaptive_avg),
    "nn.softmax": _OpDef(1, {"axis": -1}, lambda ins, a: softmax(ins[0], a["axis"])),
    "concatenate": _OpDef(None, {"axis": 0}, lambda ins, a: transform.concatenate(ins, a["axis"])),
    "nn.pad": _OpDef(
        1,
        {"pad_width": REQUIRED, "pad_value": 0.0},
        lambda ins, a: transform.pad(ins[0], a["pad_width"], a["pad_value"]),
    ),
    "reshape": _OpDef(
        1, {"newshape": REQUIRED}, lambda ins, a: transform.reshape(ins[0], a["newshape"])
    ),
    "nn.batch_flatten": _unary(transform.batch_flatten),
    "transpose": _OpDef(1, {"axes": None}, lambda ins, a: transform.transpose(ins[0], a["axes"])),
    "squeeze": _OpDef(1, {"axis": None}, lambda ins, a: transform.squeeze(ins[0], a["axis"])),
    "layout_transform": _OpDef(
        1,
        {"src_layout": REQUIRED, "dst_layout": REQUIRED},
        lambda ins, a: transform.layout_transform(ins[0], a["src_layout"], a["dst_layout"]),
    ),
    "cast": _OpDef(1, {"dtype": REQUIRED}, lambda ins, a: elemwise.cast(ins[0], a["dtype"])),
}

SUPPORTED_OPS: tuple[str, ...] = tuple(sorted(_OPS))


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


def _spec(op: str) -> _OpDef:
    spec = _OPS.get(op)
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
    if spec.arity is None and not inputs or spec.arity is not None and len(inputs) != spec.arity:
        want = "at least 1" if spec.arity is None else str(spec.arity)
        raise OpAttrError(f"{op}: takes {want} input(s), got {len(inputs)}")
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TensorError(f"{op}: inputs must be tensors, got {type(t).__name__}")
    full = op_attrs(op, attrs)
    if name_scope is None:
        out = spec.build(inputs, full)
    else:
        with name_scope:
            out = spec.build(inputs, full)
    _check_conv_attrs(op, inputs, full, out)
    return out


def _check_conv_attrs(op: str, inputs, a: dict, out: Tensor) -> None:
    """Relay's informational conv attributes (channels, kernel_size) must match the shapes."""
    if "channels" not in a:
        return
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
