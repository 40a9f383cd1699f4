"""Shape rules and attribute canonicalisers of the operators, on plain shapes and dtypes.

Each op's entry in the one operator table (:mod:`tensorir.ops.registry`) names its shape rule
``rule(shapes, dtypes, attrs) -> (shape, dtype)`` and its canonicaliser ``fix(attrs) -> attrs``
from here. The rules know nothing of graph nodes or te tensors, so a frontend can ask them about
shapes it has not built yet. A rule raises :class:`ShapeError` with what it expected;
``tensorir.graph.ir.make_call`` adds the op and input names.
"""

from __future__ import annotations

import math

import numpy as np

from ..dtype import check_dtype

# Relay's OpPattern values (include/tvm/relay/op_attr_types.h).
ELEMWISE, BROADCAST, INJECTIVE, COMM_REDUCE, OUT_ELEMWISE_FUSABLE, TUPLE, OPAQUE = (
    0,
    1,
    2,
    3,
    4,
    7,
    8,
)


class ShapeError(ValueError):
    """The inputs of one op do not fit together (the message says what was expected)."""


# --- attribute canonicalisation ------------------------------------------------------------


def ntuple(value, n: int, what: str) -> tuple[int, ...]:
    """An int or a length-n sequence -> a tuple of n ints."""
    if isinstance(value, int | np.integer):
        return (int(value),) * n
    t = tuple(int(v) for v in value)
    if len(t) == 1:
        return t * n
    if len(t) != n:
        raise TypeError(f"{what} must be an int or {n} ints, got {value!r}")
    return t


def pad_tuple(value, ndim: int) -> tuple[int, ...]:
    """Relay's padding forms -> (before..., after...) for ``ndim`` spatial dims.

    An int pads every side; ``ndim`` values pad both sides of each dim; ``2*ndim`` values are
    (before per dim, then after per dim), i.e. (top, left, bottom, right) in 2-D.
    """
    if isinstance(value, int | np.integer):
        return (int(value),) * (2 * ndim)
    t = tuple(int(v) for v in value)
    if len(t) == 1:
        return t * (2 * ndim)
    if len(t) == ndim:
        return t + t
    if len(t) == 2 * ndim:
        return t
    raise TypeError(f"padding must be an int, {ndim} or {2 * ndim} ints, got {value!r}")


def fix_window(ndim: int, size_key: str | None):
    def fix(a):
        for k in ("strides", "dilation"):
            if k in a:
                a[k] = ntuple(a[k], ndim, k)
        a["padding"] = pad_tuple(a["padding"], ndim)
        if size_key and a.get(size_key) is not None:
            a[size_key] = ntuple(a[size_key], ndim, size_key)
        return a

    return fix


def fix_conv(ndim: int, layouts: dict[str, str]):
    window = fix_window(ndim, "kernel_size")

    def fix(a):
        a = window(a)
        if a["data_layout"] not in layouts:
            raise TypeError(f"data_layout must be one of {list(layouts)}, got {a['data_layout']!r}")
        if not a["kernel_layout"]:
            a["kernel_layout"] = layouts[a["data_layout"]]
        return a

    return fix


# --- shape rules -----------------------------------------------------------------------------


def _same_dtype(dtypes, what="inputs"):
    if len(set(dtypes)) > 1:
        raise ShapeError(f"{what} must have one dtype, got {list(dtypes)}")
    return dtypes[0]


def _ndim(shape, n, what):
    if len(shape) != n:
        raise ShapeError(f"{what} must be {n}-D, got shape {tuple(shape)}")


def window_out(size: int, k: int, s: int, d: int, before: int, after: int, ceil: bool) -> int:
    """Output length of a sliding window (Relay's Conv/Pool rel; ceil_mode rounds up)."""
    span = (k - 1) * d + 1
    total = size + before + after - span
    if total < 0:
        raise ShapeError(
            f"window {k} (dilation {d}) is larger than the padded input {size + before + after}"
        )
    return (total + (s - 1 if ceil else 0)) // s + 1


def conv_nd_rule(ndim: int):
    spatial = "DHW"[3 - ndim :]

    def infer(shapes, dtypes, a):
        data, weight = shapes
        _ndim(data, ndim + 2, "data")
        _ndim(weight, ndim + 2, "weight")
        dl, kl = a["data_layout"], a["kernel_layout"]
        if sorted(kl) != sorted(spatial + "OI"):
            raise ShapeError(f"kernel_layout {kl!r} is not a permutation of {spatial}OI")
        c_in = data[dl.index("C")]
        o, i = weight[kl.index("O")], weight[kl.index("I")]
        ks = tuple(weight[kl.index(c)] for c in spatial)
        g = a["groups"]
        if i * g != c_in or o % g:
            raise ShapeError(
                f"data has {c_in} channels and groups={g}, so the weight ({kl}) needs "
                f"I={c_in // g if c_in % g == 0 else '?'} and O divisible by {g}; "
                f"weight shape {tuple(weight)} has I={i}, O={o}"
            )
        if a["channels"] is not None and a["channels"] != o:
            raise ShapeError(f"channels={a['channels']} but the weight has O={o}")
        if a["kernel_size"] is not None and tuple(a["kernel_size"]) != ks:
            raise ShapeError(f"kernel_size={a['kernel_size']} but the weight's is {ks}")
        a["channels"], a["kernel_size"] = o, ks
        out = list(data)
        out[dl.index("C")] = o
        for j, c in enumerate(spatial):
            axis = dl.index(c)
            out[axis] = window_out(
                data[axis], ks[j], a["strides"][j], a["dilation"][j],
                a["padding"][j], a["padding"][j + ndim], False,
            )  # fmt: skip
        # With an out_dtype the operands are cast to it, so they may differ (uint8 x int8).
        return tuple(out), a["out_dtype"] or _same_dtype(dtypes, "data and weight")

    return infer


def _winograd_alpha(tile_size):
    if tile_size not in (2, 4):
        raise ShapeError(f"tile_size must be 2 or 4, got {tile_size}")
    return tile_size + 3 - 1


def winograd_weight_transform_rule(shapes, dtypes, a):
    (w,) = shapes
    _ndim(w, 4, "weight")
    if tuple(w[:2]) != (3, 3):
        raise ShapeError(f"weight must be HWIO with a 3x3 kernel, got shape {tuple(w)}")
    alpha = _winograd_alpha(a["tile_size"])
    return (alpha, alpha, w[2], w[3]), dtypes[0]


def winograd_conv_rule(shapes, dtypes, a):
    data, w = shapes
    _ndim(data, 4, "data (NHWC)")
    _ndim(w, 4, "transformed weight")
    if a["data_layout"] != "NHWC":
        raise ShapeError(f"only data_layout NHWC is supported, got {a['data_layout']!r}")
    if tuple(a["kernel_size"]) != (3, 3):
        raise ShapeError(f"kernel_size must be (3, 3), got {a['kernel_size']}")
    if tuple(a["strides"]) != (1, 1) or tuple(a["dilation"]) != (1, 1):
        raise ShapeError("winograd needs strides (1, 1) and dilation (1, 1)")
    if a["tile_size"] is None:  # as compute_op: the transformed weight is (alpha, alpha, ...)
        a["tile_size"] = w[0] - 2
    alpha = _winograd_alpha(a["tile_size"])
    if w[0] != alpha or w[1] != alpha or w[2] != data[3]:
        raise ShapeError(
            f"tile_size {a['tile_size']} and {data[3]} input channels need a transformed "
            f"weight ({alpha}, {alpha}, {data[3]}, CO), got {tuple(w)}"
        )
    if a["channels"] is not None and a["channels"] != w[3]:
        raise ShapeError(f"channels={a['channels']} but the weight has CO={w[3]}")
    a["channels"] = w[3]
    p = a["padding"]
    oh = window_out(data[1], 3, 1, 1, p[0], p[2], False)
    ow = window_out(data[2], 3, 1, 1, p[1], p[3], False)
    return (data[0], oh, ow, w[3]), a["out_dtype"] or _same_dtype(dtypes, "data and weight")


def dense_rule(shapes, dtypes, a):
    x, w = shapes
    _ndim(w, 2, "weight (units, K)")
    if len(x) < 1 or x[-1] != w[1]:
        raise ShapeError(f"data's last dim must equal the weight's K={w[1]}, data is {tuple(x)}")
    if a["units"] is not None and a["units"] != w[0]:
        raise ShapeError(f"units={a['units']} but the weight has {w[0]} rows")
    a["units"] = w[0]
    return tuple(x[:-1]) + (w[0],), a["out_dtype"] or _same_dtype(dtypes, "data and weight")


def batch_matmul_rule(shapes, dtypes, a):
    x, y = shapes
    y_form = "y (B, N, K)" if a["transpose_b"] else "y (B, K, N)"
    _ndim(x, 3, "x (B, M, K)")
    _ndim(y, 3, y_form)
    yk, yn = (y[2], y[1]) if a["transpose_b"] else (y[1], y[2])
    if x[2] != yk or not (x[0] == y[0] or 1 in (x[0], y[0])):
        raise ShapeError(f"x (B, M, K) and {y_form} do not match: {tuple(x)}, {tuple(y)}")
    return (max(x[0], y[0]), x[1], yn), a["out_dtype"] or _same_dtype(dtypes, "x and y")


def _axis(axis, ndim, what="axis"):
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{what} {axis} is out of range for a {ndim}-D input")
    return axis % ndim


def bias_add_rule(shapes, dtypes, a):
    x, b = shapes
    ax = _axis(a["axis"], len(x))
    if tuple(b) != (x[ax],):
        raise ShapeError(f"bias must have shape ({x[ax]},) (data's axis {a['axis']}), got {b}")
    return tuple(x), _same_dtype(dtypes)


def batch_norm_rule(shapes, dtypes, a):
    x = shapes[0]
    ax = _axis(a["axis"], len(x))
    for name, s in zip(("gamma", "beta", "moving_mean", "moving_var"), shapes[1:]):
        if tuple(s) != (x[ax],):
            raise ShapeError(
                f"{name} must have shape ({x[ax]},) (data's axis {a['axis']}), got {tuple(s)}"
            )
    return tuple(x), _same_dtype(dtypes)


def unary_rule(shapes, dtypes, a):
    return tuple(shapes[0]), dtypes[0]


def broadcast_shapes(a, b) -> tuple[int, ...]:
    """Numpy broadcasting of two shapes (ShapeError if they do not broadcast)."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise ShapeError(f"shapes {tuple(a)} and {tuple(b)} do not broadcast")
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(reversed(out))


def binary_rule(shapes, dtypes, a):
    return broadcast_shapes(*shapes), _same_dtype(dtypes, "lhs and rhs")


def pool_nd_rule(ndim: int):
    spatial = "DHW"[3 - ndim :]

    def infer(shapes, dtypes, a):
        x = shapes[0]
        _ndim(x, ndim + 2, "data")
        layout = a["layout"]
        out = list(x)
        for j, c in enumerate(spatial):
            axis = layout.index(c)
            out[axis] = window_out(
                x[axis], a["pool_size"][j], a["strides"][j], a["dilation"][j],
                a["padding"][j], a["padding"][j + ndim], a["ceil_mode"],
            )  # fmt: skip
        return tuple(out), dtypes[0]

    return infer


def check_layout(valid):
    def fix(a):
        if a["layout"] not in valid:
            raise TypeError(f"layout must be one of {list(valid)}, got {a['layout']!r}")
        return a

    return fix


def global_pool_rule(shapes, dtypes, a):
    x = shapes[0]
    _ndim(x, 4, "data")
    out = list(x)
    out[a["layout"].index("H")] = 1
    out[a["layout"].index("W")] = 1
    return tuple(out), dtypes[0]


def adaptive_pool_rule(shapes, dtypes, a):
    x = shapes[0]
    _ndim(x, 4, "data")
    out = list(x)
    hi, wi = a["layout"].index("H"), a["layout"].index("W")
    size = a["output_size"]
    if size is not None:
        out[hi], out[wi] = size[0] or x[hi], size[1] or x[wi]
    return tuple(out), dtypes[0]


def fix_adaptive(a):
    a = check_layout(("NCHW", "NHWC"))(a)
    size = a["output_size"]
    if size is None or isinstance(size, int | np.integer):
        a["output_size"] = size if size is None else (int(size),) * 2
        return a
    # Relay: a None entry keeps that input dimension (adaptive_pool_rule fills it in).
    size = tuple(None if v is None else int(v) for v in size)
    if len(size) not in (1, 2):
        raise TypeError(f"output_size must be an int or 2 ints (or None), got {a['output_size']!r}")
    a["output_size"] = size * (3 - len(size))
    return a


def softmax_rule(shapes, dtypes, a):
    _axis(a["axis"], len(shapes[0]))
    return tuple(shapes[0]), dtypes[0]


def concatenate_rule(shapes, dtypes, a):
    first = shapes[0]
    ax = _axis(a["axis"], len(first))
    for s in shapes[1:]:
        if len(s) != len(first) or any(x != y for i, (x, y) in enumerate(zip(s, first)) if i != ax):
            got = [tuple(s) for s in shapes]
            raise ShapeError(f"all inputs must match except on axis {a['axis']}, got {got}")
    out = list(first)
    out[ax] = sum(s[ax] for s in shapes)
    return tuple(out), _same_dtype(dtypes)


def pad_rule(shapes, dtypes, a):
    x = shapes[0]
    pw = a["pad_width"]
    if len(pw) != len(x) or any(len(p) != 2 for p in pw):
        raise ShapeError(f"pad_width needs one (before, after) pair per dim of {tuple(x)}")
    return tuple(d + b + e for d, (b, e) in zip(x, pw)), dtypes[0]


def reshape_shape(x, newshape) -> tuple[int, ...]:
    """Relay's reshape: 0 copies the input dim at that position, -1 is inferred."""
    out = []
    for i, d in enumerate(newshape):
        if d == 0:
            if i >= len(x):
                raise ShapeError(f"newshape {tuple(newshape)} copies dim {i} of {tuple(x)}")
            out.append(x[i])
        elif d == -1 or d > 0:
            out.append(d)
        else:
            raise ShapeError(f"newshape values must be > 0, 0 or -1, got {tuple(newshape)}")
    size = math.prod(x)
    if out.count(-1) > 1:
        raise ShapeError(f"newshape {tuple(newshape)} has more than one -1")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or size % known:
            raise ShapeError(f"cannot reshape {tuple(x)} into {tuple(newshape)}")
        out[out.index(-1)] = size // known
    if math.prod(out) != size:
        raise ShapeError(f"cannot reshape {tuple(x)} ({size} elements) into {tuple(newshape)}")
    return tuple(out)


def reshape_rule(shapes, dtypes, a):
    return reshape_shape(shapes[0], a["newshape"]), dtypes[0]


def batch_flatten_rule(shapes, dtypes, a):
    x = shapes[0]
    if len(x) < 1:
        raise ShapeError("data must have a batch dim")
    return (x[0], math.prod(x[1:])), dtypes[0]


def transpose_rule(shapes, dtypes, a):
    x = shapes[0]
    axes = a["axes"]
    if axes is None:
        axes = tuple(reversed(range(len(x))))
    axes = tuple(_axis(i, len(x), "axes entry") for i in axes)
    if sorted(axes) != list(range(len(x))):
        raise ShapeError(f"axes {a['axes']} is not a permutation of {len(x)} dims")
    return tuple(x[i] for i in axes), dtypes[0]


def squeeze_rule(shapes, dtypes, a):
    x = shapes[0]
    if a["axis"] is None:
        return tuple(d for d in x if d != 1), dtypes[0]
    axes = {_axis(i, len(x)) for i in a["axis"]}
    bad = [i for i in axes if x[i] != 1]
    if bad:
        raise ShapeError(f"cannot squeeze axes {sorted(bad)} of {tuple(x)}: not of size 1")
    return tuple(d for i, d in enumerate(x) if i not in axes), dtypes[0]


LAYOUT_PAIRS = {("NCHW", "NHWC"), ("NHWC", "NCHW"), ("NCDHW", "NDHWC"), ("NDHWC", "NCDHW")}


def layout_transform_rule(shapes, dtypes, a):
    x = shapes[0]
    src, dst = a["src_layout"], a["dst_layout"]
    if src != dst and (src, dst) not in LAYOUT_PAIRS:
        raise ShapeError(f"unsupported layout_transform {src} -> {dst}")
    _ndim(x, len(src), f"data ({src})")
    return tuple(x[src.index(c)] for c in dst), dtypes[0]


def cast_rule(shapes, dtypes, a):
    try:
        check_dtype(a["dtype"])
    except ValueError as e:
        raise ShapeError(str(e)) from None
    return tuple(shapes[0]), a["dtype"]


def fix_pool(ndim, layouts):
    window, layout = fix_window(ndim, "pool_size"), check_layout(layouts)
    return lambda a: layout(window(a))


def fix_squeeze(a):
    if isinstance(a["axis"], int | np.integer):
        a["axis"] = (int(a["axis"]),)
    return a


# --- ONNX import: reductions, logic, math (issue 26) ---


def float_unary_rule(shapes, dtypes, a):
    """A one-input op of float inputs (erf, log, isnan ...)."""
    if not np.issubdtype(np.dtype(dtypes[0]), np.floating):
        raise ShapeError(f"data must be a float type, got {dtypes[0]}")
    return tuple(shapes[0]), dtypes[0]


def predicate_rule(float_only: bool):
    """A one-input op with a bool result (isnan, isinf, logical_not)."""

    def infer(shapes, dtypes, a):
        if float_only:
            float_unary_rule(shapes, dtypes, a)
        return tuple(shapes[0]), "bool"

    return infer


def compare_rule(shapes, dtypes, a):
    """A broadcasting comparison: one operand dtype, a bool result."""
    _same_dtype(dtypes, "lhs and rhs")
    return broadcast_shapes(*shapes), "bool"


def logical_rule(shapes, dtypes, a):
    """logical_and / logical_or: any operand dtypes (non-zero is true), a bool result."""
    return broadcast_shapes(*shapes), "bool"


def where_rule(shapes, dtypes, a):
    cond, x, y = shapes
    return (
        broadcast_shapes(broadcast_shapes(cond, x), y),
        _same_dtype(dtypes[1:], "x and y"),
    )


def reduce_rule(shapes, dtypes, a):
    """sum / mean / max / min: the reduced dims dropped (kept as 1 with keepdims); reducing
    every dim without keepdims leaves shape (1,), never a 0-d tensor."""
    x = shapes[0]
    if a["axis"] is None:
        axes = set(range(len(x)))
    else:
        axes = {_axis(int(i), len(x)) for i in a["axis"]}
    if a["exclude"]:
        axes = set(range(len(x))) - axes
    if a["keepdims"]:
        return tuple(1 if d in axes else n for d, n in enumerate(x)), dtypes[0]
    return tuple(n for d, n in enumerate(x) if d not in axes) or (1,), dtypes[0]


def fix_reduce(a):
    if isinstance(a["axis"], int | np.integer):
        a["axis"] = (int(a["axis"]),)
    elif a["axis"] is not None:
        a["axis"] = tuple(int(i) for i in a["axis"])
    return a


def layer_norm_rule(shapes, dtypes, a):
    x = shapes[0]
    ax = _axis(a["axis"], len(x))
    for name, s in zip(("gamma", "beta"), shapes[1:]):
        if tuple(s) != (x[ax],):
            raise ShapeError(f"{name} must have shape ({x[ax]},) (data's axis {a['axis']})")
    float_unary_rule(shapes, dtypes, a)
    return tuple(x), _same_dtype(dtypes)


def axis_unary_rule(shapes, dtypes, a):
    """A one-input op along ``axis`` that keeps the shape (cumsum)."""
    _axis(a["axis"], len(shapes[0]))
    return tuple(shapes[0]), dtypes[0]


def full_slice(shape, a) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """strided_slice's begin / end / strides for every dim of ``shape``: with ``axes`` the
    given values are for those dims; the others, and missing strides, take the whole dim."""
    nd = len(shape)
    axes = range(nd) if a["axes"] is None else [_axis(int(i), nd, "axes entry") for i in a["axes"]]
    axes = list(axes)
    strides = a["strides"] if a["strides"] is not None else (1,) * len(axes)
    if not len(a["begin"]) == len(a["end"]) == len(strides) == len(axes):
        raise ShapeError(
            f"begin {a['begin']}, end {a['end']} and strides {a['strides']} must have one "
            f"value per sliced axis ({len(axes)})"
        )
    begin, end, step = [0] * nd, list(shape), [1] * nd
    for j, d in enumerate(axes):
        begin[d], end[d], step[d] = int(a["begin"][j]), int(a["end"][j]), int(strides[j])
    if 0 in step:
        raise ShapeError(f"strides {a['strides']} has a step of 0")
    return tuple(begin), tuple(end), tuple(step)


def strided_slice_rule(shapes, dtypes, a):
    x = shapes[0]
    begin, end, step = full_slice(x, a)
    out = tuple(len(range(*slice(b, e, s).indices(n))) for n, b, e, s in zip(x, begin, end, step))
    if 0 in out:
        raise ShapeError(f"the slice of {tuple(x)} is empty ({out}); empty tensors are unsupported")
    return out, dtypes[0]


def fix_strided_slice(a):
    for k in ("begin", "end", "strides", "axes"):
        if a[k] is not None:
            a[k] = tuple(int(v) for v in a[k])
    return a


def broadcast_to_rule(shapes, dtypes, a):
    shape = tuple(int(d) for d in a["shape"])
    if broadcast_shapes(shapes[0], shape) != shape:
        raise ShapeError(f"{tuple(shapes[0])} does not broadcast to {shape}")
    return shape, dtypes[0]


def trilu_rule(shapes, dtypes, a):
    if len(shapes[0]) < 2:
        raise ShapeError(f"data must have at least 2 dims, got {tuple(shapes[0])}")
    return tuple(shapes[0]), dtypes[0]
