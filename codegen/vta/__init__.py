"""VTA code generation: a packed conv2d / dense scheduled with VTA's scopes and pragmas
(``schedule.py``) and lowered by tensorir to loop IR, to an instruction stream (``lower.py``).

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
    VTALowerError,
    check_config,
    footprint,
)
from .lower import lower_to_vta
from .program import packed_program, packed_state
from .schedule import packed_conv2d_tensors, schedule_packed

__all__ = [
    "Conv2dWorkload",
    "Footprint",
    "TileConfig",
    "VTAConfigError",
    "VTALowerError",
    "check_config",
    "footprint",
    "lower_to_vta",
    "packed_conv2d_tensors",
    "packed_program",
    "packed_state",
    "schedule_packed",
]
