"""runtime: devices, arrays, loading and timing generated code (numpy + stdlib at import time).

Drivers (llvmlite.binding, pycuda, pyopencl) are imported lazily by the backend modules.
"""

# No cpu()/cuda()/opencl() helpers here: those names are the backend submodules.
from .device import Device, device
from .errors import CompileError, LaunchError
from .module import Module, load_module
from .ndarray import NDArray, array, empty
from .timer import TimingResult

__all__ = [
    "CompileError",
    "Device",
    "LaunchError",
    "Module",
    "NDArray",
    "TimingResult",
    "array",
    "device",
    "empty",
    "load_module",
]
