"""Depthwise conv2d templates (NCHW, kernel ``(C * multiplier, 1, KH, KW)``) for llvm and
for cuda / opencl; arguments as conv2d's. dtype-generic like :mod:`.conv2d`."""

from __future__ import annotations

from tensorir.dag import ComputeDAG
from tensorir.ops.conv2d import conv2d_nchw

from ..template import get_config, template
from .epilogue import anchor
from .schedule_cpu import schedule_direct_cpu
from .schedule_gpu import schedule_direct_gpu

__all__ = ["depthwise_conv2d_nchw_cpu", "depthwise_conv2d_nchw_gpu"]


def _compute(cfg, data, kernel, strides, padding, dilation, out_dtype):
    groups = data.shape[1]
    out = conv2d_nchw(data, kernel, strides, padding, dilation, groups, out_dtype)
    n = 1
    for d in out.shape:
        n *= d
    cfg.add_flop(2 * n * kernel.shape[2] * kernel.shape[3])
    return out, ComputeDAG([data, kernel, out]).get_init_state()


def schedule_cpu(cfg, s):
    out, pad, _ = anchor(s)
    schedule_direct_cpu(
        cfg, s, out, pad,
        tiles=[("tile_c", "c"), ("tile_oh", "i"), ("tile_ow", "j")],
        vector_axis="j", reduce_split=[], unroll_axis="dj",
    )  # fmt: skip


def schedule_gpu(cfg, s):
    out, pad, reads = anchor(s)
    schedule_direct_gpu(
        cfg, s, out, pad, reads,
        tiles=[("tile_f", "c"), ("tile_y", "i"), ("tile_x", "j")],
        reduce_split=[("tile_ry", "di"), ("tile_rx", "dj")],
    )  # fmt: skip


@template("depthwise_conv2d_nchw.x86")
def depthwise_conv2d_nchw_cpu(data, kernel, strides, padding, dilation, out_dtype):
    """TOPI x86 depthwise conv2d: channel x row x column tiles, columns vectorized, the
    3x3 window unrollable (``unroll_kw``), channel blocks parallel."""
    cfg = get_config()
    out, s = _compute(cfg, data, kernel, strides, padding, dilation, out_dtype)
    schedule_cpu(cfg, s)
    return s, [data, kernel, out]


@template("depthwise_conv2d_nchw.cuda")
def depthwise_conv2d_nchw_gpu(data, kernel, strides, padding, dilation, out_dtype):
    """TOPI cuda ``schedule_depthwise_conv2d_nchw``: 4-level tiles of c, i, j; the input
    window and the filter staged in shared memory."""
    cfg = get_config()
    out, s = _compute(cfg, data, kernel, strides, padding, dilation, out_dtype)
    schedule_gpu(cfg, s)
    return s, [data, kernel, out]
