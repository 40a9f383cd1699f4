"""ONNX converters of the window ops: Conv, the pools (max / average, global, ``auto_pad``,
``ceil_mode``) and BatchNormalization; ``_pads`` is the padding arithmetic others reuse."""

from __future__ import annotations

from . import nn
from .ir import Expr
from .onnx_node import Node, _register
from .shapes import window_out

_AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _pads(node: Node, in_sizes, kernel, strides, dilations) -> tuple[int, ...]:
    """(before per spatial dim, then after per dim), ONNX's ``pads`` order and Relay's too."""
    n = len(in_sizes)
    mode = node.attr("auto_pad", "NOTSET")
    if mode == "NOTSET":
        pads = node.ints("pads", 2 * n, 0)
        if any(p < 0 for p in pads):
            node.fail(f"negative pads {list(pads)} are not supported")
        return pads
    if mode == "VALID":
        return (0,) * (2 * n)
    if mode not in _AUTO_PAD:
        node.unsupported("auto_pad", mode, _AUTO_PAD)
    before, after = [], []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        before.append(small if mode == "SAME_UPPER" else big)
        after.append(big if mode == "SAME_UPPER" else small)
    return tuple(before + after)


def _spatial(node: Node, x: Expr) -> int:
    nsp = len(x.shape) - 2
    if nsp not in (2, 3):
        node.fail(
            f"{nsp}-D spatial input (shape {x.shape}) is not supported; supported: 4-D (NCHW) "
            "and 5-D (NCDHW) tensors"
        )
    return nsp


@_register("Conv", "auto_pad dilations group kernel_shape pads strides")
def _conv(node: Node):
    x, w = node.expr(0), node.expr(1)
    nsp = _spatial(node, x)
    kernel = tuple(w.shape[2:])
    given = node.attr("kernel_shape")
    if given is not None and tuple(given) != kernel:
        node.fail(f"kernel_shape={list(given)} does not match the weight's {kernel}")
    strides = node.positive_ints("strides", nsp, 1)
    dil = node.positive_ints("dilations", nsp, 1)
    pads = _pads(node, x.shape[2:], kernel, strides, dil)
    conv = nn.conv2d if nsp == 2 else nn.conv3d
    y = conv(x, w, strides=strides, padding=pads, dilation=dil, groups=node.attr("group", 1),
             data_layout="NCHW" if nsp == 2 else "NCDHW")  # fmt: skip
    if node.has(2):
        y = nn.bias_add(y, node.expr(2), axis=1)
    return y


def _onnx_ceil_mode(node: Node, sizes, kernel, strides, dil, pads, counts_pad: bool):
    """Our (ceil_mode, pads) for ONNX's ceil_mode=1.

    ONNX (and torch) drop a last window that would start in the end padding; ceil_mode here
    keeps it. Where every dim drops one, floor mode gives ONNX's sizes; where only some do,
    the others get extra end padding, which neither max nor an average that does not count
    padding can see.
    """
    n = len(sizes)
    floor, ceil, want = [], [], []
    for j in range(n):
        b, e = pads[j], pads[j + n]
        ceil.append(window_out(sizes[j], kernel[j], strides[j], dil[j], b, e, True))
        floor.append(window_out(sizes[j], kernel[j], strides[j], dil[j], b, e, False))
        drop = (ceil[j] - 1) * strides[j] >= sizes[j] + b
        want.append(ceil[j] - 1 if drop else ceil[j])
    if want == floor:
        return False, pads
    if want == ceil:
        return True, pads
    if counts_pad:
        node.fail(
            "ceil_mode=1 with count_include_pad=1 where only some dims drop ONNX's last window "
            f"(input {tuple(sizes)}, kernel_shape {kernel}, strides {strides}, pads "
            f"{list(pads)}) is not supported"
        )
    pads = list(pads)
    for j in range(n):
        if want[j] > floor[j]:
            span = (kernel[j] - 1) * dil[j] + 1
            pads[j + n] += (want[j] - 1) * strides[j] + span - (sizes[j] + pads[j] + pads[j + n])
    return False, tuple(pads)


def _pool(kind: str):
    def convert(node: Node):
        x = node.expr(0)
        nsp = _spatial(node, x)
        if node.attr("kernel_shape") is None:
            node.fail(f"kernel_shape must give {nsp} sizes, got None")
        kernel = node.positive_ints("kernel_shape", nsp, 1)
        strides = node.positive_ints("strides", nsp, 1)
        dil = node.positive_ints("dilations", nsp, 1)
        if node.attr("storage_order", 0) != 0:
            node.unsupported("storage_order", node.attr("storage_order"), [0])
        pads = _pads(node, x.shape[2:], kernel, strides, dil)
        ceil = bool(node.attr("ceil_mode", 0))
        include = bool(node.attr("count_include_pad", 0))
        if ceil:
            ceil, pads = _onnx_ceil_mode(node, x.shape[2:], kernel, strides, dil, pads,
                                         kind == "avg" and include)  # fmt: skip
        layout = "NCHW" if nsp == 2 else "NCDHW"
        kw = dict(pool_size=kernel, strides=strides, padding=pads, dilation=dil, layout=layout,
                  ceil_mode=ceil)  # fmt: skip
        if kind == "max":
            return (nn.max_pool2d if nsp == 2 else nn.max_pool3d)(x, **kw)
        return (nn.avg_pool2d if nsp == 2 else nn.avg_pool3d)(x, count_include_pad=include, **kw)

    return convert


_WINDOW = "auto_pad ceil_mode dilations kernel_shape pads strides"
_register("MaxPool", _WINDOW + " storage_order")(_pool("max"))
_register("AveragePool", _WINDOW + " count_include_pad")(_pool("avg"))


def _global_pool(kind: str):
    def convert(node: Node):
        x = node.expr(0)
        nsp = _spatial(node, x)
        if nsp == 2:
            return (nn.global_avg_pool2d if kind == "avg" else nn.global_max_pool2d)(x)
        pool = nn.avg_pool3d if kind == "avg" else nn.max_pool3d
        return pool(x, pool_size=x.shape[2:], layout="NCDHW")

    return convert


_register("GlobalAveragePool")(_global_pool("avg"))
_register("GlobalMaxPool")(_global_pool("max"))


@_register("BatchNormalization", "epsilon momentum spatial training_mode")
def _batch_norm(node: Node):
    if node.attr("training_mode", 0):
        node.unsupported("training_mode", node.attr("training_mode"), [0])
    if node.attr("spatial", 1) != 1:
        node.unsupported("spatial", node.attr("spatial"), [1])
    args = [node.expr(i) for i in range(5)]
    return nn.batch_norm(*args, axis=1, epsilon=float(node.attr("epsilon", 1e-5)))
