"""Hardware parameters and the CUDA architecture of a target, read from its device.

GPU targets read their limits from device 0 of their kind the first time a task needs them
(``runtime.cuda.query_properties`` / ``runtime.opencl.query_properties``: attribute queries,
no context or queue is created), once per process. Without a device (CI, a laptop) they fall
back to the documented defaults below with a one-line warning, so GPU tasks can still be
created, searched and built. ``opencl -device=mali`` never touches a device: a Mali board is
tuned remotely, and its limits are TVM's Mali preset. Explicit ``HardwareParams`` fields always
win (:meth:`HardwareParams.for_target`).
"""

from __future__ import annotations

import functools
import logging
import warnings
from dataclasses import dataclass, replace
from numbers import Integral

from codegen.target import Target, backend, is_cross_target

INT32_MAX = 2**31 - 1

# Used without a device: an NVIDIA data-centre GPU (H100 SXM: 132 SMs) for "cuda" and generic
# "opencl"; TVM's presets for Mali (the seed's Mali tutorial passes the same limits, with
# num_cores=-1, which this project keeps at 4 since num_cores sizes parallel loops).
GPU_DEFAULTS = dict(
    num_cores=132,
    vector_unit_bytes=16,
    cache_line_bytes=64,
    max_shared_memory_per_block=49152,
    max_shared_memory_per_block_optin=49152,
    max_local_memory_per_block=INT32_MAX,
    max_threads_per_block=1024,
    max_vthread_extent=8,
    warp_size=32,
)
MALI_DEFAULTS = dict(
    num_cores=4,
    vector_unit_bytes=16,
    cache_line_bytes=64,
    max_shared_memory_per_block=32768,
    max_shared_memory_per_block_optin=32768,
    max_local_memory_per_block=INT32_MAX,
    max_threads_per_block=256,
    max_vthread_extent=1,
    warp_size=1,
)


@functools.cache
def device_properties(kind: str) -> dict | None:
    """Properties of device 0 of ``kind`` ("cuda" or "opencl"), or None (with one warning)."""
    from runtime.device import device_kind, query_properties

    device_kind(kind)  # an unknown kind is an error (naming the known ones), not a missing device
    try:
        return query_properties(kind, 0)
    except Exception as err:  # no driver, no device, no pyopencl / pycuda
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        warnings.warn(
            f"no {kind} device to read hardware parameters from ({first}); using defaults",
            stacklevel=4,
        )
        return None


def gpu_params(target: Target) -> dict:
    """HardwareParams fields for a GPU target (device values, else the defaults)."""
    if target.get("device") == "mali":
        return dict(MALI_DEFAULTS)
    props = device_properties(target.kind)
    if props is None:
        return dict(GPU_DEFAULTS)
    warp = int(props.get("warp_size") or 1)
    return dict(
        num_cores=int(props["num_cores"]),
        # TVM uses 16 bytes on GPUs; a CPU OpenCL device (PoCL) reports its SIMD width.
        vector_unit_bytes=16 if props.get("is_gpu", True) else int(props["vector_unit_bytes"]),
        cache_line_bytes=int(props.get("cache_line_bytes", 64)),
        max_shared_memory_per_block=int(props["max_shared_memory_per_block"]),
        # A device that reports no opt-in (OpenCL, an older runtime) gets none.
        max_shared_memory_per_block_optin=int(
            props.get("max_shared_memory_per_block_optin") or props["max_shared_memory_per_block"]
        ),
        max_local_memory_per_block=INT32_MAX,
        max_threads_per_block=int(props["max_threads_per_block"]),
        max_vthread_extent=max(1, warp // 4),  # TVM's rule (8 on NVIDIA)
        warp_size=warp,
    )


def cuda_arch(target) -> str:
    """``-arch`` of a CUDA target: its own option, else the device's, else nvcc's default."""
    from runtime.cuda import DEFAULT_ARCH

    target = Target(target)
    arch = target.get("arch")
    if arch:
        return arch
    props = device_properties("cuda")
    return props["arch"] if props else DEFAULT_ARCH


def known_cuda_arch(target) -> str | None:
    """``-arch`` of a CUDA target when it is known here: its own option, else the device's (a
    CUDA device in this process), else None (no guess: the search then keeps to what every
    architecture runs)."""
    target = Target(target)
    arch = target.get("arch")
    if arch or target.kind != "cuda":
        return arch or None
    return _quiet_device_arch()


@functools.cache
def _quiet_device_arch() -> str | None:
    """The arch of CUDA device 0, or None without one: no warning (the search asks on every
    task; a missing device is reported where hardware parameters are read from it)."""
    from runtime.device import query_properties

    try:
        return query_properties("cuda", 0)["arch"]
    except Exception as err:  # no driver, no device, no pycuda: the arch is unknown
        logging.getLogger(__name__).debug("no CUDA device arch for the search: %s", err)
        return None


def with_device_arch(target) -> Target:
    """A CUDA target with ``-arch`` filled from the device (other targets unchanged).

    Tasks keep the target as the user wrote it (records name tasks by ``str(target)``); the
    builder compiles with this one.
    """
    target = Target(target)
    if target.kind != "cuda" or target.get("arch"):
        return target
    return target.with_options(arch=cuda_arch(target))


_MAY_BE_ZERO = (
    "max_shared_memory_per_block",
    "max_shared_memory_per_block_optin",
    "max_local_memory_per_block",
)


@dataclass(frozen=True)
class HardwareParams:
    """What the search needs to know about the machine (TVM's ``HardwareParams``).

    ``None`` (or, as in TVM, ``-1``) fields are filled by :meth:`for_target`: on CPU from the
    host, on GPU from the target's device (see :data:`GPU_DEFAULTS` for the defaults used
    without one). A CPU target for another machine (``llvm -mtriple=...``) cannot be read from
    here: its ``num_cores`` and ``vector_unit_bytes`` then are this host's, with a warning that
    names them; give the device's. Other values must be positive ints (the two memory sizes
    may be 0).

    Parameters
    ----------
    num_cores : int
        Cores the parallel loops can use (CPU) or streaming multiprocessors (GPU).
    vector_unit_bytes : int
        Width of the vector unit (32 for AVX2, 64 for AVX-512, 16 for NEON / Mali).
    cache_line_bytes : int
        Cache line size, used by the features.
    max_shared_memory_per_block, max_local_memory_per_block, max_threads_per_block : int
        GPU limits every candidate is checked against.
    max_shared_memory_per_block_optin : int
        Shared memory a kernel may opt in to beyond ``max_shared_memory_per_block`` (CUDA's
        dynamic shared memory: 227 KB a block on sm_90, 163 KB on sm_80, against 48 KB of
        static arrays). Only a software-pipelined kernel may use it, for its stages beyond
        the first (:func:`~autosched.search.annotate_gpu.pipeline_depth_choices`) or tiles
        that mutation grows; tile sizes are still sampled to fit
        ``max_shared_memory_per_block`` once. Equal to it (the default
        without a device, on OpenCL and Mali): no opt-in. Not in TVM.
    max_vthread_extent, warp_size : int
        GPU virtual-thread limit and warp width.
    """

    num_cores: int | None = None
    vector_unit_bytes: int | None = None
    cache_line_bytes: int | None = None
    max_shared_memory_per_block: int | None = None
    max_local_memory_per_block: int | None = None
    max_threads_per_block: int | None = None
    max_vthread_extent: int | None = None
    warp_size: int | None = None
    max_shared_memory_per_block_optin: int | None = None

    def __post_init__(self):
        for name, value in self.__dict__.items():
            if value is None:
                continue
            if value == -1 and not isinstance(value, bool):
                object.__setattr__(self, name, None)  # TVM's "read it from the device"
                continue
            lowest = 0 if name in _MAY_BE_ZERO else 1
            if isinstance(value, bool) or not isinstance(value, Integral) or value < lowest:
                kind = "a non-negative" if lowest == 0 else "a positive"
                raise ValueError(
                    f"HardwareParams: {name} must be {kind} int, or -1 / None to read it from "
                    f"the device; got {value!r}"
                )

    @classmethod
    def for_target(cls, target, given: HardwareParams | None = None) -> HardwareParams:
        """Fill the fields of ``given`` that are None from the target's device or defaults.

        The device is only read when some field is missing.
        """
        target = Target(target)
        if given is not None and given.max_shared_memory_per_block is not None:
            # A shared-memory limit the user gives is not raised by the device's opt-in (so
            # TVM's eight fields, all given, still leave the device alone).
            optin = given.max_shared_memory_per_block_optin
            if optin is None:
                given = replace(
                    given, max_shared_memory_per_block_optin=given.max_shared_memory_per_block
                )
        if given is not None and all(v is not None for v in given.__dict__.values()):
            return given
        defaults = _default_params(target)
        _warn_host_values_for_cross_target(target, given, defaults)
        if given is None:
            return defaults
        return replace(defaults, **{k: v for k, v in given.__dict__.items() if v is not None})

    def gpu_value(self, name: str) -> int:
        """The field ``name``, or its GPU default (:data:`GPU_DEFAULTS`) when it is unset."""
        value = getattr(self, name)
        return GPU_DEFAULTS[name] if value is None else value

    def as_limits(self) -> dict:
        """The GPU verifier's limits (``tensorir.passes.verify_gpu``)."""
        return {
            "max_threads_per_block": self.max_threads_per_block,
            "max_shared_memory_per_block": self.max_shared_memory_per_block,
            "max_shared_memory_per_block_optin": self.max_shared_memory_per_block_optin,
            "max_local_memory_per_block": self.max_local_memory_per_block,
            "max_vthread_extent": self.max_vthread_extent,
            "warp_size": self.warp_size,
        }


# The fields of a CPU target that describe its machine; the others are GPU limits.
_CPU_MACHINE_FIELDS = ("num_cores", "vector_unit_bytes")


def _warn_host_values_for_cross_target(target: Target, given, defaults) -> None:
    """A CPU target for another machine (``-mtriple=aarch64-...``, tuned over RPC) has no
    device to read here: its missing (``None`` / ``-1``) core count and vector width would
    silently be this host's. Say so, once per target, naming the values used."""
    if not is_cross_target(target):  # only an llvm target can be another machine's
        return
    missing = [f for f in _CPU_MACHINE_FIELDS if given is None or getattr(given, f) is None]
    if missing:
        used = ", ".join(f"{f}={getattr(defaults, f)}" for f in missing)
        warnings.warn(
            f"HardwareParams: cannot read {' and '.join(missing)} from the device of "
            f"{str(target)!r} (another machine); using this host's ({used}); pass "
            f"HardwareParams({', '.join(f + '=...' for f in missing)}) with the device's values",
            stacklevel=3,
        )


def _host_cores() -> int:
    """The threads a CPU kernel will run with: AUTOSCHED_NUM_THREADS, else the usable cores."""
    from .workers import cpu_count, env

    return env("AUTOSCHED_NUM_THREADS") or cpu_count()


def _default_params(target: Target) -> HardwareParams:
    limits = backend(target.kind).limits  # where the backend table says they come from
    if limits == "host":
        # Read the vector width from LLVM's view of the host, without starting a runtime device.
        import llvmlite.binding as llvm

        features = llvm.get_host_cpu_features()
        vbytes = 64 if features.get("avx512f") else 32 if features.get("avx") else 16
        return HardwareParams(
            num_cores=_host_cores(),
            vector_unit_bytes=vbytes,
            cache_line_bytes=64,
            max_shared_memory_per_block=0,
            max_shared_memory_per_block_optin=0,
            max_local_memory_per_block=2**31 - 1,
            max_threads_per_block=1,
            max_vthread_extent=1,
            warp_size=1,
        )
    if limits == "accelerator":
        # An accelerator's limits are its own configuration (autosched/vta's env), not these
        # fields: its tasks only carry them, so no device is probed for them.
        return HardwareParams(**GPU_DEFAULTS)
    return HardwareParams(**gpu_params(target))
