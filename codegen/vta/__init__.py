"""VTA code generation: packed conv2d / dense tile configurations to instruction streams.

Emits plain values (instruction dicts and a uop table) that runtime/vta/isa.py turns into the
ISA's dataclasses: codegen may import tensorir only (docs/architecture.md), and the runtime, which
executes the ISA, imports nothing, so the ISA lives in the runtime and this package speaks its
field names.
"""

from .config import (
    Conv2dWorkload,
    Footprint,
    TileConfig,
    VTAConfigError,
    check_config,
    footprint,
)
from .conv2d import conv2d_program
from .lower import VTALowerError, lower_to_vta
from .program import packed_program, packed_state
from .schedule import packed_conv2d_tensors, schedule_packed

__all__ = [
    "Conv2dWorkload",
    "Footprint",
    "TileConfig",
    "VTAConfigError",
    "VTALowerError",
    "check_config",
    "conv2d_program",
    "footprint",
    "lower_to_vta",
    "packed_conv2d_tensors",
    "packed_program",
    "packed_state",
    "schedule_packed",
]
