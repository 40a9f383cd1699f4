"""ONNX converters for what U-Nets, 1-D convnets and RNNs export (issue 26): ConvTranspose,
Conv on NCW, InstanceNormalization, GroupNormalization, Resize / Upsample, LSTM and GRU.

Registered into ``onnx_ops.CONVERTERS`` when ``onnx_frontend`` imports this module.

- 1-D convolutions (Conv, ConvTranspose on NCW) become their 2-D op on an (N, C, 1, W) view:
  one set of kernels, and the NHWC pass and tuning treat them as any 2-D conv.
- LSTM and GRU are unrolled over the static sequence into graph ops: one ``nn.dense`` projects
  the whole input sequence of a direction at once (biases folded), then each step is a dense
  of the hidden state, ``strided_slice`` of the gates, sigmoid / tanh and element-wise
  arithmetic; Y stacks the steps with ``concatenate``. A loop op would keep graphs small for
  long sequences, but unrolled steps fuse and tune like any dense network, and the sequences
  exported for inference are short. The weights must be known at import time (initializers).
"""

from __future__ import annotations

import numpy as np

from . import image, nn, op
from .ir import Call, Constant, Expr, Function, calls, rewrite
from .onnx_ops import CONVERTERS, MULTI_OUTPUT, Node, _pads, _register

# --- convolutions ----------------------------------------------------------------------------

_CONV_ND = CONVERTERS["Conv"][0]  # 2-D and 3-D: onnx_ops


def _weight_view(node: Node, i: int, shape) -> Expr:
    """Input ``i`` reshaped: folded into a parameter ``<name>_2d`` when known at import time."""
    v = node.value(i)
    if v.static is None:
        return op.reshape(v.expr, shape)
    return node.imp.derived(v, "_2d", np.ascontiguousarray(v.static.reshape(shape)))


def _rank(node: Node, x: Expr, ranks) -> int:
    if len(x.shape) not in ranks:
        dims = {3: "3-D (NCW)", 4: "4-D (NCHW)", 5: "5-D (NCDHW)"}
        node.fail(
            f"a {len(x.shape)}-D input (shape {x.shape}) is not supported; supported: "
            f"{', '.join(dims[r] for r in ranks)} tensors"
        )
    return len(x.shape)


@_register("Conv", "auto_pad dilations group kernel_shape pads strides")
def _conv(node: Node):
    """Conv on NCW as a conv2d on (N, C, 1, W); 2-D and 3-D as onnx_ops converts them."""
    x = node.expr(0)
    if _rank(node, x, (3, 4, 5)) != 3:
        return _CONV_ND(node)
    wshape = node.value(1).shape
    kernel = (wshape[2],)
    given = node.attr("kernel_shape")
    if given is not None and tuple(given) != kernel:
        node.fail(f"kernel_shape={list(given)} does not match the weight's {kernel}")
    strides = node.positive_ints("strides", 1, 1)
    dil = node.positive_ints("dilations", 1, 1)
    pads = _pads(node, x.shape[2:], kernel, strides, dil)
    n, c, w = x.shape
    y = nn.conv2d(
        op.reshape(x, (n, c, 1, w)), _weight_view(node, 1, (wshape[0], wshape[1], 1, wshape[2])),
        strides=(1, strides[0]), padding=(0, pads[0], 0, pads[1]), dilation=(1, dil[0]),
        groups=node.attr("group", 1),
    )  # fmt: skip
    if node.has(2):
        y = nn.bias_add(y, node.expr(2), axis=1)
    return op.reshape(y, (y.shape[0], y.shape[1], y.shape[3]))


@_register(
    "ConvTranspose",
    "auto_pad dilations group kernel_shape output_padding output_shape pads strides",
)
def _conv_transpose(node: Node):
    x = node.expr(0)
    rank = _rank(node, x, (3, 4))
    nsp = rank - 2
    wshape = node.value(1).shape
    kernel = tuple(wshape[2:])
    given = node.attr("kernel_shape")
    if given is not None and tuple(given) != kernel:
        node.fail(f"kernel_shape={list(given)} does not match the weight's {kernel}")
    strides = node.positive_ints("strides", nsp, 1)
    dil = node.positive_ints("dilations", nsp, 1)
    out_pad = node.ints("output_padding", nsp, 0)
    pads = _transpose_pads(node, x.shape[2:], kernel, strides, dil, out_pad)
    group = node.attr("group", 1)
    if nsp == 1:
        n, c, w = x.shape
        x = op.reshape(x, (n, c, 1, w))
        weight = _weight_view(node, 1, (wshape[0], wshape[1], 1, wshape[2]))
        strides, dil, out_pad = (1,) + strides, (1,) + dil, (0,) + out_pad
        pads = (0, pads[0], 0, pads[1])
    else:
        weight = node.expr(1)
    y = nn.conv2d_transpose(x, weight, strides=strides, padding=pads, output_padding=out_pad,
                            dilation=dil, groups=group)  # fmt: skip
    if node.has(2):
        y = nn.bias_add(y, node.expr(2), axis=1)
    if nsp == 1:
        y = op.reshape(y, (y.shape[0], y.shape[1], y.shape[3]))
    return y


def _transpose_pads(node: Node, sizes, kernel, strides, dil, out_pad) -> tuple[int, ...]:
    """ONNX's pads of a ConvTranspose: given, or from ``output_shape`` / ``auto_pad``."""
    n = len(sizes)
    mode = node.attr("auto_pad", "NOTSET")
    if mode not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        node.unsupported("auto_pad", mode, ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))
    target = node.attr("output_shape")
    if target is None and mode in ("NOTSET", "VALID"):
        pads = node.ints("pads", 2 * n, 0) if mode == "NOTSET" else (0,) * (2 * n)
        if any(p < 0 for p in pads):
            node.fail(f"negative pads {list(pads)} are not supported")
        return pads
    if target is not None:
        target = tuple(int(t) for t in target)[-n:]
    else:
        target = tuple(s * st for s, st in zip(sizes, strides))
    before, after = [], []
    for j in range(n):
        full = strides[j] * (sizes[j] - 1) + out_pad[j] + (kernel[j] - 1) * dil[j] + 1
        total = full - target[j]
        if total < 0:
            what = "output_shape" if node.attr("output_shape") is not None else f"auto_pad={mode}"
            node.fail(
                f"the output size {list(target)} ({what}) is larger than the full output of "
                f"spatial dim {j} ({full}); padding the output is not supported"
            )
        small, big = total // 2, total - total // 2
        before.append(small if mode == "SAME_UPPER" else big)
        after.append(big if mode == "SAME_UPPER" else small)
    return tuple(before + after)


# --- normalizations --------------------------------------------------------------------------


@_register("InstanceNormalization", "epsilon")
def _instance_norm(node: Node):
    x = node.expr(0)
    if len(x.shape) < 3:
        node.fail(f"needs an (N, C, ...) input with spatial dims, got shape {x.shape}")
    eps = float(node.attr("epsilon", 1e-5))
    folded = _decomposed_group_norm(node, x, eps)
    if folded is not None:
        return folded
    return nn.instance_norm(x, node.expr(1), node.expr(2), axis=1, epsilon=eps)


def _decomposed_group_norm(node: Node, x: Expr, eps: float) -> Expr | None:
    """torch's GroupNorm before opset 18, ``Reshape(x, (N, G, -1)) -> InstanceNormalization``,
    as ``reshape(group_norm(x))``: the Reshape back that follows cancels against it
    (:func:`drop_reshape_round_trips`), so the norm stays on the 4-D tensor and follows the
    NHWC pass instead of pinning it to NCHW between two layout transforms."""
    if not (isinstance(x, Call) and x.op == "reshape"):
        return None
    src = x.args[0]
    if len(x.shape) != 3 or len(src.shape) < 3 or x.shape[0] != src.shape[0]:
        return None
    groups, channels = x.shape[1], src.shape[1]
    scale, bias = node.value(1), node.value(2)
    if channels % groups or scale.static is None or bias.static is None:
        return None
    rep = channels // groups
    gamma = node.imp.derived(scale, "_per_channel", np.repeat(scale.static, rep))
    beta = node.imp.derived(bias, "_per_channel", np.repeat(bias.static, rep))
    norm = nn.group_norm(src, gamma, beta, num_groups=groups, axis=1, epsilon=eps)
    return op.reshape(norm, x.shape)


def drop_reshape_round_trips(func: Function) -> Function:
    """``reshape(reshape(y, s), y.shape)`` -> ``y`` (same parameters). Row-major reshapes
    compose, so this is exact; the importer runs it for the GroupNorm pattern above."""

    def round_trip(node, arg) -> bool:
        return (
            isinstance(node, Call) and node.op == "reshape" and isinstance(arg, Call)
            and arg.op == "reshape" and arg.args[0].shape == node.shape
        )  # fmt: skip

    if not any(round_trip(c, c.args[0]) for c in calls(func)):
        return func  # nothing to drop: the very same Function
    new = rewrite(func, lambda n, a: a[0].args[0] if a and round_trip(n, a[0]) else None)
    return Function(func.params, new.body, func.name)


@_register("GroupNormalization", "epsilon num_groups stash_type")
def _group_norm(node: Node):
    x = node.expr(0)
    groups = node.attr("num_groups")
    if groups is None:
        node.fail("attribute num_groups is required")
    if node.attr("stash_type", 1) != 1:
        node.unsupported("stash_type", node.attr("stash_type"), [1])
    if len(x.shape) < 3 or x.shape[1] % groups:
        node.fail(f"num_groups={groups} must divide the channels of an (N, C, ...) input {x.shape}")
    c = x.shape[1]
    vecs = []
    for i, what in ((1, "scale"), (2, "bias")):
        v = node.value(i)
        if v.shape == (c,):
            vecs.append(node.imp.expr(v))
        elif v.shape == (groups,):  # opset 18: one value per group, repeated per channel
            vec = node.static(i, f"{what} of shape (num_groups,)")
            vecs.append(node.imp.derived(v, "_per_channel", np.repeat(vec, c // groups)))
        else:
            node.fail(f"{what} must have shape ({c},) or ({groups},), got {v.shape}")
    eps = float(node.attr("epsilon", 1e-5))
    return nn.group_norm(x, vecs[0], vecs[1], num_groups=groups, axis=1, epsilon=eps)


# --- resize ----------------------------------------------------------------------------------

_RESIZE_MODES = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}
_COORD_MODES = (
    "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
)  # fmt: skip
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _optional_static(node: Node, i: int, what: str):
    """Input ``i`` as a flat array, or None when absent or empty (exporters pass '' or [])."""
    if not node.has(i):
        return None
    arr = np.asarray(node.static(i, what)).reshape(-1)
    return arr if arr.size else None


def _resize_dims(node: Node, shape, scales, sizes):
    """(out sizes, scales or None) of the H, W dims, checking that N and C stay."""
    rank = len(shape)
    axes = node.attr("axes")
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    out, full_scales = list(shape), [1.0] * rank
    if sizes is not None:
        if len(sizes) != len(axes):
            node.fail(f"sizes {list(sizes)} must have one value per axis {axes}")
        policy = node.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            node.unsupported("keep_aspect_ratio_policy", policy, ["stretch"])
        for a, s in zip(axes, sizes):
            out[a] = int(s)
        full_scales = None
    elif scales is not None:
        if len(scales) != len(axes):
            node.fail(f"scales {list(scales)} must have one value per axis {axes}")
        for a, s in zip(axes, scales):
            if s <= 0:
                node.fail(f"scales {list(scales)} must be positive")
            full_scales[a] = float(s)
            out[a] = int(np.floor(shape[a] * np.float32(s)))
    else:
        node.fail("needs scales or sizes")
    if out[:2] != list(shape[:2]):
        node.fail(f"resizing the N or C dims ({list(shape)} -> {out}) is not supported")
    spatial = full_scales[2:] if full_scales is not None else None
    return out[2:], spatial


def _resize(node: Node, x: Expr, out_sizes, scales, mode, coord, nearest, cubic_a):
    rank = len(x.shape)
    if rank == 3:  # (N, C, W) as (N, C, 1, W)
        x = op.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
        out_sizes = [1] + list(out_sizes)
        scales = None if scales is None else [1.0] + list(scales)
    elif rank != 4:
        node.fail(f"a {rank}-D input is not supported; supported: 3-D (NCW) and 4-D (NCHW)")
    y = image.resize2d(
        x, tuple(out_sizes), layout="NCHW", method=_RESIZE_MODES[mode],
        coordinate_transformation_mode=coord, rounding_method=nearest, cubic_alpha=cubic_a,
        scales=None if scales is None else tuple(scales),
    )  # fmt: skip
    if rank == 3:
        y = op.reshape(y, (y.shape[0], y.shape[1], y.shape[3]))
    return y


@_register(
    "Resize",
    "antialias axes coordinate_transformation_mode cubic_coeff_a exclude_outside "
    "extrapolation_value keep_aspect_ratio_policy mode nearest_mode",
)
def _resize_node(node: Node):
    x = node.expr(0)
    mode = node.attr("mode", "nearest")
    if mode not in _RESIZE_MODES:
        node.unsupported("mode", mode, list(_RESIZE_MODES))
    if node.attr("antialias", 0):
        node.unsupported("antialias", node.attr("antialias"), [0])
    if mode == "cubic" and node.attr("exclude_outside", 0):
        node.unsupported("exclude_outside", node.attr("exclude_outside"), [0])
    if node.opset < 11:  # Resize-10: (X, scales), asymmetric, Upsample's nearest rule
        coord, nearest = "asymmetric", None
        scales, sizes = _optional_static(node, 1, "scales"), None
    else:
        coord = node.attr("coordinate_transformation_mode", "half_pixel")
        nearest = node.attr("nearest_mode", "round_prefer_floor")
        scales = _optional_static(node, 2, "scales")
        sizes = _optional_static(node, 3, "sizes")
    if coord not in _COORD_MODES:
        node.unsupported("coordinate_transformation_mode", coord, _COORD_MODES)
    if mode == "nearest" and nearest is not None and nearest not in _NEAREST_MODES:
        node.unsupported("nearest_mode", nearest, _NEAREST_MODES)
    out_sizes, spatial_scales = _resize_dims(node, x.shape, scales, sizes)
    if nearest is None:
        nearest = _simple_nearest(node, spatial_scales) if mode == "nearest" else ""
    cubic_a = float(node.attr("cubic_coeff_a", -0.75))
    return _resize(node, x, out_sizes, spatial_scales, mode, coord, nearest, cubic_a)


def _simple_nearest(node: Node, scales) -> str:
    """Upsample's and Resize-10's nearest: the source index rounds down when upsampling and
    up when downsampling (onnxruntime's "simple" mode), one rule for both dims here."""
    down = {s < 1 for s in scales}
    if len(down) > 1:
        node.fail(
            f"nearest with spatial scales {list(scales)} that upsample one dim and downsample "
            "the other is not supported before opset 11"
        )
    return "ceil" if down.pop() else "floor"


@_register("Upsample", "mode scales")
def _upsample(node: Node):
    x = node.expr(0)
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        node.unsupported("mode", mode, ["nearest", "linear"])
    scales = node.attr("scales")  # opset 7-8: attribute; 9: input
    if node.has(1):
        scales = node.static(1, "scales").reshape(-1)
    if scales is None:
        node.fail("needs scales (attribute before opset 9, input from 9 on)")
    out_sizes, spatial_scales = _resize_dims(node, x.shape, [float(s) for s in scales], None)
    nearest = _simple_nearest(node, spatial_scales) if mode == "nearest" else ""
    return _resize(node, x, out_sizes, spatial_scales, mode, "asymmetric", nearest, -0.75)


# --- recurrent layers ------------------------------------------------------------------------

_RNN_ATTRS = "activation_alpha activation_beta activations clip direction hidden_size layout "
_DIRECTIONS = ("forward", "reverse", "bidirectional")


class _Rnn:
    """What LSTM and GRU share: inputs, per-direction weights, initial states, output stacking."""

    def __init__(self, node: Node, n_gates: int, activations: tuple[str, ...]):
        self.node = node
        direction = node.attr("direction", "forward")
        if direction not in _DIRECTIONS:
            node.unsupported("direction", direction, _DIRECTIONS)
        self.reverse = {"forward": (False,), "reverse": (True,),
                        "bidirectional": (False, True)}[direction]  # fmt: skip
        nd = len(self.reverse)
        given = node.attr("activations")
        if given is not None and tuple(given) != activations * nd:
            node.unsupported("activations", list(given), [list(activations * nd)])
        self.layout = node.attr("layout", 0)
        if self.layout not in (0, 1):
            node.unsupported("layout", self.layout, [0, 1])
        x = node.expr(0)
        if len(x.shape) != 3:
            node.fail(f"X must be 3-D, got shape {x.shape}")
        self.x = op.transpose(x, (1, 0, 2)) if self.layout else x
        self.seq, self.batch, inp = self.x.shape
        w = node.static(1, "W")
        r = node.static(2, "R")
        self.hidden = h = r.shape[-1]
        if node.attr("hidden_size", h) != h:
            node.fail(f"hidden_size={node.attr('hidden_size')} but R has {h} columns")
        gh = n_gates * h
        if w.shape != (nd, gh, inp) or r.shape != (nd, gh, h):
            node.fail(
                f"W {w.shape} and R {r.shape} must be ({nd}, {gh}, {inp}) and ({nd}, {gh}, {h}) "
                f"for direction={direction}, hidden size {h} and input size {inp}"
            )
        self.w, self.r = w, r
        b = node.static(3, "B") if node.has(3) else np.zeros((nd, 2 * gh), w.dtype)
        if b.shape != (nd, 2 * gh):
            node.fail(f"B must have shape ({nd}, {2 * gh}), got {b.shape}")
        self.wb, self.rb = b[:, :gh], b[:, gh:]
        if node.has(4):
            lens = node.static(4, "sequence_lens").reshape(-1)
            if np.any(lens != self.seq):
                node.fail(
                    f"sequence_lens {lens.tolist()} shorter than the sequence ({self.seq}) are "
                    "not supported; only full-length sequences"
                )
        clip = node.attr("clip")
        self.clip = None if clip is None else float(clip)

    def param(self, i: int, suffix: str, value: np.ndarray) -> Expr:
        """A slice of an initializer input as a parameter ``<name><suffix>``."""
        return self.node.imp.derived(self.node.value(i), suffix, np.ascontiguousarray(value))

    def initial(self, i: int, d: int) -> Expr | None:
        """Direction ``d``'s initial state (B, H) from input ``i``; None when absent or zero."""
        node = self.node
        if not node.has(i):
            return None
        v = node.value(i)
        nd, b, h = len(self.reverse), self.batch, self.hidden
        want = (b, nd, h) if self.layout else (nd, b, h)
        if v.shape != want:
            node.fail(f"input {i} ({node.proto.input[i]!r}) must have shape {want}, got {v.shape}")
        if v.static is not None:
            s = v.static[:, d] if self.layout else v.static[d]
            return None if not np.any(s) else Constant(np.ascontiguousarray(s))
        s = op.strided_slice(v.expr, (d,), (d + 1,), axes=(1 if self.layout else 0,))
        return op.reshape(s, (b, h))

    def projection(self, d: int, bias: np.ndarray) -> Expr:
        """The input projection of every step at once: (S * B, G * H), bias added."""
        flat = op.reshape(self.x, (self.seq * self.batch, self.x.shape[2]))
        y = nn.dense(flat, self.param(1, f"_{d}", self.w[d]))
        if np.any(bias):
            y = nn.bias_add(y, Constant(bias.astype(self.w.dtype)), axis=1)
        return y

    def step_input(self, xw: Expr, t: int) -> Expr:
        b = self.batch
        return op.strided_slice(xw, (t * b,), ((t + 1) * b,), axes=(0,))

    def gate(self, pre: Expr, k: int) -> Expr:
        h = self.hidden
        return op.strided_slice(pre, (k * h,), ((k + 1) * h,), axes=(1,))

    def act(self, fn, pre: Expr) -> Expr:
        """An activation of a gate's full pre-activation, clipped first if ``clip`` is set."""
        return fn(pre if self.clip is None else op.clip(pre, -self.clip, self.clip))

    def steps(self, d: int):
        return range(self.seq - 1, -1, -1) if self.reverse[d] else range(self.seq)

    def stack(self, per_dir: list[dict[int, Expr]]) -> Expr:
        """Y (S, D, B, H) (layout 1: (B, S, D, H)) from each direction's {t: H_t}."""
        b, h = self.batch, self.hidden
        rows = []
        for t in range(self.seq):
            parts = [op.reshape(hs[t], (1, 1, b, h)) for hs in per_dir]
            rows.append(parts[0] if len(parts) == 1 else op.concatenate(parts, axis=1))
        y = rows[0] if len(rows) == 1 else op.concatenate(rows, axis=0)
        return op.transpose(y, (2, 0, 1, 3)) if self.layout else y

    def last(self, states: list[Expr]) -> Expr:
        """Y_h / Y_c (D, B, H) (layout 1: (B, D, H)) from each direction's final state."""
        parts = [op.reshape(s, (1, self.batch, self.hidden)) for s in states]
        y = parts[0] if len(parts) == 1 else op.concatenate(parts, axis=0)
        return op.transpose(y, (1, 0, 2)) if self.layout else y


def _mul_add(a: Expr, b: Expr | None, c: Expr | None) -> Expr:
    """a + b * c, or a where b or c is a zero state (None)."""
    return a if b is None or c is None else op.add(a, op.multiply(b, c))


@_register("LSTM", _RNN_ATTRS + "input_forget")
def _lstm(node: Node):
    rnn = _Rnn(node, 4, ("Sigmoid", "Tanh", "Tanh"))
    if node.attr("input_forget", 0):
        node.unsupported("input_forget", node.attr("input_forget"), [0])
    h = rnn.hidden
    peep = node.static(7, "P") if node.has(7) else None
    if peep is not None and peep.shape != (len(rnn.reverse), 3 * h):
        node.fail(f"P must have shape ({len(rnn.reverse)}, {3 * h}), got {peep.shape}")
    ys, last_h, last_c = [], [], []
    for d in range(len(rnn.reverse)):
        xw = rnn.projection(d, rnn.wb[d] + rnn.rb[d])
        rw = rnn.param(2, f"_{d}", rnn.r[d])
        pi, po, pf = (
            [None] * 3 if peep is None or not np.any(peep[d])
            else [Constant(np.ascontiguousarray(peep[d, k * h : (k + 1) * h])) for k in range(3)]
        )  # fmt: skip
        hid, cell = rnn.initial(5, d), rnn.initial(6, d)
        hs = {}
        for t in rnn.steps(d):
            pre = rnn.step_input(xw, t)
            if hid is not None:
                pre = op.add(pre, nn.dense(hid, rw))
            i = rnn.act(op.sigmoid, _mul_add(rnn.gate(pre, 0), pi, cell))  # order: i o f c
            f = rnn.act(op.sigmoid, _mul_add(rnn.gate(pre, 2), pf, cell))
            g = rnn.act(op.tanh, rnn.gate(pre, 3))
            new_c = op.multiply(i, g)
            cell = new_c if cell is None else op.add(op.multiply(f, cell), new_c)
            o = rnn.act(op.sigmoid, _mul_add(rnn.gate(pre, 1), po, cell))
            hid = hs[t] = op.multiply(o, op.tanh(cell))
        ys.append(hs)
        last_h.append(hid)
        last_c.append(cell)
    return [rnn.stack(ys), rnn.last(last_h), rnn.last(last_c)]


@_register("GRU", _RNN_ATTRS + "linear_before_reset")
def _gru(node: Node):
    rnn = _Rnn(node, 3, ("Sigmoid", "Tanh"))
    h = rnn.hidden
    lbr = bool(node.attr("linear_before_reset", 0))
    ys, last_h = [], []
    for d in range(len(rnn.reverse)):
        wb, rb = rnn.wb[d], rnn.rb[d]
        # The recurrent bias of the candidate gate sits inside r * (...) when linear_before_reset;
        # every other bias adds to the input projection.
        bias = wb + (np.concatenate([rb[: 2 * h], np.zeros_like(rb[2 * h :])]) if lbr else rb)
        xw = rnn.projection(d, bias)
        rh_bias = Constant(np.ascontiguousarray(rb[2 * h :])) if lbr else None
        if lbr:
            r_all = rnn.param(2, f"_{d}", rnn.r[d])
        else:
            r_zr = rnn.param(2, f"_{d}_zr", rnn.r[d, : 2 * h])
            r_h = rnn.param(2, f"_{d}_h", rnn.r[d, 2 * h :])
        hid = rnn.initial(5, d)
        hs = {}
        for t in rnn.steps(d):
            x_t = rnn.step_input(xw, t)
            rec = None
            if hid is not None:
                rec = nn.dense(hid, r_all if lbr else r_zr)
            z_pre, r_pre = rnn.gate(x_t, 0), rnn.gate(x_t, 1)
            if rec is not None:
                z_pre, r_pre = op.add(z_pre, rnn.gate(rec, 0)), op.add(r_pre, rnn.gate(rec, 1))
            z, r = rnn.act(op.sigmoid, z_pre), rnn.act(op.sigmoid, r_pre)
            cand = rnn.gate(x_t, 2)
            if lbr:
                inner = rh_bias if rec is None else op.add(rnn.gate(rec, 2), rh_bias)
                cand = op.add(cand, op.multiply(r, inner))
            elif hid is not None:
                cand = op.add(cand, nn.dense(op.multiply(r, hid), r_h))
            cand = rnn.act(op.tanh, cand)
            new = op.multiply(op.subtract(1.0, z), cand)
            hid = hs[t] = new if hid is None else op.add(new, op.multiply(z, hid))
        ys.append(hs)
        last_h.append(hid)
    return [rnn.stack(ys), rnn.last(last_h)]


MULTI_OUTPUT.update(("LSTM", "GRU"))
