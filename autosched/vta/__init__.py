"""``autosched.vta``: the simulated VTA int8 accelerator as a target (docs/vta.md).

``get_env()`` gives the hardware configuration and targets; ``vta.top`` the packed conv2d /
dense templates and ``graph_pack``; the ISA and the simulator live in runtime/vta, the
instruction-stream generator in codegen/vta.
"""

from ..rpc.local import LIBRARY_LOADERS
from . import testing, top
from .env import Environment, get_env
from .graph_module import VTAGraphModule, build_config, load_library
from .graph_module import build_network as build
from .measure import SimMeasureResult, SimulatorRunner
from .remote import SimulatorModuleLoader, module_loader

LIBRARY_LOADERS["vta"] = load_library  # rpc.LocalSession().load_module("graphlib.tar")

__all__ = [
    "Environment",
    "SimMeasureResult",
    "SimulatorModuleLoader",
    "SimulatorRunner",
    "VTAGraphModule",
    "build",
    "build_config",
    "get_env",
    "load_library",
    "module_loader",
    "testing",
    "top",
]
