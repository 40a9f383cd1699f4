"""The AutoTVM templates ``conv2d_packed.vta`` and ``dense_packed.vta`` (the seed's tasks).

Each template builds the packed int8 compute as te tensors (the ComputeDAG that tasks, records
and features share with the other templates) and defines the seed's knobs::

    tile_b, tile_h, tile_w, tile_ci, tile_co   define_split(..., num_outputs=2): [-1, inner]
    h_threading, oc_threading                  define_knob(..., [1, 2]): virtual threads

The state it returns is the VTA schedule of codegen/vta/schedule.py applied with the knobs
(``tile_config(cfg)``): the tile splits, the copies into ``local.inp_buffer`` /
``local.wgt_buffer``, the accumulator in ``local.acc_buffer``, the ``dma_copy`` / ``gemm``
pragmas and the virtual threads, the same schedule ``vta.top.build`` lowers to the instruction
stream (codegen/vta/lower.py). The DAG is the graph's ``nn.conv2d`` (int32 out); the
standalone kernels that ``vta.top.build`` and ``SimulatorRunner`` compile add the requantization
(an ``alu`` stage) to it. A configuration whose tiles
do not divide their axes (the splits are exact, so only thread counts can fail that) or whose
tiles overflow an on-chip buffer is refused with ``cfg.raise_error`` (an InstantiationError),
never miscompiled.

Arguments are TVM's: ``conv2d_packed.vta(data, kernel, strides, padding, dilation, layout,
out_dtype)`` with ``data`` ``(N//BATCH, CI//BLOCK_IN, H, W, BATCH, BLOCK_IN)`` int8 and
``kernel`` ``(CO//BLOCK_OUT, CI//BLOCK_IN, KH, KW, BLOCK_OUT, BLOCK_IN)`` int8;
``dense_packed.vta(data, weight, out_dtype)``.
"""

from __future__ import annotations

from codegen.vta import Conv2dWorkload, TileConfig, check_config, schedule_packed
from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.ops.packed_layout import conv2d_packed as conv2d_packed_compute
from tensorir.tensor import compute

from ...autotvm.space import ConfigSpace, FallbackConfigEntity
from ...autotvm.template import get_config, template
from ...autotvm.templates import EXT_DEV_WORKLOADS
from ..env import get_env
from .build import conv2d_workload, dense_workload

KNOBS = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "h_threading", "oc_threading")


def _pair(v):
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def define_knobs(cfg, wkl: Conv2dWorkload, dense: bool = False) -> None:
    """The seed's knobs on ``cfg`` for ``wkl``'s axes (dense has no height or width ones)."""
    cfg.define_split("tile_b", wkl.batch_blocks, num_outputs=2)
    if not dense:
        cfg.define_split("tile_h", wkl.out_height, num_outputs=2)
        cfg.define_split("tile_w", wkl.out_width, num_outputs=2)
    cfg.define_split("tile_ci", wkl.in_blocks, num_outputs=2)
    cfg.define_split("tile_co", wkl.out_blocks, num_outputs=2)
    if not dense:
        cfg.define_knob("h_threading", [1, 2])
    cfg.define_knob("oc_threading", [1, 2])


def tile_config(cfg) -> TileConfig:
    """The TileConfig of a configuration's knobs (the inner split sizes, the thread counts;
    a knob the template does not define, such as dense's tile_h, is 1)."""
    values = {}
    for name in KNOBS:
        try:
            entity = cfg[name]
        except KeyError:
            continue
        values[name] = entity.size[-1] if name.startswith("tile_") else entity.val
    return TileConfig(**values)


def _refuse_invalid(cfg, wkl: Conv2dWorkload) -> None:
    # While the space is being collected ``cfg`` is the ConfigSpace: nothing to check yet.
    if type(cfg) is ConfigSpace:
        return
    reason = check_config(wkl, tile_config(cfg), get_env().spec)
    if reason is not None and isinstance(cfg, FallbackConfigEntity):
        # An untuned workload: the smallest tiles always fit.
        for name in KNOBS[:5]:
            if name in cfg.space_map:
                cfg.fallback_split(name, [-1, 1])
        reason = check_config(wkl, tile_config(cfg), get_env().spec)
    if reason is not None:
        cfg.raise_error(f"VTA: {reason}")


def _scheduled(cfg, tensors):
    """The VTA schedule of ``tensors``' DAG with ``cfg``'s knobs (the bare state while the
    space is being collected)."""
    state = ComputeDAG(list(tensors)).get_init_state()
    if type(cfg) is not ConfigSpace:
        schedule_packed(state, tile_config(cfg))
    return state


@template("conv2d_packed.vta")
def conv2d_packed(data, kernel, strides, padding, dilation, layout, out_dtype):
    """The seed's packed conv2d template (TVM's ``conv2d_packed.vta``)."""
    env = get_env()
    want = f"NCHW{env.BATCH}n{env.BLOCK_IN}c"
    if tuple(_pair(dilation)) != (1, 1) or layout != want:
        raise ValueError(
            f"conv2d_packed.vta: dilation {dilation} and layout {layout!r}: only dilation 1 "
            f"and the {want} layout (from vta.top.graph_pack) run on VTA"
        )
    cfg = get_config()
    wkl = conv2d_workload(data.shape, kernel.shape, strides, padding)
    ph, pw = wkl.pad_h, wkl.pad_w
    out = conv2d_packed_compute(data, kernel, strides, (ph, pw, ph, pw), (1, 1), out_dtype)
    define_knobs(cfg, wkl)
    cfg.add_flop(2 * wkl.gemm_uops * get_env().BATCH * get_env().BLOCK_IN * get_env().BLOCK_OUT)
    _refuse_invalid(cfg, wkl)
    return _scheduled(cfg, [data, kernel, out]), [data, kernel, out]


@template("dense_packed.vta")
def dense_packed(data, weight, out_dtype):
    """Packed dense: ``(N//BATCH, CI//BLOCK_IN, BATCH, BLOCK_IN)`` x ``(CO//BLOCK_OUT,
    CI//BLOCK_IN, BLOCK_OUT, BLOCK_IN)``."""
    cfg = get_config()
    wkl = dense_workload(data.shape, weight.shape)
    k = te.reduce_axis((0, data.shape[1]), name="k")
    ki = te.reduce_axis((0, data.shape[3]), name="k_tns")
    out = compute(
        (data.shape[0], weight.shape[0], data.shape[2], weight.shape[2]),
        lambda b, co, bi, coi: te.sum(
            data[b, k, bi, ki].astype(out_dtype) * weight[co, k, coi, ki].astype(out_dtype),
            axis=[k, ki],
        ),
        "res",
        tag="dense_packed",
    )
    define_knobs(cfg, wkl, dense=True)
    cfg.add_flop(2 * wkl.gemm_uops * get_env().BATCH * get_env().BLOCK_IN * get_env().BLOCK_OUT)
    _refuse_invalid(cfg, wkl)
    return _scheduled(cfg, [data, weight, out]), [data, weight, out]


def task_workload(task) -> Conv2dWorkload:
    """The Conv2dWorkload of a ``conv2d_packed.vta`` / ``dense_packed.vta`` task."""
    args = task.args
    if task.name == "conv2d_packed.vta":
        return conv2d_workload(args[0][1], args[1][1], args[2], args[3])
    if task.name == "dense_packed.vta":
        return dense_workload(args[0][1], args[1][1])
    raise ValueError(f"task {task.name!r} is not a VTA task (conv2d_packed.vta, dense_packed.vta)")


def workload_of_call(call) -> tuple[str, tuple] | None:
    """The ``conv2d_packed.vta`` workload of a packed ``nn.conv2d`` call (what
    ``autotvm.task.extract_from_program`` asks for ``Target("ext_dev -device=vta")``); None
    for every other call (it runs on the CPU)."""
    if call.op != "nn.conv2d" or not call.attrs["data_layout"].startswith("NCHW"):
        return None
    if len(call.args[0].shape) != 6:
        return None
    data, kernel = call.args
    a = call.attrs
    return "conv2d_packed.vta", (
        ("TENSOR", tuple(data.shape), data.dtype),
        ("TENSOR", tuple(kernel.shape), kernel.dtype),
        tuple(a["strides"]),
        tuple(a["padding"]),
        tuple(a["dilation"]),
        a["data_layout"],
        a["out_dtype"] or "int32",
    )


EXT_DEV_WORKLOADS["vta"] = workload_of_call
