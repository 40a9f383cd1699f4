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
from collections.abc import Callable
from dataclasses import dataclass

from .device_attributes import (
    ATTRIBUTES,
    cpu_attributes,
    cuda_attributes,
    opencl_attributes,
)


@dataclass(frozen=True)
class DeviceKind:
    """One runtime backend: the entry of :data:`DEVICE_KINDS` for a device kind.

    Every place of the runtime (and of autosched, on the device side) that treats device kinds
    differently reads this table; codegen.target's ``BACKENDS`` is its code-generation twin
    (docs/contributing.md, "Recipe: a new backend").

    Attributes
    ----------
    name : str
        The device kind (``device("cuda").kind``).
    lang : str
        The source language its modules load (``load_module(lang, ...)``, codegen's
        ``Source.lang``).
    loader : str
        ``"module:Class"`` of its backend (compile, alloc, copy, launch), imported lazily on
        first use so that runtime imports no driver at module level.
    query : str or None
        ``"module:function"`` reading device ``index``'s properties without creating a
        context (``query(index) -> dict``); None: the backend's own (cheap) ``properties()``.
    attributes : callable
        Its property dict -> TVM's device attributes (runtime.device_attributes).
    type_code : int
        TVM's DLDeviceType code (``dev.device_type``).
    on_host : bool
        It is this process's CPU: its buffers are host memory (numpy arrays used in place, no
        copies), its thread count can be set, its code is object code for this host.
    install_hint : str
        What to install when its backend cannot start (the end of that error).
    aliases : tuple of str
        Other names ``device(...)`` accepts (target kinds included: ``"llvm"`` is the CPU).
    """

    name: str
    lang: str
    loader: str
    query: str | None
    attributes: Callable[[dict], dict]
    type_code: int
    on_host: bool
    install_hint: str
    aliases: tuple[str, ...] = ()

    def load(self, ref: str):
        """The object ``"module:name"`` names (the loader class or the query function)."""
        module, _, name = ref.partition(":")
        return getattr(importlib.import_module(module), name)


#: The runtime backends, by device kind: the one table of what each kind is.
DEVICE_KINDS: dict[str, DeviceKind] = {
    k.name: k
    for k in (
        DeviceKind(
            "cpu", "llvm", "runtime.cpu:CPUBackend", None, cpu_attributes, 1, True,
            "Check that llvmlite is installed.", ("llvm", "c"),
        ),
        DeviceKind(
            "cuda", "cuda", "runtime.cuda:CUDABackend", "runtime.cuda:query_properties",
            cuda_attributes, 2, False, "Install pycuda and run on a machine with an NVIDIA GPU.",
            ("gpu", "nvidia"),
        ),
        DeviceKind(
            "opencl", "opencl", "runtime.opencl:OpenCLBackend",
            "runtime.opencl:query_properties", opencl_attributes, 4, False,
            "Install pyopencl and an OpenCL platform (e.g. pyopencl[pocl]).", ("cl",),
        ),
    )
}  # fmt: skip
#: Every name ``device(...)`` accepts -> its device kind (derived from the table).
ALIASES: dict[str, str] = {
    name: k.name for k in DEVICE_KINDS.values() for name in (k.name, *k.aliases)
}
#: The source languages whose code is object code for this host (kept in libraries and plans).
HOST_LANGS = frozenset(k.lang for k in DEVICE_KINDS.values() if k.on_host)
# Defaults for limits that a backend may not report (TVM uses 8 for the vthread limit).
DEFAULT_PROPERTIES: dict[str, object] = {"max_vthread_extent": 8}

_backends: dict[tuple[str, int], object] = {}
_errors: dict[tuple[str, int], str] = {}
_attributes: dict[tuple[str, int], dict] = {}
_lock = threading.Lock()


def normalize_kind(kind: str) -> str:
    """Map a device or target name ("llvm", "gpu", "cl", ...) to "cpu", "cuda" or "opencl"."""
    if not isinstance(kind, str) or not kind.split() or kind.split()[0].lower() not in ALIASES:
        raise ValueError(f"unknown device kind {kind!r}; use one of {sorted(ALIASES)}")
    return ALIASES[kind.split()[0].lower()]


def device_kind(kind: str) -> DeviceKind:
    """The :data:`DEVICE_KINDS` entry of ``kind`` (any name :func:`normalize_kind` takes);
    an unknown kind is a one-line ValueError listing the known ones."""
    return DEVICE_KINDS[normalize_kind(kind)]


def device_kind_of_lang(lang: str) -> DeviceKind:
    """The :data:`DEVICE_KINDS` entry whose modules load source language ``lang``."""
    for entry in DEVICE_KINDS.values():
        if entry.lang == lang:
            return entry
    langs = sorted(k.lang for k in DEVICE_KINDS.values())
    raise ValueError(f"unknown source language {lang!r}; use one of {langs}")


def query_properties(kind: str, index: int = 0) -> dict:
    """Properties of device ``kind``:``index``, read without creating a GPU context where the
    kind can (its table entry's ``query``); raises (no driver, no device) when it is absent."""
    entry = device_kind(kind)
    if entry.query is None:
        return _create_backend(entry.name, index).properties()
    return entry.load(entry.query)(index)


def _create_backend(kind: str, index: int):
    key = (kind, index)
    with _lock:
        if key in _backends:
            return _backends[key]
        if key in _errors:
            raise RuntimeError(_errors[key])
        entry = DEVICE_KINDS[kind]
        try:
            backend = entry.load(entry.loader)(index)
        except Exception as err:  # missing driver, missing GPU, import error in the backend
            msg = (
                f"device {kind}:{index} is not available: {type(err).__name__}: {err}. "
                + entry.install_hint
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
        return DEVICE_KINDS[self.kind].type_code

    @property
    def on_host(self) -> bool:
        """Whether this is this process's CPU (its table entry's ``on_host``)."""
        return DEVICE_KINDS[self.kind].on_host

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
            entry = DEVICE_KINDS[self.kind]
            if entry.query is None:
                props = self.backend.properties() if self.exists else {}
            else:
                try:
                    props = entry.load(entry.query)(self.index)
                except (ImportError, RuntimeError):  # no driver or no such device: all None
                    props = None
            found = entry.attributes(props) if props is not None else dict.fromkeys(ATTRIBUTES)
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
