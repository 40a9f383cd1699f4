"""A packed conv2d / dense workload and its tile configuration to a VTA program, through the
schedule: te compute -> State with the VTA schedule -> tensorir loop IR -> instruction stream."""

from __future__ import annotations

from tensorir.dag import ComputeDAG
from tensorir.lower import lower

from .config import Conv2dWorkload, TileConfig, VTAConfigError, check_config, describe
from .lower import lower_to_vta
from .schedule import packed_conv2d_tensors, schedule_packed


def packed_state(wkl: Conv2dWorkload, cfg: TileConfig, spec):
    """The scheduled State of ``wkl`` tiled by ``cfg`` (``VTAConfigError`` when
    ``check_config`` refuses the configuration)."""
    reason = check_config(wkl, cfg, spec)
    if reason:
        raise VTAConfigError(f"VTA conv2d {describe(wkl, cfg)}: {reason}")
    state = ComputeDAG(list(packed_conv2d_tensors(wkl, spec))).get_init_state()
    schedule_packed(state, cfg)
    return state


def packed_program(wkl: Conv2dWorkload, cfg: TileConfig, spec) -> dict:
    """The ``{"insns", "uops"}`` program of ``wkl`` tiled by ``cfg``, lowered from its
    schedule (``packed_state``) by codegen/vta/lower.py."""
    return lower_to_vta(lower(packed_state(wkl, cfg, spec), "vta_conv2d"), spec)
