"""conv2d templates (NCHW and NHWC; fp32, and int8 inputs with int32 accumulation) for llvm
and for cuda / opencl.

The compute is the operator library's (``tensorir.ops.conv2d_nchw`` / ``conv2d_nhwc``, which
cast the operands to ``out_dtype`` before multiplying), so the same template serves every
dtype. Arguments, as TVM's ``conv2d_nchw.x86``: ``(data, kernel, strides, padding, dilation,
out_dtype)``, tensors as ``("TENSOR", shape, dtype)`` in tasks; ``padding`` is
``(top, left, bottom, right)``.
"""

from __future__ import annotations

from tensorir.dag import ComputeDAG
from tensorir.ops.conv2d import conv2d_nchw, conv2d_nhwc

from ..template import get_config, template
from .epilogue import anchor
from .schedule_cpu import schedule_direct_cpu
from .schedule_gpu import schedule_direct_gpu

__all__ = ["conv2d_nchw_cpu", "conv2d_nchw_gpu", "conv2d_nhwc_cpu", "conv2d_nhwc_gpu"]


def _nchw(data, kernel, strides, padding, dilation, out_dtype):
    out = conv2d_nchw(data, kernel, strides, padding, dilation, 1, out_dtype)
    return out, ComputeDAG([data, kernel, out]).get_init_state()


def _nhwc(data, kernel, strides, padding, dilation, out_dtype):
    out = conv2d_nhwc(data, kernel, strides, padding, dilation, 1, out_dtype)
    return out, ComputeDAG([data, kernel, out]).get_init_state()


def _flop(cfg, out, kernel_elems_per_output):
    n = 1
    for d in out.shape:
        n *= d
    cfg.add_flop(2 * n * kernel_elems_per_output)


def schedule_nchw_cpu(cfg, s):
    out, pad, _ = anchor(s)
    schedule_direct_cpu(
        cfg, s, out, pad,
        tiles=[("tile_oc", "ff"), ("tile_oh", "yy"), ("tile_ow", "xx")],
        vector_axis="xx", reduce_split=[("tile_ic", "rc")], unroll_axis="rx", pad_at_root=True,
    )  # fmt: skip


def schedule_nhwc_cpu(cfg, s):
    out, pad, _ = anchor(s)
    schedule_direct_cpu(
        cfg, s, out, pad,
        tiles=[("tile_oh", "yy"), ("tile_ow", "xx"), ("tile_oc", "ff")],
        vector_axis="ff", reduce_split=[("tile_ic", "rc")], unroll_axis="rx",
    )  # fmt: skip


def schedule_nchw_gpu(cfg, s):
    out, pad, reads = anchor(s)
    schedule_direct_gpu(
        cfg, s, out, pad, reads,
        tiles=[("tile_f", "ff"), ("tile_y", "yy"), ("tile_x", "xx")],
        reduce_split=[("tile_rc", "rc"), ("tile_ry", "ry"), ("tile_rx", "rx")],
    )  # fmt: skip


def schedule_nhwc_gpu(cfg, s):
    out, pad, reads = anchor(s)
    schedule_direct_gpu(
        cfg, s, out, pad, reads,
        tiles=[("tile_y", "yy"), ("tile_x", "xx"), ("tile_f", "ff")],
        reduce_split=[("tile_ry", "ry"), ("tile_rx", "rx"), ("tile_rc", "rc")],
    )  # fmt: skip


@template("conv2d_nchw.x86")
def conv2d_nchw_cpu(data, kernel, strides, padding, dilation, out_dtype):
    """TOPI x86 conv2d, unpacked NCHW: an (oc x ow) register tile, ow vectorized, the padded
    input computed once at the root."""
    cfg = get_config()
    out, s = _nchw(data, kernel, strides, padding, dilation, out_dtype)
    _flop(cfg, out, kernel.shape[1] * kernel.shape[2] * kernel.shape[3])
    schedule_nchw_cpu(cfg, s)
    return s, [data, kernel, out]


@template("conv2d_nhwc.x86")
def conv2d_nhwc_cpu(data, kernel, strides, padding, dilation, out_dtype):
    """TOPI x86 conv2d in NHWC: an (ow x oc) register tile, oc vectorized (contiguous in the
    output and in the HWIO kernel)."""
    cfg = get_config()
    out, s = _nhwc(data, kernel, strides, padding, dilation, out_dtype)
    _flop(cfg, out, kernel.shape[0] * kernel.shape[1] * kernel.shape[2])
    schedule_nhwc_cpu(cfg, s)
    return s, [data, kernel, out]


@template("conv2d_nchw.cuda")
def conv2d_nchw_gpu(data, kernel, strides, padding, dilation, out_dtype):
    """TOPI cuda ``conv2d_nchw`` (``schedule_direct_cuda``): 4-level tiles of f, y, x."""
    cfg = get_config()
    out, s = _nchw(data, kernel, strides, padding, dilation, out_dtype)
    _flop(cfg, out, kernel.shape[1] * kernel.shape[2] * kernel.shape[3])
    schedule_nchw_gpu(cfg, s)
    return s, [data, kernel, out]


@template("conv2d_nhwc.cuda")
def conv2d_nhwc_gpu(data, kernel, strides, padding, dilation, out_dtype):
    """TOPI cuda ``conv2d_nhwc`` (``schedule_conv2d_nhwc_direct``): 4-level tiles of y, x, f."""
    cfg = get_config()
    out, s = _nhwc(data, kernel, strides, padding, dilation, out_dtype)
    _flop(cfg, out, kernel.shape[0] * kernel.shape[1] * kernel.shape[2])
    schedule_nhwc_gpu(cfg, s)
    return s, [data, kernel, out]
