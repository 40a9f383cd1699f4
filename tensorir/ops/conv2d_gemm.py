"""2-D convolution as an implicit GEMM: the form tensor cores run a 16-bit conv2d in (and a
float32 one on TF32 fragments, where the target allows TF32).

A conv2d with ``groups == 1`` is a matrix product over an im2col operand. With ``p`` an output
pixel (batch included: ``p = (n*OH + oh)*OW + ow``) and ``r`` a tap ``(rc, ry, rx)`` numbered
so that the weight is a plain reshape of the stored kernel::

    col[p, r]    = data[n(p), .., oh(p)*s + ry(r)*d - pad, ow(p)*s + rx(r)*d - pad, rc(r)]
                   (0 off the image)
    NHWC (HWIO):  r = (ry*KW + rx)*CI + rc,  W2[r, co] = weight[ry, rx, rc, co]
                  conv2d_gemm[p, co] = sum_r col[p, r] * W2[r, co]      (X[i, k] * Y[k, j])
    NHWC (OHWI):  r = (ry*KW + rx)*CI + rc,  W2[co, r] = weight[co, ry, rx, rc]
                  conv2d_gemm[p, co] = sum_r col[p, r] * W2[co, r]      (X[i, k] * Y[j, k])
    NCHW (OIHW):  r = (rc*KH + ry)*KW + rx,  W2[co, r] = weight[co, rc, ry, rx]
                  conv2d_gemm[co, p] = sum_r W2[co, r] * col[p, r]      (X[i, k] * Y[j, k])

and the convolution's output is the GEMM read back in the layout's shape (for NHWC, and NCHW
at batch 1, the same memory order). ``col`` and ``W2`` are compute stages that nothing
materialises on a GPU: the tensor-core sketch (:mod:`autosched.search.sketch_rules_tensor_core`)
stages them through shared memory and inlines them into those copies, so each copy gathers from
``data`` and ``weight`` directly (MetaSchedule's ReIndex). On other schedules they inline into
the GEMM like any injective stage.

The GEMM extents are padded to whole fragments (:data:`GEMM_ALIGN` for ``P`` and ``CO``, the
operand dtype's fragment K for ``K``: 16 for float16 / bfloat16, 8 for float32 run as TF32,
:func:`gemm_k_align`; ``P`` to a whole warpgroup tile of 64 rows where the caller asks and that
wastes little, :func:`gemm_row_align`): ``col`` and ``W2`` are zero past the real ``P = N*OH*OW``,
``K = CI*KH*KW`` and ``CO`` (a condition in their bodies), and the output reads only the real
rows. :func:`use_implicit_gemm` says when
that pays (see its rule).

**Split-K.** Where the output has few fragment tiles and K is long (resnet's 7x7 maps at batch
1: ``P = 49`` padded to 64 rows, 512 channels, ``K = 4608``: 128 tiles of 16x16 for a GPU of
over 100 SMs, each block walking all of K), the GEMM is computed as ``S`` slices of K::

    col[s, p, r']  = col(p, s*KS + r')          W2[s, r', co] = W2(s*KS + r', co)
    conv2d_gemm[s, p, co] = sum_r' col[s, p, r'] * W2[s, r', co]     (a batch_matmul over s)
    out[n, oh, ow, co]    = conv2d_gemm[0, p, co] + ... + conv2d_gemm[S-1, p, co]

``S`` times as many blocks share the work; the partial sums (float32: 4 bytes per slice,
pixel and channel) are added by the epilogue's kernel, which an elementwise sum of ``S`` reads
keeps one injective stage. :func:`split_k_slices` picks ``S`` from the GEMM's shape alone, so a
tuning run and the build that reads its log make the same DAG on any machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import te
from ..dtype import LOW_PRECISION
from ..passes.tensor_core import FRAGMENT_SHAPES
from ..tensor import Tensor, TensorError
from ._util import as_tuple, cast_to, compute, spatial_padding, tap
from .conv2d import conv_out_size

__all__ = [
    "GEMM_ALIGN",
    "GEMM_TAG",
    "IGEMM_MAX_PAD",
    "ConvGemmShape",
    "conv2d_gemm_shape",
    "conv2d_implicit_gemm",
    "gemm_k_align",
    "gemm_row_align",
    "implicit_gemm_conv2d_op",
    "split_k_slices",
    "use_implicit_gemm",
]

GEMM_ALIGN = 16
"""The GEMM's P and CO are padded to a multiple of this (a wmma fragment's M and N); K to the
fragment's K (:func:`gemm_k_align`)."""
GEMM_TAG = "conv2d_gemm"
"""The tag of the GEMM stage (the tensor-core sketch fuses its reader's loops: see
``autosched.search.sketch_rules_tensor_core.flat_consumer``)."""
IGEMM_MAX_PAD = 0.25
"""The largest fraction of padded (zero) GEMM work :func:`use_implicit_gemm` accepts per axis."""
SPLIT_K_MIN_TILES = 2048
"""A split GEMM is cut into enough slices for this many tiles (slices times tiles): about 16
per SM on GPUs of 108-132 SMs (A100, H100), :func:`split_k_slices`. A batch-1 conv is latency
bound: a warp's chain of tile loads and ``mma`` waits on itself, so the SM needs many
independent warps. With 512 (about four a SM, until 2026-11-28) resnet-18's 3x3 convs took 12
to 18 us each in TF32 on an H200 whatever their map size; with 2048, 11 to 12 us, and the
network 0.288 -> 0.236 ms after the same tuning time (benchmarks/RESULTS.md, session 20)."""
WARPGROUP_ROWS = 64
"""The rows of one Hopper warpgroup tile (``wgmma`` m64): :func:`gemm_row_align`."""
WARPGROUP_ROW_WASTE = 0.125
"""The most padding :func:`gemm_row_align` adds to give ``P`` whole warpgroup tiles:
resnet-50's 7x7 maps at batch 16 (``P = 784`` -> 832, 6%) qualify; 14x14 at batch 1
(``P = 196`` -> 256, 23%) keep 16-row fragments (208)."""
SPLIT_K_MIN_DEPTH = 256
"""Each slice keeps at least this much of K (16 fragment steps of 16): below it the slice's
shared-memory pipeline barely fills and the partial sums cost more than they save."""

_LAYOUTS = {"NHWC": ("HWIO", "OHWI"), "NCHW": ("OIHW",)}
"""The kernel layouts each data layout's GEMM reads (the first is the default). OHWI gives the
NHWC GEMM a K-major weight, as the warpgroup sketch needs
(``tensorir.graph.passes.alter_op_layout_implicit_gemm`` stores constant weights so)."""


def _ceil(x: int, m: int) -> int:
    return -(-x // m) * m


def gemm_k_align(dtype: str) -> int:
    """The multiple the GEMM's K is padded to for operands of ``dtype``: the K of its fragment
    (``FRAGMENT_SHAPES``: 16 for float16 / bfloat16, 8 for float32 as TF32), else
    :data:`GEMM_ALIGN`."""
    shape = FRAGMENT_SHAPES.get(dtype)
    return shape.k if shape is not None else GEMM_ALIGN


@dataclass(frozen=True)
class ConvGemmShape:
    """The GEMM of a conv2d: ``p`` rows (output pixels), ``k`` taps, ``co`` output channels,
    each with its padded extent (``p`` and ``co`` a multiple of :data:`GEMM_ALIGN`, ``k`` of
    ``k_align``: the fragment's K, :func:`gemm_k_align`)."""

    p: int
    k: int
    co: int
    k_align: int = GEMM_ALIGN
    p_align: int = GEMM_ALIGN

    @property
    def padded(self) -> tuple[int, int, int]:
        return (
            _ceil(self.p, self.p_align),
            _ceil(self.k, self.k_align),
            _ceil(self.co, GEMM_ALIGN),
        )

    @property
    def waste(self) -> float:
        """The largest fraction of padding along one GEMM axis (0: no padding)."""
        return max((q - x) / q for x, q in zip((self.p, self.k, self.co), self.padded))


def gemm_row_align(p: int, warpgroup: bool) -> int:
    """The multiple the GEMM's ``p`` rows are padded to: :data:`WARPGROUP_ROWS` for a
    ``warpgroup`` target (sm_90, whose warpgroup sketch tiles 64 rows at a time) where that
    wastes at most :data:`WARPGROUP_ROW_WASTE` of the rows, else :data:`GEMM_ALIGN`."""
    whole = _ceil(p, WARPGROUP_ROWS)
    return WARPGROUP_ROWS if warpgroup and whole - p <= WARPGROUP_ROW_WASTE * whole else GEMM_ALIGN


def split_k_slices(shape: ConvGemmShape) -> int:
    """How many slices of K the implicit GEMM of ``shape`` is computed in (1: not split).

    The smallest ``S`` that gives :data:`SPLIT_K_MIN_TILES` 16x16 output tiles, among those
    that cut the padded K into whole fragment steps of at least :data:`SPLIT_K_MIN_DEPTH`
    (the largest such ``S`` where none reaches it). resnet-18 at batch 1: 7x7 maps with
    ``K = 4608`` get 16 slices, 14x14 ones 9, 28x28 ones 4, 56x56 ones 2, the 1x1 convs none.
    """
    pp, kp, cop = shape.padded
    tiles = (pp // GEMM_ALIGN) * (cop // GEMM_ALIGN)
    steps = kp // shape.k_align
    best = 1
    for slices in range(2, steps + 1):
        if tiles * best >= SPLIT_K_MIN_TILES or kp // slices < SPLIT_K_MIN_DEPTH:
            break
        if steps % slices == 0:
            best = slices
    return best


def _params(strides, padding, dilation):
    s = as_tuple(strides, 2, "conv2d_gemm", "strides")
    d = as_tuple(dilation, 2, "conv2d_gemm", "dilation")
    before, after = spatial_padding(padding, 2, "conv2d_gemm")
    return s, d, before, after


def _dims(data_shape, weight_shape, layout: str, kernel_layout: str = ""):
    """``(N, H, W, CI), (KH, KW, WCI, CO)`` from any of the layouts :data:`_LAYOUTS` lists
    (an empty ``kernel_layout``: the data layout's default)."""
    d = dict(zip(layout, data_shape))
    w = dict(zip(kernel_layout or _LAYOUTS[layout][0], weight_shape))
    return (d["N"], d["H"], d["W"], d["C"]), (w["H"], w["W"], w["I"], w["O"])


def conv2d_gemm_shape(
    data_shape,
    weight_shape,
    strides,
    padding,
    dilation,
    data_layout: str,
    dtype: str = "float16",
    kernel_layout: str = "",
    warpgroup: bool = False,
) -> ConvGemmShape:
    """The GEMM extents of a ``groups == 1`` conv2d in ``data_layout`` (NHWC with an HWIO or
    OHWI kernel, NCHW/OIHW) with operands of ``dtype`` (which sets K's padding), its rows
    padded for ``warpgroup`` tiles where that pays (:func:`gemm_row_align`)."""
    (sh, sw), (dh, dw), before, after = _params(strides, padding, dilation)
    (n, h, w, ci), (kh, kw, _, co) = _dims(data_shape, weight_shape, data_layout, kernel_layout)
    oh = conv_out_size(h, kh, sh, dh, before[0] + after[0])
    ow = conv_out_size(w, kw, sw, dw, before[1] + after[1])
    p = n * oh * ow
    rows = gemm_row_align(p, warpgroup and data_layout == "NHWC")  # NCHW: P is the GEMM's j
    return ConvGemmShape(p, ci * kh * kw, co, gemm_k_align(dtype), rows)


def use_implicit_gemm(
    data_shape,
    weight_shape,
    strides,
    padding,
    dilation,
    groups: int,
    data_layout: str,
    kernel_layout: str,
    dtype: str,
    dtypes=LOW_PRECISION,
) -> bool:
    """Whether a conv2d runs as :func:`conv2d_implicit_gemm` on tensor cores.

    The rule: operands of one of ``dtypes`` (the 16-bit floats; the network partition adds
    float32 for a target that allows TF32), ``groups == 1``, NHWC/HWIO, NHWC/OHWI or
    NCHW/OIHW, and
    padding the GEMM to whole fragments wastes at most :data:`IGEMM_MAX_PAD` of any axis
    (resnet's 7x7 maps at batch 1 have ``P = 49``, padded to 64: 23%). The others keep the
    direct conv2d and the scalar sketches.

    Any channel count qualifies. An RGB stem (3 channels, 7x7: ``K = 147`` padded to 160)
    gathers its operand one element at a time, as a k tile of 16 spans several kernel taps,
    yet the tensor cores still win: resnet-18's stem in float16 took 15.8 us as a direct conv
    and 8.5-10.6 us as an implicit GEMM on an H100 (benchmarks/RESULTS.md).
    """
    if dtype not in dtypes or dtype not in FRAGMENT_SHAPES or groups != 1:
        return False
    kernels = _LAYOUTS.get(data_layout, ())
    if not kernels or (kernel_layout or kernels[0]) not in kernels:
        return False
    (_, _, _, ci), (_, _, wci, _) = _dims(data_shape, weight_shape, data_layout, kernel_layout)
    if ci != wci:
        return False
    shape = conv2d_gemm_shape(
        data_shape, weight_shape, strides, padding, dilation, data_layout, dtype, kernel_layout
    )
    return shape.waste <= IGEMM_MAX_PAD


def conv2d_implicit_gemm(
    data: Tensor,
    weight: Tensor,
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    data_layout: str = "NHWC",
    out_dtype: str = "",
    split_k: int = 1,
    kernel_layout: str = "",
    warpgroup: bool = False,
) -> Tensor:
    """A ``groups == 1`` conv2d computed as the GEMM of the module docstring.

    Parameters
    ----------
    data, weight : Tensor
        NHWC data with an HWIO or OHWI kernel, or NCHW data with an OIHW kernel.
    strides, padding, dilation : int or tuple of int
        As :func:`tensorir.ops.conv2d`.
    data_layout : "NHWC" or "NCHW"
    out_dtype : str
        Accumulation and output dtype; empty means the input dtype.
    split_k : int
        Compute the GEMM in this many slices of K, added by the output stage (module
        docstring); it must divide the padded K into whole fragment steps. 1: not split;
        :func:`split_k_slices` gives the rule's choice.
    kernel_layout : str
        The weight's layout (empty: the data layout's default, HWIO or OIHW). An OHWI weight
        makes the NHWC GEMM's second operand K-major (module docstring).
    warpgroup : bool
        Pad the GEMM's rows for 64-row warpgroup tiles (sm_90) where that wastes little
        (:func:`gemm_row_align`); NHWC only, as an NCHW GEMM's pixels are its columns.

    Returns
    -------
    Tensor
        ``conv2d(data, weight, ...)``: NHWC ``(N, OH, OW, CO)`` or NCHW ``(N, CO, OH, OW)``.
    """
    if data_layout not in _LAYOUTS:
        raise TensorError(
            f"conv2d_gemm: data_layout {data_layout!r} is not supported; use 'NHWC' or 'NCHW'"
        )
    kernel_layout = kernel_layout or _LAYOUTS[data_layout][0]
    if kernel_layout not in _LAYOUTS[data_layout]:
        raise TensorError(
            f"conv2d_gemm: kernel_layout {kernel_layout!r} does not go with data_layout "
            f"{data_layout!r}; use one of {list(_LAYOUTS[data_layout])}"
        )
    (sh, sw), (dh, dw), before, after = _params(strides, padding, dilation)
    (N, H, W, CI), (KH, KW, WCI, CO) = _dims(data.shape, weight.shape, data_layout, kernel_layout)
    if WCI != CI:
        raise TensorError(
            f"conv2d_gemm: the weight has {WCI} input channels and the data {CI}; the "
            "implicit GEMM takes groups=1 only (use tensorir.ops.conv2d)"
        )
    out_dtype = out_dtype or data.dtype
    OH = conv_out_size(H, KH, sh, dh, before[0] + after[0])
    OW = conv_out_size(W, KW, sw, dw, before[1] + after[1])
    OHW = OH * OW
    nhwc = data_layout == "NHWC"
    shape = conv2d_gemm_shape(
        data.shape, weight.shape, strides, padding, dilation, data_layout, data.dtype,
        kernel_layout, warpgroup,
    )  # fmt: skip
    PP, KP, COP = shape.padded
    k_major = kernel_layout != "HWIO"  # W2[co, r]: the weight's taps contiguous per channel
    zero = te.const(0.0, data.dtype)

    def taps(r):  # (rc, ry, rx) of tap r: the stored kernel's order
        if nhwc:
            return r % CI, r // (KW * CI), r // CI % KW
        return r // (KH * KW), r // KW % KH, r % KW

    def fcol(p, r):
        n, oh, ow = p // OHW, p // OW % OH, p % OW
        rc, ry, rx = taps(r)
        ih = tap(oh, ry, sh, dh) - before[0] if before[0] else tap(oh, ry, sh, dh)
        iw = tap(ow, rx, sw, dw) - before[1] if before[1] else tap(ow, rx, sw, dw)
        # Only the bounds a tap can cross (none for an unpadded 1x1 conv: a plain gather).
        conds = [ih >= 0] if before[0] else []
        conds += [ih < H] if (OH - 1) * sh + (KH - 1) * dh - before[0] >= H else []
        conds += [iw >= 0] if before[1] else []
        conds += [iw < W] if (OW - 1) * sw + (KW - 1) * dw - before[1] >= W else []
        conds += [p < shape.p] if shape.p != PP else []
        conds += [r < shape.k] if shape.k != KP else []
        value = data[(n, ih, iw, rc) if nhwc else (n, rc, ih, iw)]
        return te.if_then_else(te.all(*conds), value, zero) if conds else value

    def fw2(co, r):
        rc, ry, rx = taps(r)
        axis = {"O": co, "I": rc, "H": ry, "W": rx}
        value = weight[tuple(axis[c] for c in kernel_layout)]
        conds = [co < CO] if COP != CO else []
        conds += [r < shape.k] if shape.k != KP else []
        return te.if_then_else(te.all(*conds), value, zero) if conds else value

    steps = KP // shape.k_align
    if not isinstance(split_k, int) or split_k < 1 or steps % split_k:
        raise TensorError(
            f"conv2d_gemm: split_k={split_k!r} does not cut K = {KP} into whole fragment steps "
            f"of {shape.k_align}; pass a divisor of {steps} (1: no split)"
        )
    S, KS = split_k, KP // split_k

    def rd(t, idx):
        return cast_to(t[idx], out_dtype)

    def pixel(n, oh, ow):  # the GEMM row of an output pixel (no n term at batch 1: the
        # NCHW output then reads gemm[co, oh*OW + ow], a loop fusion of its last two axes)
        return (n * OH + oh) * OW + ow if N > 1 else oh * OW + ow

    def summed(read):  # the output: the GEMM, or the sum of its S slices
        if S == 1:
            return read(())
        total = read((0,))
        for k in range(1, S):
            total = total + read((k,))
        return total

    # Each operand with a leading slice axis when split (r = s*KS + r'); the GEMM reads it as
    # a batch_matmul over s.
    lead, lead_names = ((S,), ["s"]) if S > 1 else ((), [])

    def tap_of(sl, r):
        return sl[0] * KS + r if sl else r

    col = compute((*lead, PP, KS), lambda *a: fcol(a[-2], tap_of(a[:-2], a[-1])),
                  "data_im2col", [*lead_names, "p", "r"], tag="injective,im2col")  # fmt: skip
    rk = te.reduce_axis((0, KS), name="rk")
    if k_major:
        w2 = compute((*lead, COP, KS), lambda *a: fw2(a[-2], tap_of(a[:-2], a[-1])),
                     "kernel_gemm", [*lead_names, "co", "r"], tag="injective")  # fmt: skip
    else:
        w2 = compute((*lead, KS, COP), lambda *a: fw2(a[-1], tap_of(a[:-2], a[-2])),
                     "kernel_gemm", [*lead_names, "r", "co"], tag="injective")  # fmt: skip

    def w2_at(lead_idx, co):
        return (*lead_idx, co, rk) if k_major else (*lead_idx, rk, co)

    if nhwc:
        gemm = compute(
            (*lead, PP, COP),
            lambda *a: te.sum(rd(col, (*a[:-2], a[-2], rk)) * rd(w2, w2_at(a[:-2], a[-1])), [rk]),
            "conv2d_gemm",
            [*lead_names, "p", "co"],
            tag=GEMM_TAG,
        )
        return compute(
            (N, OH, OW, CO),
            lambda n, oh, ow, co: summed(lambda sl: gemm[(*sl, pixel(n, oh, ow), co)]),
            "conv2d_gemm_nhwc",
            ["nn", "yy", "xx", "ff"],
            tag="conv2d_nhwc,conv2d_gemm",
        )
    gemm = compute(
        (*lead, COP, PP),
        lambda *a: te.sum(rd(w2, (*a[:-2], a[-2], rk)) * rd(col, (*a[:-2], a[-1], rk)), [rk]),
        "conv2d_gemm",
        [*lead_names, "co", "p"],
        tag=GEMM_TAG,
    )
    return compute(
        (N, CO, OH, OW),
        lambda n, co, oh, ow: summed(lambda sl: gemm[(*sl, co, pixel(n, oh, ow))]),
        "conv2d_gemm_nchw",
        ["nn", "ff", "yy", "xx"],
        tag="conv2d_nchw,conv2d_gemm",
    )


def implicit_gemm_conv2d_op(
    data: Tensor,
    weight: Tensor,
    attrs,
    dtypes=LOW_PRECISION,
    split_k: int | None = None,
    warpgroup: bool = False,
) -> Tensor | None:
    """The implicit-GEMM compute of Relay's ``nn.conv2d`` with ``attrs`` (as
    ``tensorir.ops.op_attrs`` fills them) when :func:`use_implicit_gemm` accepts it for operand
    ``dtypes``, else None (the caller builds the direct conv2d). The operand dtype decides:
    ``to_mixed_precision`` gives a float16 conv ``out_dtype="float32"``, which the GEMM
    accumulates in; a float32 conv (``dtypes`` with float32: TF32) accumulates in float32.
    ``split_k`` slices of K (None: :func:`split_k_slices`' choice); ``warpgroup``: rows padded
    for sm_90's 64-row tiles (:func:`gemm_row_align`)."""
    a = attrs
    if not use_implicit_gemm(
        data.shape, weight.shape, a["strides"], a["padding"], a["dilation"], a["groups"],
        a["data_layout"], a["kernel_layout"], data.dtype, dtypes,
    ):  # fmt: skip
        return None
    if weight.dtype != data.dtype:
        return None
    if split_k is None:
        split_k = split_k_slices(conv2d_gemm_shape(
            data.shape, weight.shape, a["strides"], a["padding"], a["dilation"],
            a["data_layout"], data.dtype, a["kernel_layout"], warpgroup,
        ))  # fmt: skip
    return conv2d_implicit_gemm(
        data,
        weight,
        a["strides"],
        a["padding"],
        a["dilation"],
        a["data_layout"],
        a["out_dtype"],
        split_k,
        a["kernel_layout"],
        warpgroup,
    )
