"""VTA code generation: packed conv2d / dense tile configurations to instruction streams.

Emits plain values (instruction dicts and a uop table) that runtime/vta/isa.py turns into the
ISA's dataclasses: codegen may import tensorir only (docs/architecture.md), and the runtime, which
executes the ISA, imports nothing, so the ISA lives in the runtime and this package speaks its
field names.
"""

from .config import Conv2dWorkload, Footprint, TileConfig, check_config, footprint
from .conv2d import VTAConfigError, conv2d_program

__all__ = [
    "Conv2dWorkload",
    "Footprint",
    "TileConfig",
    "VTAConfigError",
    "check_config",
    "conv2d_program",
    "footprint",
]
