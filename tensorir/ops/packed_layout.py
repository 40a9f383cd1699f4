"""Packed (blocked) layouts such as VTA's ``NCHW1n16c`` data and ``OIHW16o16i`` kernels.

A packed layout splits some axes of a plain layout into an outer part (upper-case letter) and an
inner block (a number and the lower-case letter, appended at the end): ``NCHW1n16c`` is
``(N//1, C//16, H, W, 1, 16)``. ``nn.conv2d`` accepts a packed data layout with the matching
packed kernel layout (what ``autosched.vta.top.graph_pack`` produces), and ``layout_transform``
converts between a plain layout and its packing. The registry wraps the plain conv2d /
layout_transform rules with these (tensorir/ops/registry.py); plain layouts are unchanged.
"""

from __future__ import annotations

import re

import numpy as np

from .. import te
from ..tensor import Tensor, TensorError
from ._util import compute
from .shape_rules import ShapeError
from .transform import pad

_PACKED = re.compile(r"^([A-Z]+)((?:\d+[a-z])+)$")


def parse(layout: str) -> tuple[str, dict[str, int]] | None:
    """``("NCHW", {"N": 1, "C": 16})`` for ``"NCHW1n16c"``; None for a plain layout."""
    m = _PACKED.match(layout or "")
    if not m:
        return None
    base, blocks = m.group(1), {}
    for size, axis in re.findall(r"(\d+)([a-z])", m.group(2)):
        if axis.upper() not in base or axis.upper() in blocks or int(size) < 1:
            return None
        blocks[axis.upper()] = int(size)
    return base, blocks


def is_packed(layout: str) -> bool:
    return parse(layout) is not None


def packed_shape(shape, layout: str) -> tuple[int, ...]:
    """The shape of a plain ``shape`` (in ``parse(layout)[0]``) once packed into ``layout``."""
    base, blocks = parse(layout)
    out = []
    for axis, extent in zip(base, shape, strict=True):
        block = blocks.get(axis, 1)
        if extent % block:
            raise ShapeError(
                f"cannot pack axis {axis} of extent {extent} into blocks of {block} ({layout})"
            )
        out.append(extent // block)
    return (*out, *blocks.values())


def unpacked_shape(shape, layout: str) -> tuple[int, ...]:
    base, blocks = parse(layout)
    inner = dict(zip(blocks, shape[len(base) :], strict=True))
    return tuple(extent * inner.get(axis, 1) for axis, extent in zip(base, shape, strict=False))


def pack(x: np.ndarray, layout: str) -> np.ndarray:
    """numpy: plain (``parse(layout)[0]`` order) -> packed."""
    base, blocks = parse(layout)
    split, outer_axes = [], []
    for axis, extent in zip(base, x.shape, strict=True):
        if axis in blocks:
            outer_axes.append(len(split))
            split += [extent // blocks[axis], blocks[axis]]
        else:
            outer_axes.append(len(split))
            split.append(extent)
    pos = {axis: k for k, axis in enumerate(base)}
    inner_axes = [outer_axes[pos[a]] + 1 for a in blocks]
    return x.reshape(split).transpose(outer_axes + inner_axes)


def unpack(x: np.ndarray, layout: str) -> np.ndarray:
    """numpy: packed -> plain (inverse of ``pack``)."""
    base, blocks = parse(layout)
    inner_of = {axis: len(base) + k for k, axis in enumerate(blocks)}
    order = []
    for k, axis in enumerate(base):
        order += [k, inner_of[axis]] if axis in blocks else [k]
    return x.transpose(order).reshape(unpacked_shape(x.shape, layout))


# ----------------------------------------------------------------------------- layout_transform


def layout_transform_rule(base_rule):
    """``layout_transform`` between a plain layout and its packing, else ``base_rule``."""

    def infer(shapes, dtypes, a):
        src, dst = a["src_layout"], a["dst_layout"]
        if is_packed(dst) and parse(dst)[0] == src:
            if len(shapes[0]) != len(src):
                raise ShapeError(f"data ({src}) must be {len(src)}-D, got {tuple(shapes[0])}")
            return packed_shape(shapes[0], dst), dtypes[0]
        if is_packed(src) and parse(src)[0] == dst:
            base, blocks = parse(src)
            if len(shapes[0]) != len(base) + len(blocks):
                raise ShapeError(f"data ({src}) must be {len(base) + len(blocks)}-D")
            if tuple(shapes[0][len(base) :]) != tuple(blocks.values()):
                raise ShapeError(f"data's inner blocks {shapes[0][len(base) :]} are not {src}'s")
            return unpacked_shape(shapes[0], src), dtypes[0]
        return base_rule(shapes, dtypes, a)

    return infer


def layout_transform_ref(base_ref):
    def ref(a, shape, x):
        src, dst = a["src_layout"], a["dst_layout"]
        if is_packed(dst):
            return np.ascontiguousarray(pack(x, dst))
        if is_packed(src):
            return np.ascontiguousarray(unpack(x, src))
        return base_ref(a, shape, x)

    return ref


def layout_transform_compute(base_compute):
    def build(ins, a):
        src, dst = a["src_layout"], a["dst_layout"]
        if not (is_packed(src) or is_packed(dst)):
            return base_compute(ins, a)
        x = ins[0]
        if is_packed(dst):
            base, blocks = parse(dst)
            shape = packed_shape(x.shape, dst)

            def f(*i):
                inner = dict(zip(blocks, i[len(base) :], strict=True))
                return x[tuple(
                    i[k] * blocks[ax] + inner[ax] if ax in blocks else i[k]
                    for k, ax in enumerate(base)
                )]  # fmt: skip

        else:
            base, blocks = parse(src)
            shape = unpacked_shape(x.shape, src)

            def f(*i):
                outer = [i[k] // blocks[ax] if ax in blocks else i[k] for k, ax in enumerate(base)]
                inner = [i[base.index(ax)] % size for ax, size in blocks.items()]
                return x[(*outer, *inner)]

        return compute(shape, f, "T_layout_trans", "ax", tag="injective")

    return build


# ----------------------------------------------------------------------------- nn.conv2d


def _plain_conv_attrs(a: dict) -> dict:
    return {**a, "data_layout": "NCHW", "kernel_layout": "OIHW"}


def conv2d_fix(base_fix):
    """Accept a packed ``NCHW..n..c`` data layout; its kernel layout defaults to the packing
    ``OIHW{c}o{c}i`` of the channel block."""

    def fix(a):
        p = parse(a.get("data_layout", ""))
        if p is None:
            return base_fix(a)
        if p[0] != "NCHW" or set(p[1]) - {"N", "C"}:
            raise TypeError(
                f"packed data_layout {a['data_layout']!r} must pack N and C of NCHW "
                "(e.g. NCHW1n16c)"
            )
        plain = base_fix(_plain_conv_attrs(a))
        plain["data_layout"] = a["data_layout"]
        c = p[1].get("C", 1)
        plain["kernel_layout"] = a.get("kernel_layout") or f"OIHW{c}o{c}i"
        return plain

    return fix


def conv2d_rule(base_rule):
    def infer(shapes, dtypes, a):
        dl, kl = a["data_layout"], a["kernel_layout"]
        if not is_packed(dl):
            return base_rule(shapes, dtypes, a)
        pk = parse(kl)
        if pk is None or pk[0] != "OIHW":
            raise ShapeError(f"kernel_layout {kl!r} must be a packing of OIHW for data {dl!r}")
        if a["groups"] != 1:
            raise ShapeError(f"packed data_layout {dl!r} needs groups=1, got {a['groups']}")
        data = unpacked_shape(shapes[0], dl)
        weight = unpacked_shape(shapes[1], kl)
        if len(shapes[0]) != len(data) + len(parse(dl)[1]):
            raise ShapeError(f"data must be {dl}-shaped, got {tuple(shapes[0])}")
        plain = _plain_conv_attrs(a)
        out, dtype = base_rule((data, weight), dtypes, plain)
        a["channels"], a["kernel_size"] = plain["channels"], plain["kernel_size"]
        return packed_shape(out, dl), dtype

    return infer


def conv2d_ref(base_ref):
    def ref(a, shape, x, w):
        dl, kl = a["data_layout"], a["kernel_layout"]
        if not is_packed(dl):
            return base_ref(a, shape, x, w)
        out = base_ref(_plain_conv_attrs(a), None, unpack(x, dl), unpack(w, kl))
        return np.ascontiguousarray(pack(out, dl))

    return ref


def conv2d_compute(base_compute):
    def build(ins, a):
        if not is_packed(a["data_layout"]):
            return base_compute(ins, a)
        return conv2d_packed(ins[0], ins[1], a["strides"], a["padding"], a["dilation"],
                             a["out_dtype"] or ins[0].dtype)  # fmt: skip

    return build


def conv2d_packed(data: Tensor, kernel: Tensor, strides, padding, dilation, out_dtype: str):
    """Packed conv2d as te: ``data`` (N, C, H, W, n, c), ``kernel`` (O, I, KH, KW, o, i)."""
    if tuple(dilation) != (1, 1):
        raise TensorError(f"nn.conv2d: packed layouts need dilation (1, 1), got {dilation}")
    nb, cb, h, w, batch, bi = data.shape
    ob, _, kh, kw, bo, _ = kernel.shape
    sh, sw = strides
    top, left, bottom, right = padding
    oh, ow = (h + top + bottom - kh) // sh + 1, (w + left + right - kw) // sw + 1
    padded = pad(data, ((0, 0), (0, 0), (top, bottom), (left, right), (0, 0), (0, 0)), 0)
    ic = te.reduce_axis((0, cb), name="ic")
    dy = te.reduce_axis((0, kh), name="dy")
    dx = te.reduce_axis((0, kw), name="dx")
    ici = te.reduce_axis((0, bi), name="ic_tns")
    return compute(
        (nb, ob, oh, ow, batch, bo),
        lambda b, co, i, j, b_tns, co_tns: te.sum(
            padded[b, ic, i * sh + dy, j * sw + dx, b_tns, ici].astype(out_dtype)
            * kernel[co, ic, dy, dx, co_tns, ici].astype(out_dtype),
            axis=[ic, dy, dx, ici],
        ),
        "res",
        ["b", "co", "i", "j", "b_tns", "co_tns"],
        tag="conv2d_packed",
    )
