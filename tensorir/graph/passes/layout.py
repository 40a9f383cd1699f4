"""``convert_layout``: NCHW -> NHWC (and NCDHW -> NDHWC), as Relay's ConvertLayout.

Every rank-4 (rank-5) value the pass touches is either in its original channels-first form
or in channels-last form. Convolutions, transposed convolutions, pools and resizes are
rewritten to channels-last (weights transposed OIHW -> HWIO, depthwise -> HWOI, OIDHW -> DHWIO,
IOHW -> HWIO); ops that work in any layout (elemwise, broadcast, bias_add, batch / group /
instance norm, concatenate, pad, softmax, and sum / mean / max / min with keepdims) follow
their inputs and get their axis attributes remapped; every other op (batch_flatten, reshape,
transpose, dense, ...) and the function outputs see the original layout. ``layout_transform``
is inserted only where a value crosses between the two forms, at most once per value and
direction, so a transform pair never appears back to back. Transposes of constant weights are
folded by ``fold_constant`` afterwards.
"""

from __future__ import annotations

from .. import op
from ..ir import Call, Expr, Function, make_call, post_order
from ..shapes import BROADCAST, ELEMWISE, OPS
from .fold import fold_constant

__all__ = ["convert_layout"]

_FIRST = {4: "NCHW", 5: "NCDHW"}
_LAST = {4: "NHWC", 5: "NDHWC"}
_CONV_LAST = {
    "nn.conv2d": ("NCHW", "NHWC"), "nn.conv3d": ("NCDHW", "NDHWC"),
    "nn.conv2d_transpose": ("NCHW", "NHWC"),  # IOHW -> HWIO, as a conv's OIHW -> HWIO
}  # fmt: skip
_POOLS = (
    "nn.max_pool2d", "nn.avg_pool2d", "nn.max_pool3d", "nn.avg_pool3d",
    "nn.global_avg_pool2d", "nn.global_max_pool2d", "nn.adaptive_avg_pool2d", "image.resize2d",
)  # fmt: skip
_NORMS = ("nn.batch_norm", "nn.group_norm", "nn.instance_norm")  # data, then (C,) vectors
_AXIS_OPS = ("nn.bias_add", "concatenate", "nn.softmax") + _NORMS
_REDUCE_OPS = ("sum", "mean", "max", "min")  # with keepdims: axes remapped, like _AXIS_OPS


def _map_axis(axis: int, ndim: int) -> int:
    """A channels-first axis index -> the same dimension's index in channels-last."""
    src, dst = _FIRST[ndim], _LAST[ndim]
    return dst.index(src[axis % ndim])


def _kernel_to_last(w: Expr, attrs) -> tuple[Expr, str]:
    """Transpose a channels-first kernel (OIHW / OIDHW) to HWIO / DHWIO (depthwise: HWOI)."""
    src = attrs["kernel_layout"]
    ndim = len(w.shape)
    spatial = src.replace("O", "").replace("I", "")
    o, i = w.shape[src.index("O")], w.shape[src.index("I")]
    depthwise = ndim == 4 and attrs["groups"] > 1 and i == 1 and attrs["groups"] == o
    dst = spatial + ("OI" if depthwise else "IO")
    if dst == src:
        return w, src
    return op.transpose(w, tuple(src.index(c) for c in dst)), dst


class _Converter:
    def __init__(self):
        self.new: dict[Expr, Expr] = {}  # old node -> rewritten node
        self.last: set[Expr] = set()  # old nodes whose rewrite is channels-last
        self.cache: dict[tuple[Expr, bool], Expr] = {}

    def get(self, node: Expr, channels_last: bool) -> Expr:
        """``node``'s rewrite in the requested form, transforming (once) if needed."""
        new = self.new[node]
        if (node in self.last) == channels_last:
            return new
        key = (node, channels_last)
        if key not in self.cache:
            ndim = len(node.shape)
            src, dst = (_FIRST[ndim], _LAST[ndim]) if channels_last else (_LAST[ndim], _FIRST[ndim])
            self.cache[key] = op.layout_transform(new, src, dst)
        return self.cache[key]

    def as_last_operand(self, node: Expr, ndim: int) -> Expr:
        """A broadcast operand of a channels-last value: lower-rank operands broadcast in
        channels-first terms, so they are expanded to ``ndim`` first, then transformed."""
        if node in self.last:
            return self.new[node]
        new = self.new[node]
        r = len(new.shape)
        if r == 0 or all(d == 1 for d in new.shape):
            return new if r < ndim else op.reshape(new, (1,) * ndim)
        if r == ndim:
            return self.get(node, True)
        new = op.reshape(new, (1,) * (ndim - r) + tuple(new.shape))
        return op.layout_transform(new, _FIRST[ndim], _LAST[ndim])

    def visit(self, node: Expr) -> None:
        if not isinstance(node, Call):
            self.new[node] = node
            return
        out = self.convert(node)
        if out is None:  # layout-sensitive: inputs in their original form
            args = tuple(self.get(a, False) for a in node.args)
            out = self.rebuild(node, args, node.attrs)
            self.new[node] = out
        else:
            self.new[node] = out
            self.last.add(node)

    @staticmethod
    def rebuild(node, args, attrs):
        if all(n is o for n, o in zip(args, node.args)) and attrs is node.attrs:
            return node
        return make_call(node.op, args, attrs)

    def convert(self, node: Call) -> Expr | None:
        """The channels-last rewrite of ``node``, or None if it stays channels-first."""
        a, name = node.attrs, node.op
        ndim = len(node.shape)
        if name in _CONV_LAST and a["data_layout"] == _CONV_LAST[name][0]:
            w, kl = _kernel_to_last(self.new[node.args[1]], a)
            data = self.get(node.args[0], True)
            attrs = a.replace(data_layout=_CONV_LAST[name][1], kernel_layout=kl)
            return make_call(name, (data, w), attrs)
        if name in _POOLS and a["layout"] == _FIRST.get(len(node.args[0].shape)):
            data = self.get(node.args[0], True)
            return make_call(name, (data,), a.replace(layout=_LAST[len(data.shape)]))
        if ndim not in _FIRST:
            return None
        tensor_args = [x for x in node.args if len(x.shape) == ndim]
        if not any(x in self.last for x in tensor_args):
            return None  # nothing channels-last flows in: leave it as it is
        pattern = OPS[name].pattern
        if name in _AXIS_OPS:
            axis = _map_axis(a["axis"], ndim)
            if name in _NORMS:
                args = (self.get(node.args[0], True), *(self.new[x] for x in node.args[1:]))
            elif name == "nn.bias_add":
                args = (self.get(node.args[0], True), self.new[node.args[1]])
            else:
                args = tuple(self.get(x, True) for x in node.args)
            return make_call(name, args, a.replace(axis=axis))
        if name in _REDUCE_OPS and a["keepdims"] and a["axis"] is not None:
            # keepdims keeps the rank, so the result stays channels-last: remap the axes
            axis = tuple(sorted(_map_axis(x, ndim) for x in a["axis"]))
            return make_call(name, (self.get(node.args[0], True),), a.replace(axis=axis))
        if name == "nn.pad":
            pw = a["pad_width"]
            src, dst = _FIRST[ndim], _LAST[ndim]
            new_pw = tuple(pw[src.index(c)] for c in dst)
            return make_call(name, (self.get(node.args[0], True),), a.replace(pad_width=new_pw))
        if pattern == ELEMWISE and len(node.args) == 1:
            return make_call(name, (self.get(node.args[0], True),), a)
        if pattern == BROADCAST and len(node.args) == 2:
            args = tuple(self.as_last_operand(x, ndim) for x in node.args)
            return make_call(name, args, a)
        return None


def convert_layout(func: Function, layout: str = "NHWC") -> Function:
    """Convert channels-first convolutions and pools (and the ops between them) to
    channels-last.

    Parameters
    ----------
    func : Function
    layout : "NHWC"
        The only target supported; 3-D networks go NCDHW -> NDHWC.

    Returns
    -------
    Function
        Same parameters and outputs (in their original layouts); constant weight transposes
        and layout transforms are folded.
    """
    if layout != "NHWC":
        raise ValueError(f"convert_layout: only 'NHWC' is supported, got {layout!r}")
    conv = _Converter()
    for node in post_order(func):
        conv.visit(node)
    body = tuple(conv.get(o, False) for o in func.outputs)
    body = body if isinstance(func.body, tuple) else body[0]
    out = Function(func.params, body, func.name)
    return fold_constant(out)
