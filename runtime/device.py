"""Devices: a kind ("cpu", "cuda", "opencl"), an index and a lazily created backend.

No driver is touched at import time or when a :class:`Device` is created; the backend object
(``runtime.cpu.CPUBackend``, ``runtime.cuda.CUDABackend``, ``runtime.opencl.OpenCLBackend``) is
imported and constructed on the first use of :attr:`Device.backend`, once per (kind, index) per
process.

Backend classes are constructed as ``BackendClass(index)`` (one positional int). A constructor that
cannot find its driver or hardware raises an exception (ideally RuntimeError with the reason);
:attr:`Device.exists` turns that into False.
"""

from __future__ import annotations

import importlib
import threading

from .device_attributes import DEVICE_TYPE_CODES, device_attributes

# kind -> "module:Class", imported lazily so that runtime imports no driver at module level.
BACKENDS: dict[str, str] = {
    "cpu": "runtime.cpu:CPUBackend",
    "cuda": "runtime.cuda:CUDABackend",
    "opencl": "runtime.opencl:OpenCLBackend",
}
ALIASES: dict[str, str] = {
    "cpu": "cpu",
    "llvm": "cpu",
    "c": "cpu",
    "cuda": "cuda",
    "gpu": "cuda",
    "nvidia": "cuda",
    "opencl": "opencl",
    "cl": "opencl",
}
# Defaults for limits that a backend may not report (TVM uses 8 for the vthread limit).
DEFAULT_PROPERTIES: dict[str, object] = {"max_vthread_extent": 8}

_backends: dict[tuple[str, int], object] = {}
_errors: dict[tuple[str, int], str] = {}
_attributes: dict[tuple[str, int], dict] = {}
_lock = threading.Lock()


def normalize_kind(kind: str) -> str:
    """Map a device or target name ("llvm", "gpu", "cl", ...) to "cpu", "cuda" or "opencl"."""
    if not isinstance(kind, str) or kind.split()[0].lower() not in ALIASES:
        raise ValueError(f"unknown device kind {kind!r}; use one of {sorted(ALIASES)}")
    return ALIASES[kind.split()[0].lower()]


def _create_backend(kind: str, index: int):
    key = (kind, index)
    with _lock:
        if key in _backends:
            return _backends[key]
        if key in _errors:
            raise RuntimeError(_errors[key])
        module_name, _, cls_name = BACKENDS[kind].partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), cls_name)
            backend = cls(index)
        except Exception as err:  # missing driver, missing GPU, import error in the backend
            msg = (
                f"device {kind}:{index} is not available: {type(err).__name__}: {err}. "
                + {
                    "cuda": "Install pycuda and run on a machine with an NVIDIA GPU.",
                    "opencl": "Install pyopencl and an OpenCL platform (e.g. pyopencl[pocl]).",
                    "cpu": "Check that llvmlite is installed.",
                }[kind]
            )
            _errors[key] = msg
            raise RuntimeError(msg) from err
        _backends[key] = backend
        return backend


def _attribute(name: str, doc: str) -> property:
    """A read-only TVM device attribute ``name`` (None where the device kind has none)."""

    def get(self):
        return self._attributes()[name]

    return property(get, doc=doc)


class Device:
    """A compute device.

    Parameters
    ----------
    kind : str
        "cpu" (aliases "llvm", "c"), "cuda" ("gpu", "nvidia") or "opencl" ("cl").
    index : int
        Which device of that kind.

    Examples
    --------
    >>> dev = device("cpu")
    >>> dev.kind, dev.properties["num_cores"] > 0
    ('cpu', True)

    TVM's device attributes are there too (``exist``, ``device_type``, ``device_id``,
    ``max_threads_per_block``, ``warp_size``, ...; see :mod:`runtime.device_attributes`):
    None where the kind has no such attribute (a CPU has no warps) or the device is absent.
    Reading them creates no GPU context.
    """

    max_threads_per_block = _attribute("max_threads_per_block", "Threads per block (GPU).")
    warp_size = _attribute("warp_size", "Threads per warp (GPU).")
    max_shared_memory_per_block = _attribute(
        "max_shared_memory_per_block", "Shared (OpenCL: local) memory bytes per block (GPU)."
    )
    compute_version = _attribute("compute_version", "CUDA compute capability / OpenCL version.")
    device_name = _attribute("device_name", "The device's name.")
    max_clock_rate = _attribute("max_clock_rate", "Clock rate: kHz on CUDA, MHz on OpenCL.")
    multi_processor_count = _attribute(
        "multi_processor_count", "Streaming multiprocessors / compute units / CPU cores."
    )
    max_thread_dimensions = _attribute(
        "max_thread_dimensions", "Largest block extent per dimension, [x, y, z] (GPU)."
    )
    api_version = _attribute("api_version", "CUDA version (CUDA only).")
    driver_version = _attribute("driver_version", "The driver's version (GPU).")
    l2_cache_size_bytes = _attribute("l2_cache_size_bytes", "L2 (OpenCL: global) cache bytes.")
    total_global_memory = _attribute("total_global_memory", "Device (CPU: host) memory bytes.")

    def __init__(self, kind: str = "cpu", index: int = 0):
        self.kind = normalize_kind(kind)
        if not isinstance(index, int) or index < 0:
            raise ValueError(f"device index must be a non-negative int, got {index!r}")
        self.index = index

    @property
    def backend(self):
        """The backend object (created on first use); raises RuntimeError if unavailable."""
        return _create_backend(self.kind, self.index)

    @property
    def exists(self) -> bool:
        """True if the driver and the hardware are there (never raises)."""
        try:
            _create_backend(self.kind, self.index)
        except RuntimeError:
            return False
        return True

    @property
    def exist(self) -> bool:
        """TVM's name of :attr:`exists`."""
        return self.exists

    @property
    def device_type(self) -> int:
        """TVM's DLDeviceType code: 1 cpu, 2 cuda, 4 opencl."""
        return DEVICE_TYPE_CODES[self.kind]

    @property
    def device_id(self) -> int:
        """TVM's name of :attr:`index`."""
        return self.index

    @property
    def available_global_memory(self) -> int | None:
        """Free device memory in bytes (CUDA; this creates the device's context, as in TVM),
        None elsewhere or when the device is absent."""
        if self.kind != "cuda" or not self.exists:
            return None
        return self.backend.free_memory()

    def _attributes(self) -> dict:
        key = (self.kind, self.index)
        if key not in _attributes:
            # The CPU's facts come from its (cheap) backend; GPUs are queried without a context.
            props = None
            if self.kind == "cpu":
                props = self.backend.properties() if self.exists else {}
            found = device_attributes(self.kind, self.index, props)
            _attributes[key] = found
        return _attributes[key]

    @property
    def properties(self) -> dict:
        """Device limits and facts as a plain dict (see runtime_contract for the keys)."""
        props = dict(DEFAULT_PROPERTIES)
        props.update(self.backend.properties())
        return props

    def sync(self) -> None:
        """Wait for all work queued on this device."""
        self.backend.synchronize()

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) and (self.kind, self.index) == (other.kind, other.index)

    def __hash__(self) -> int:
        return hash((self.kind, self.index))

    def __repr__(self) -> str:
        return f"device({self.kind!r}, {self.index})"


def device(kind: str | Device = "cpu", index: int = 0) -> Device:
    """Return the :class:`Device` of ``kind`` and ``index`` (a Device is returned as is)."""
    if isinstance(kind, Device):
        return kind
    return Device(kind, index)


def cpu(index: int = 0) -> Device:
    return Device("cpu", index)


def cuda(index: int = 0) -> Device:
    return Device("cuda", index)


def opencl(index: int = 0) -> Device:
    return Device("opencl", index)
