"""runtime: devices, arrays, loading and timing generated code (numpy + stdlib at import time).

Drivers (llvmlite.binding, pycuda, pyopencl) are imported lazily by the backend modules.
"""

from .device import Device, cpu, cuda, device, opencl
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
    "cpu",
    "cuda",
    "device",
    "empty",
    "load_module",
    "opencl",
]
