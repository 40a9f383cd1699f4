"""Dense templates (``T_dense[i, j] = sum_k data[i, k] * weight[j, k]``) for llvm and for
cuda / opencl. Arguments, as TVM's ``dense_nopack.x86``: ``(data, weight, out_dtype)``;
dtype-generic (int8 operands accumulate in ``out_dtype``)."""

from __future__ import annotations

from tensorir.dag import ComputeDAG
from tensorir.ops.dense import dense

from ..template import get_config, template
from .epilogue import anchor
from .schedule_cpu import schedule_direct_cpu
from .schedule_gpu import schedule_direct_gpu

__all__ = ["dense_cpu", "dense_gpu"]


def _compute(cfg, data, weight, out_dtype):
    out = dense(data, weight, out_dtype=out_dtype)
    cfg.add_flop(2 * data.shape[0] * weight.shape[0] * data.shape[1])
    return out, ComputeDAG([data, weight, out]).get_init_state()


def schedule_cpu(cfg, s):
    out, _, _ = anchor(s)
    schedule_direct_cpu(
        cfg, s, out, None,
        tiles=[("tile_y", "i"), ("tile_x", "j")],
        vector_axis="j", reduce_split=[("tile_k", "k")],
    )  # fmt: skip


def schedule_gpu(cfg, s):
    out, _, reads = anchor(s)
    schedule_direct_gpu(
        cfg, s, out, None, reads,
        tiles=[("tile_y", "i"), ("tile_x", "j")],
        reduce_split=[("tile_k", "k")],
    )  # fmt: skip


@template("dense.x86")
def dense_cpu(data, weight, out_dtype):
    """TOPI ``dense_nopack.x86``: tiles of rows (``tile_y``) and units (``tile_x``, the
    vectorized axis), the reduction split (``tile_k``) around the register tile."""
    cfg = get_config()
    out, s = _compute(cfg, data, weight, out_dtype)
    schedule_cpu(cfg, s)
    return s, [data, weight, out]


@template("dense.cuda")
def dense_gpu(data, weight, out_dtype):
    """TOPI cuda ``dense_large_batch``: 4-level tiles of rows and units, the reduction split
    two ways with both operands staged in shared memory."""
    cfg = get_config()
    out, s = _compute(cfg, data, weight, out_dtype)
    schedule_gpu(cfg, s)
    return s, [data, weight, out]
