"""A simulated VTA int8 accelerator: its ISA, hardware parameters, timing model and simulator.

numpy only (no import of autosched, codegen or tensorir); docs/vta.md explains it all.
"""

from .isa import (
    AluInsn,
    Deps,
    FinishInsn,
    GemmInsn,
    MemInsn,
    Program,
    VTAError,
    decode,
    decode_program,
    encode,
    encode_program,
    from_dict,
    to_dict,
)
from .simulator import SimStats, Simulator
from .spec import DEFAULT_CONFIG, VTASpec
from .timing import TimingModel

__all__ = [
    "DEFAULT_CONFIG",
    "AluInsn",
    "Deps",
    "FinishInsn",
    "GemmInsn",
    "MemInsn",
    "Program",
    "SimStats",
    "Simulator",
    "TimingModel",
    "VTAError",
    "VTASpec",
    "decode",
    "decode_program",
    "encode",
    "encode_program",
    "from_dict",
    "to_dict",
]
