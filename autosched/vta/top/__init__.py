"""``vta.top``: the packed operators of the simulated VTA and graph packing."""

from .build import VTAKernel, build, conv2d_workload, dense_workload
from .graph_pack import graph_pack
from .reference import conv2d_packed_reference, pack_nchw, pack_oihw, unpack_nchw
from .templates import conv2d_packed, dense_packed, task_workload, tile_config

__all__ = [
    "VTAKernel",
    "build",
    "conv2d_packed",
    "conv2d_packed_reference",
    "conv2d_workload",
    "dense_packed",
    "dense_workload",
    "graph_pack",
    "pack_nchw",
    "pack_oihw",
    "task_workload",
    "tile_config",
    "unpack_nchw",
]
