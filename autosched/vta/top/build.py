"""Compile packed conv2d / dense for the simulated VTA and run them: schedule -> loop IR ->
instruction stream (codegen/vta) -> ISA -> simulator."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codegen.vta import Conv2dWorkload, TileConfig, packed_program
from runtime.vta import Program, SimStats, Simulator, from_dict

from ..env import Environment, get_env


def conv2d_workload(
    data_shape,
    kernel_shape,
    strides=(1, 1),
    padding=(0, 0),
    shift=8,
    clip=(-127, 127),
    requantize=True,
) -> Conv2dWorkload:
    """The workload of a packed conv2d from its packed shapes.

    ``data_shape`` is ``(N//BATCH, CI//BLOCK_IN, H, W, BATCH, BLOCK_IN)`` and ``kernel_shape``
    ``(CO//BLOCK_OUT, CI//BLOCK_IN, KH, KW, BLOCK_OUT, BLOCK_IN)`` (the seed's task arguments).
    ``requantize=False`` gives the int32 accumulator as output (a graph's ``nn.conv2d``).
    """
    if len(data_shape) != 6 or len(kernel_shape) != 6:
        raise ValueError(
            f"conv2d_packed: data {tuple(data_shape)} and kernel {tuple(kernel_shape)} must be "
            "6-D packed shapes (NCHW1n16c and OIHW16o16i); pack them with vta.top.graph_pack"
        )
    nb, cb, h, w = data_shape[:4]
    ob, kcb, kh, kw = kernel_shape[:4]
    if kcb != cb:
        raise ValueError(
            f"conv2d_packed: data has {cb} input-channel blocks, the kernel {kcb}; they must match"
        )
    return Conv2dWorkload(
        nb,
        cb,
        h,
        w,
        ob,
        kh,
        kw,
        *_pair(strides),
        *_pair(padding),
        shift,
        clip[0],
        clip[1],
        requantize,
    )


def dense_workload(data_shape, weight_shape, shift=8, clip=(-127, 127)) -> Conv2dWorkload:
    """Packed dense ``(N//BATCH, CI//BLOCK_IN, BATCH, BLOCK_IN)`` x ``(CO//BLOCK_OUT,
    CI//BLOCK_IN, BLOCK_OUT, BLOCK_IN)``: a 1x1 conv2d on a 1x1 image."""
    if len(data_shape) != 4 or len(weight_shape) != 4 or data_shape[1] != weight_shape[1]:
        raise ValueError(
            f"dense_packed: data {tuple(data_shape)} and weight {tuple(weight_shape)} must be "
            "(N//BATCH, CI//BLOCK_IN, BATCH, BLOCK_IN) and (CO//BLOCK_OUT, CI//BLOCK_IN, "
            "BLOCK_OUT, BLOCK_IN) with the same CI blocks"
        )
    return Conv2dWorkload(data_shape[0], data_shape[1], 1, 1, weight_shape[0], shift=shift,
                          clip_min=clip[0], clip_max=clip[1])  # fmt: skip


def _pair(v):
    """(h, w) of an int, a pair, or a symmetric (top, left, bottom, right) padding."""
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(x) for x in v)
    if len(v) == 4:
        if v[:2] != v[2:]:
            raise ValueError(f"conv2d_packed: padding {v} must be symmetric on VTA")
        return v[:2]
    return v


@dataclass(frozen=True, eq=False)
class VTAKernel:
    """A compiled packed conv2d / dense: its workload, config and program."""

    workload: Conv2dWorkload
    config: TileConfig
    program: Program
    env: Environment

    @property
    def out_shape(self) -> tuple:
        w, e = self.workload, self.env
        return (w.batch_blocks, w.out_blocks, w.out_height, w.out_width, e.BATCH, e.BLOCK_OUT)

    def run(self, data: np.ndarray, kernel: np.ndarray) -> tuple[np.ndarray, SimStats]:
        """Simulate on packed int8 ``data`` and ``kernel``; returns (packed output, stats):
        int8 when the workload requantizes, else int32 (reassembled from the byte planes)."""
        planes = 1 if self.workload.requantize else 4
        out = np.zeros((planes, *self.out_shape), np.int8)
        dram = {
            "inp": np.ascontiguousarray(data, np.int8),
            "wgt": np.ascontiguousarray(kernel, np.int8),
            "out": out,
        }
        stats = Simulator(self.env.spec, self.env.timing).run(self.program, dram)
        if planes == 1:
            return out[0], stats
        u = out.view(np.uint8).astype(np.uint32)
        value = u[0] | (u[1] << 8) | (u[2] << 16) | (u[3] << 24)
        return value.view(np.int32), stats


def build(
    workload: Conv2dWorkload, config: TileConfig, env: Environment | None = None
) -> VTAKernel:
    """Schedule ``workload`` with ``config``'s knobs, lower the schedule to VTA's instruction
    stream (a ``VTAConfigError`` when the config is invalid; codegen/vta/program.py) and
    assemble it into the ISA."""
    env = env or get_env()
    raw = packed_program(workload, config, env.spec)
    program = Program(tuple(from_dict(d) for d in raw["insns"]), raw["uops"])
    return VTAKernel(workload, config, program, env)
