"""``vta.top.graph_pack``: pack a network's NCHW region into VTA's blocked layout.

Between the first call of ``start_name`` (e.g. ``nn.max_pool2d``) and the first call of
``stop_name`` after it (e.g. ``nn.global_avg_pool2d``) activations move to ``NCHW{b}n{c}c``
(``b`` = ``env.BATCH``, ``c`` = ``env.BLOCK_OUT``) and conv2d weights to ``OIHW{c}o{c}i``, so
that the convolutions there become the ``conv2d_packed.vta`` workloads the accelerator runs; the
layers outside stay NCHW on the CPU. As in TVM:

* the start op's output gets a ``layout_transform(NCHW -> NCHW1n16c)``, the stop op's input a
  ``layout_transform(NCHW1n16c -> NCHW)``;
* each ``nn.conv2d`` (groups 1, channels divisible by the block) takes packed data (packed
  there if an op before it could not stay packed) and a packed weight (``layout_transform`` of
  the OIHW weight; bind the params to fold it);
* elementwise and broadcast ops stay packed; a per-channel operand such as a ``(C, 1, 1)`` bias
  is reshaped to 4-D and packed too, a scalar is kept;
* any other op inside the region gets its inputs unpacked first.

The result computes the same values as its input (``evaluate`` agrees bit for bit); only
layouts change.
"""

from __future__ import annotations

from tensorir.graph import op
from tensorir.graph.ir import Call, Constant, Function, Module, make_call, post_order, rewrite
from tensorir.graph.shapes import get_op
from tensorir.ops.shape_rules import BROADCAST

_UNARY_KEEP = ("clip", "cast", "nn.relu")  # shape-preserving ops that stay packed


def graph_pack(
    expr,
    bfactor: int,
    cfactor: int,
    weight_bits: int,
    start_name: str = "nn.max_pool2d",
    stop_name: str = "nn.global_avg_pool2d",
):
    """Pack the region of ``expr`` between ``start_name`` and ``stop_name`` (see module doc).

    Parameters
    ----------
    expr : Function or Module
        An NCHW network (int8 after ``autosched.quantize``).
    bfactor, cfactor : int
        ``env.BATCH`` and ``env.BLOCK_OUT``: the batch and channel blocks.
    weight_bits : int
        ``env.WGT_WIDTH``; only 8 is supported (int8 weights).
    start_name, stop_name : str
        Op names; packing starts after the first ``start_name`` call and stops before the
        first ``stop_name`` call after it.

    Returns
    -------
    Function or Module
        Like ``expr``.
    """
    if weight_bits != 8:
        raise ValueError(f"graph_pack: weight_bits={weight_bits}; VTA here has int8 weights (8)")
    func = expr["main"] if isinstance(expr, Module) else expr
    if not isinstance(func, Function):
        raise TypeError(f"graph_pack: expected a Function or Module, got {type(expr).__name__}")
    calls = [n for n in post_order(func) if isinstance(n, Call)]
    names = [c.op for c in calls]
    if start_name not in names:
        raise ValueError(f"graph_pack: no {start_name!r} call in the network (start_name)")
    start = names.index(start_name)
    if stop_name not in names[start + 1 :]:
        raise ValueError(
            f"graph_pack: no {stop_name!r} call after the first {start_name!r} (stop_name)"
        )
    stop = names.index(stop_name, start + 1)
    order = {id(c): k for k, c in enumerate(calls)}
    layout, wlayout = f"NCHW{bfactor}n{cfactor}c", f"OIHW{cfactor}o{cfactor}i"
    packed: set[int] = set()  # ids of rewritten nodes that are in the packed layout

    def pack(x):
        out = op.layout_transform(x, "NCHW", layout)
        packed.add(id(out))
        return out

    def unpack(x):
        return op.layout_transform(x, layout, "NCHW") if id(x) in packed else x

    def visit(node, args):
        if not isinstance(node, Call):
            return None
        k = order[id(node)]
        inside = start < k < stop
        if inside and node.op == "nn.conv2d" and _packable_conv(node, bfactor, cfactor):
            data, weight = args
            data = data if id(data) in packed else pack(data)
            weight = op.layout_transform(weight, "OIHW", wlayout)
            attrs = node.attrs.replace(data_layout=layout, kernel_layout=wlayout)
            out = make_call("nn.conv2d", (data, weight), attrs)
            packed.add(id(out))
            return out
        if not inside or not any(id(a) in packed for a in args):
            out = make_call(node.op, tuple(unpack(a) for a in args), node.attrs)
            return pack(out) if k == start and len(out.shape) == 4 else out
        if node.op in _UNARY_KEEP or get_op(node.op).pattern <= BROADCAST:
            full = next(a for a in args if id(a) in packed)
            new_args = [
                a if id(a) in packed else _pack_operand(a, full, layout, pack) for a in args
            ]
            if all(a is not None for a in new_args):
                out = make_call(node.op, tuple(new_args), node.attrs)
                packed.add(id(out))
                return out
        return make_call(node.op, tuple(unpack(a) for a in args), node.attrs)

    out = rewrite(func, visit)
    return Module.from_function(out) if isinstance(expr, Module) else out


def _packable_conv(call: Call, bfactor: int, cfactor: int) -> bool:
    data, weight = call.args
    a = call.attrs
    return (
        a["data_layout"] == "NCHW"
        and a["kernel_layout"] in ("", "OIHW")
        and a["groups"] == 1
        and data.shape[0] % bfactor == 0
        and data.shape[1] % cfactor == 0
        and weight.shape[0] % cfactor == 0
        and tuple(a["dilation"]) == (1, 1)
    )


def _pack_operand(arg, full, layout, pack):
    """An operand of a broadcast op beside the packed ``full``, packed; None if it cannot be."""
    shape = tuple(arg.shape)
    if len(shape) == 0 or (isinstance(arg, Constant) and arg.value.size == 1):
        return arg  # a scalar broadcasts in any layout
    if len(shape) > 4:
        return None
    shape4 = (1,) * (4 - len(shape)) + shape
    x = op.reshape(arg, shape4) if shape4 != shape else arg
    n_blocks, c_blocks, _, _, batch, block = full.shape
    if (
        shape4[1] == c_blocks * block
        and shape4[0] in (1, n_blocks * batch)
        and (shape4[0] % batch == 0)
    ):
        return pack(x)
    if shape4[1] == 1 and shape4[0] == 1:
        return op.reshape(x, (1, 1, shape4[2], shape4[3], 1, 1))
    return None
