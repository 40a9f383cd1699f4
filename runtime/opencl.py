"""OpenCL backend (pyopencl, imported lazily): build once, keep one cl.Kernel per name.

The context is made on the first device of the first platform that has GPU devices, else of
the first platform whose device can build a one-line kernel (PoCL's CPU device in CI).
The probe matters: the PoCL that pyopencl's wheel bundles (LLVM 14) fails every build on
CPUs newer than its LLVM ("unknown target CPU 'generic'", e.g. AMD Zen 5), while a system
PoCL (Debian's ``pocl-opencl-icd``) works there. ``AUTOSCHED_OPENCL_PLATFORM`` picks a
platform by a substring of its name instead (e.g. ``NVIDIA``, ``Portable``).

:func:`query_properties` reads the chosen device's limits without making a queue.
There is no ahead-of-time binary as for CUDA: an OpenCL program binary is only valid for the
exact device and driver that built it, and pyopencl offers no portable offline compiler, so
measuring builds the source in the process that runs it.
"""

from __future__ import annotations

import time

import numpy as np

from .environment import env
from .errors import CompileError, LaunchError

PLATFORM_ENV = "AUTOSCHED_OPENCL_PLATFORM"


def _pick_devices(cl) -> list:
    platforms = cl.get_platforms()
    if not platforms:
        raise RuntimeError(
            "no OpenCL platform found; install one (e.g. pip install pyopencl[pocl])"
        )
    want = env(PLATFORM_ENV)
    if want:
        chosen = [p for p in platforms if want.lower() in p.name.lower()]
        if not chosen:
            names = [p.name for p in platforms]
            raise RuntimeError(f"{PLATFORM_ENV}={want!r} matches no OpenCL platform in {names}")
        return chosen[0].get_devices()
    for p in platforms:
        try:
            gpus = p.get_devices(device_type=cl.device_type.GPU)
        except cl.Error:  # a platform without GPUs raises DEVICE_NOT_FOUND
            gpus = []
        if gpus:
            return gpus
    failures = []
    for p in platforms:
        devices = p.get_devices()
        reason = _build_probe_failure(cl, devices[0]) if devices else "no devices"
        if reason is None:
            return devices
        failures.append(f"{p.name.strip()} ({p.version.strip()}): {reason}")
    raise RuntimeError(
        "no OpenCL platform here can compile a kernel:\n  "
        + "\n  ".join(failures)
        + "\nOn Debian/Ubuntu, `apt-get install pocl-opencl-icd` gives a PoCL that does; "
        f"or set {PLATFORM_ENV} to a platform that works."
    )


_PROBE_SOURCE = "__kernel void autosched_probe(__global float *a) { a[0] = 1.0f; }"


def _build_probe_failure(cl, device) -> str | None:
    """None when ``device`` builds a trivial kernel, else the first line of the build error."""
    try:
        cl.Program(cl.Context([device]), _PROBE_SOURCE).build()
    except cl.Error as err:
        log = [line for line in str(err).splitlines() if "error" in line.lower()]
        return (log[-1] if log else str(err).splitlines()[0]).strip()
    return None


def _device_properties(cl, d) -> dict:
    """The limits and facts of a pyopencl device (info queries need no context)."""
    vendor = d.platform.name.lower() + " " + d.vendor.lower()
    sizes = list(d.max_work_item_sizes) + [1, 1, 1]
    is_gpu = bool(d.type & cl.device_type.GPU)
    # OpenCL has no portable warp size; NVIDIA warps are 32, AMD wavefronts 64.
    warp = 32 if "nvidia" in vendor else 64 if ("amd" in vendor and is_gpu) else 1
    vec_floats = max(1, int(d.preferred_vector_width_float or 1))
    return {
        "name": d.name.strip(),
        "platform": d.platform.name.strip(),
        "vendor": d.vendor.strip(),
        "num_cores": d.max_compute_units,
        "multi_processor_count": d.max_compute_units,
        "max_threads_per_block": d.max_work_group_size,
        "max_work_group_size": d.max_work_group_size,
        "max_thread_x": int(sizes[0]),
        "max_thread_y": int(sizes[1]),
        "max_thread_z": int(sizes[2]),
        "max_shared_memory_per_block": d.local_mem_size,
        # Registers are not a separate limit in OpenCL; TVM's Ansor leaves this unbounded.
        "max_local_memory_per_block": 2**31 - 1,
        "max_vthread_extent": 8,  # a verifier limit; HardwareParams applies TVM's warp / 4
        "warp_size": warp,
        "vector_unit_bytes": 4 * vec_floats,
        "cache_line_bytes": int(d.global_mem_cacheline_size or 64),
        "global_mem_size": d.global_mem_size,
        "global_mem_cache_size": d.global_mem_cache_size,
        "version": d.version.strip(),  # "OpenCL <major>.<minor> <vendor text>"
        "driver_version": d.driver_version.strip(),
        "max_clock_rate_mhz": d.max_clock_frequency,
        "extensions": d.extensions.split(),
        "is_gpu": is_gpu,
    }


def query_properties(index: int = 0) -> dict:
    """Properties (as :meth:`OpenCLBackend.properties`) of the device a backend would pick.

    Raises RuntimeError (or ImportError) when pyopencl or a usable platform is missing.
    """
    import pyopencl as cl

    devices = _pick_devices(cl)
    if index >= len(devices):
        raise RuntimeError(f"OpenCL device {index} requested but the platform has {len(devices)}")
    return _device_properties(cl, devices[index])


class _Program:
    """A built cl.Program with one cl.Kernel per name (kernels are not thread-safe: one user)."""

    def __init__(self, program, kernels: dict):
        self.program = program
        self.kernels = kernels


class OpenCLBackend:
    """Runtime backend for OpenCL devices (see runtime_contract's Backend protocol).

    Parameters
    ----------
    index : int
        Which device of the chosen platform.
    """

    kind = "opencl"

    def __init__(self, index: int = 0):
        import pyopencl as cl

        self._cl = cl
        devices = _pick_devices(cl)
        if index >= len(devices):
            raise RuntimeError(
                f"OpenCL device {index} requested but the platform has {len(devices)}"
            )
        self.device = devices[index]
        self.context = cl.Context([self.device])
        props = cl.command_queue_properties.PROFILING_ENABLE
        self.queue = cl.CommandQueue(self.context, self.device, properties=props)
        self._events: list = []

    # ------------------------------------------------------------------ facts
    def properties(self) -> dict:
        return _device_properties(self._cl, self.device)

    # ------------------------------------------------------------------ memory
    def alloc(self, nbytes: int):
        cl = self._cl
        return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, size=max(int(nbytes), 1))

    def copy_to_device(self, handle, host: np.ndarray) -> None:
        if host.nbytes:
            self._cl.enqueue_copy(self.queue, handle, np.ascontiguousarray(host), is_blocking=True)

    def copy_to_host(self, handle, host: np.ndarray) -> None:
        if not host.flags.c_contiguous:
            raise ValueError("copy_to_host needs a C-contiguous numpy array")
        if host.nbytes:
            self._cl.enqueue_copy(self.queue, host, handle, is_blocking=True)

    # ------------------------------------------------------------------ code
    def compile(self, code: str, kernel_names: tuple[str, ...], binary=None) -> _Program:
        """Build ``code`` for the device (``binary`` is not supported: see the module doc)."""
        if binary is not None:
            raise CompileError("OpenCL modules load from source only; got a binary")
        cl = self._cl
        try:
            prg = cl.Program(self.context, code).build()
        except cl.Error as err:  # RuntimeError subclasses carry the build log in the message
            raise CompileError(
                f"OpenCL build failed on {self.device.name.strip()}", str(err)
            ) from err
        try:
            kernels = {n: cl.Kernel(prg, n) for n in kernel_names}
        except cl.Error as err:
            raise CompileError(f"kernel missing from the built OpenCL program: {err}") from err
        return _Program(prg, kernels)

    def launch(self, compiled: _Program, name: str, grid, block, handles: list) -> None:
        try:
            kernel = compiled.kernels[name]
        except KeyError:
            raise LaunchError(f"no kernel {name!r}; compiled {sorted(compiled.kernels)}") from None
        block = tuple(int(b) for b in block)
        global_size = tuple(int(g) * b for g, b in zip(grid, block))
        try:
            kernel.set_args(*handles)
            evt = self._cl.enqueue_nd_range_kernel(self.queue, kernel, global_size, block)
        except self._cl.Error as err:
            raise LaunchError(
                f"launching {name} with grid={tuple(grid)} block={block} failed: {err}"
            ) from err
        self._events.append(evt)

    def synchronize(self) -> None:
        self.queue.finish()
        self._events.clear()

    def time_launches(self, fn, number: int) -> float:
        """Mean seconds per call of ``fn``: the sum of its kernels' profiled durations.

        Summing each kernel's start-to-end (as TVM's OpenCL timer does) leaves out the gaps
        while the host enqueues the next kernel, which with Python's launch overhead would
        otherwise dominate short kernels. One ``finish`` per call of this method.
        """
        self.synchronize()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        events = list(self._events)
        self.synchronize()
        wall = time.perf_counter() - t0
        if not events:
            return wall / number
        try:
            busy = sum(e.profile.end - e.profile.start for e in events)
        except self._cl.Error:  # profiling info unavailable: fall back to the host clock
            return wall / number
        return busy * 1e-9 / number
