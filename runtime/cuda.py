"""CUDA backend (pycuda, imported lazily): NVRTC or nvcc to a cubin, cuda events for timing.

Uses the device's primary context (the one PyTorch and the CUDA runtime use), so baselines in
the same process share it. Kernels are compiled for the device's own architecture
(``sm_<major><minor>``) by :func:`compile_cubin` (NVRTC in process through cuda-python or
cupy when one imports, else nvcc; cached by source; needs no pycuda or GPU) and loaded with
``module_from_buffer``; a cubin compiled ahead of time (in the builders) loads with
``compile(..., binary=cubin)`` without compiling again.
:func:`query_properties` reads a device's limits without creating a context.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import logging
import os
import shutil
import struct
import subprocess
import tempfile
import threading
from collections import OrderedDict

import numpy as np

from .errors import CompileError, LaunchError

_log = logging.getLogger(f"autosched.{__name__}")

# Static shared memory above this needs opt-in (dynamic shared memory). Generated kernels use
# static arrays up to it, so this is the limit that applies to most of them.
STATIC_SHARED_LIMIT = 48 * 1024

DYNAMIC_SHARED_SUFFIX = "__dynamic_shared_bytes"
"""A kernel ``k`` that needs more shared memory than static arrays may have comes with a
global ``__device__ unsigned int k__dynamic_shared_bytes`` of C linkage in its module (written
by ``codegen.cuda_shared``). Loading the module opts ``k`` in to that many bytes of dynamic
shared memory (``MAX_DYNAMIC_SHARED_SIZE_BYTES``), and every launch of ``k`` passes them. The
binary says what it needs, so cubins loaded from a file or an RPC server launch the same way."""

# nvcc's -arch when no device says otherwise (the oldest architecture CUDA 12 and 13 both build).
DEFAULT_ARCH = "sm_75"


# Compiled cubins of this process by (compiler, source, arch, options): a builder process
# that builds the same kernel again (a re-measured or re-built candidate, the network's final
# build) compiles it once.
_CUBIN_CACHE: OrderedDict = OrderedDict()
_CUBIN_CACHE_SIZE = 256
_cache_lock = threading.Lock()


def feature_arch(code: str, arch: str) -> str:
    """``arch``, or its architecture-specific form (``sm_90a``) when ``code`` uses an
    instruction only that form has: Hopper's ``wgmma.mma_async``, which no other GPU runs."""
    if arch == "sm_90" and "wgmma.mma_async" in code:
        return "sm_90a"
    return arch


def compile_cubin(
    code: str, arch: str = DEFAULT_ARCH, options=("-O3",), timeout=None, compiler: str = "auto"
) -> bytes:
    """Compile CUDA source to a cubin (no pycuda or GPU needed), cached by source.

    The one place CUDA source is compiled. ``compiler="auto"`` uses NVRTC in this process
    when a binding imports (cuda-python's ``cuda.bindings.nvrtc``, else cupy's), which saves
    nvcc's process start and host compilation (most of its ~1 s per candidate); otherwise
    nvcc in a subprocess. Both give a cubin for ``arch`` that
    :meth:`CudaDevice.compile` loads with ``binary=``. The result is kept in a per-process
    cache keyed by (compiler, source, arch, options).

    Parameters
    ----------
    code : str
        CUDA C++ with ``extern "C"`` kernels (what ``codegen.cuda`` emits).
    arch : str
        ``sm_XY`` of the device that will load the cubin.
    options : sequence of str
        Extra nvcc flags. NVRTC gets the same ones except ``-O3`` (nvcc's host optimization
        level; NVRTC always optimizes device code).
    timeout : float, optional
        Seconds nvcc may take (an in-process NVRTC compilation cannot be interrupted; the
        builders' own timeout covers it).
    compiler : str
        ``"auto"``, ``"nvrtc"`` (an error when no binding imports) or ``"nvcc"``.

    Raises
    ------
    CompileError
        If no compiler is found or it rejects the code (the log carries its messages).
    """
    if compiler not in ("auto", "nvrtc", "nvcc"):
        raise ValueError(f"compile_cubin: compiler must be 'auto', 'nvrtc' or 'nvcc', "
                         f"got {compiler!r}")  # fmt: skip
    nvrtc = nvrtc_binding() if compiler != "nvcc" else None
    if compiler == "nvrtc" and nvrtc is None:
        raise CompileError("NVRTC: neither cuda-python (cuda.bindings.nvrtc) nor cupy imports; "
                           "pip install cuda-python, or use compiler='nvcc'")  # fmt: skip
    kind = nvrtc[0] if nvrtc else "nvcc"
    arch = feature_arch(code, arch)
    key = hashlib.sha256(repr((kind, code, arch, tuple(options))).encode()).digest()
    with _cache_lock:
        cubin = _CUBIN_CACHE.get(key)
        if cubin is not None:
            _CUBIN_CACHE.move_to_end(key)
            return cubin
    if nvrtc:
        flags = [f"--gpu-architecture={arch}", *_include_flags()]
        cubin = nvrtc[1](code, [*flags, *(o for o in options if o != "-O3")], arch)
    else:
        cubin = _nvcc_cubin(code, arch, options, timeout)
    with _cache_lock:
        _CUBIN_CACHE[key] = cubin
        if len(_CUBIN_CACHE) > _CUBIN_CACHE_SIZE:
            _CUBIN_CACHE.popitem(last=False)
    return cubin


def _nvcc() -> str | None:
    nvcc = shutil.which("nvcc") or (
        os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc") if "CUDA_HOME" in os.environ else None
    )
    return nvcc if nvcc and os.path.exists(nvcc) else None


def _nvcc_cubin(code: str, arch: str, options, timeout) -> bytes:
    nvcc = _nvcc()
    if nvcc is None:
        raise CompileError("nvcc not found on PATH (or in $CUDA_HOME/bin)")
    with tempfile.TemporaryDirectory(prefix="autosched_nvcc_") as tmp:
        src, out = os.path.join(tmp, "kernel.cu"), os.path.join(tmp, "kernel.cubin")
        with open(src, "w") as f:
            f.write(code)
        cmd = [nvcc, "--cubin", f"-arch={arch}", *options, "-o", out, src]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as err:
            raise CompileError(f"nvcc did not finish within {timeout} s") from err
        if proc.returncode != 0:
            raise CompileError(f"nvcc failed for {arch}", proc.stderr.strip())
        with open(out, "rb") as f:
            return f.read()


@functools.cache
def _include_flags() -> tuple[str, ...]:
    """``-I`` of the CUDA headers (``cuda_fp16.h``...) for NVRTC, which has no search path:
    $CUDA_HOME, $CUDA_PATH, nvcc's toolkit, /usr/local/cuda (the first that has them)."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = _nvcc()
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    roots.append("/usr/local/cuda")
    for root in filter(None, roots):
        inc = os.path.join(root, "include")
        if os.path.exists(os.path.join(inc, "cuda_fp16.h")):
            return (f"-I{inc}",)
    return ()


@functools.cache
def nvrtc_binding():
    """``(name, compile)`` of the first NVRTC binding that imports and finds its library
    (``"cuda-python"``, then ``"cupy"``), or None: then :func:`compile_cubin` runs nvcc.
    ``compile(code, options, arch) -> cubin`` raises :class:`CompileError` with NVRTC's log."""
    for name, make in (("cuda-python", _cuda_python_nvrtc), ("cupy", _cupy_nvrtc)):
        try:
            return name, make()
        except Exception as err:  # noqa: BLE001 - not installed, or no libnvrtc: try the next one
            _log.debug("NVRTC through %s unavailable: %s", name, err)
            continue
    return None


def _cuda_python_nvrtc():
    from cuda.bindings import nvrtc

    def check(result, what: str, prog=None):
        err = result[0]
        if err == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return result[1:]
        log = ""
        if prog is not None:
            _, n = nvrtc.nvrtcGetProgramLogSize(prog)
            buf = b" " * n
            nvrtc.nvrtcGetProgramLog(prog, buf)
            log = buf.rstrip(b"\0 ").decode(errors="replace")
        raise CompileError(f"NVRTC {what} failed ({err.name})", log)

    check(nvrtc.nvrtcVersion(), "version")  # loads libnvrtc now: no library, no binding

    def compile_(code: str, options: list, arch: str) -> bytes:
        (prog,) = check(nvrtc.nvrtcCreateProgram(code.encode(), b"kernel.cu", 0, [], []), "setup")
        try:
            opts = [o.encode() for o in options]
            check(nvrtc.nvrtcCompileProgram(prog, len(opts), opts), f"for {arch}", prog)
            (n,) = check(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
            buf = b" " * n
            check(nvrtc.nvrtcGetCUBIN(prog, buf), "cubin")
            return buf
        finally:
            nvrtc.nvrtcDestroyProgram(prog)

    return compile_


def _cupy_nvrtc():
    from cupy_backends.cuda.libs import nvrtc

    nvrtc.getVersion()  # loads libnvrtc now

    def compile_(code: str, options: list, arch: str) -> bytes:
        prog = nvrtc.createProgram(code, "kernel.cu", (), ())
        try:
            try:
                nvrtc.compileProgram(prog, options)
            except nvrtc.NVRTCError as err:
                raise CompileError(f"NVRTC for {arch} failed ({err})",
                                   nvrtc.getProgramLog(prog)) from err  # fmt: skip
            return nvrtc.getCUBIN(prog)
        finally:
            nvrtc.destroyProgram(prog)

    return compile_


def _device_properties(cuda, device) -> dict:
    """The limits and facts of a pycuda ``Device`` (attribute queries need no context)."""
    a = cuda.device_attribute
    get = device.get_attribute
    major, minor = device.compute_capability()
    return {
        "name": device.name(),
        "compute_version": f"{major}.{minor}",
        "arch": f"sm_{major}{minor}",
        "num_cores": get(a.MULTIPROCESSOR_COUNT),
        "multi_processor_count": get(a.MULTIPROCESSOR_COUNT),
        "max_threads_per_block": get(a.MAX_THREADS_PER_BLOCK),
        "max_thread_x": get(a.MAX_BLOCK_DIM_X),
        "max_thread_y": get(a.MAX_BLOCK_DIM_Y),
        "max_thread_z": get(a.MAX_BLOCK_DIM_Z),
        "max_grid_x": get(a.MAX_GRID_DIM_X),
        "max_grid_y": get(a.MAX_GRID_DIM_Y),
        "max_grid_z": get(a.MAX_GRID_DIM_Z),
        "max_shared_memory_per_block": min(get(a.MAX_SHARED_MEMORY_PER_BLOCK), STATIC_SHARED_LIMIT),
        # What a kernel may opt in to as dynamic shared memory (227 KB on sm_90).
        "max_shared_memory_per_block_optin": _optin_shared(cuda, device),
        "max_shared_memory_per_multiprocessor": get(a.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        # TVM's Ansor leaves local memory unbounded; spills are slow, not invalid.
        "max_local_memory_per_block": 2**31 - 1,
        "max_registers_per_block": get(a.MAX_REGISTERS_PER_BLOCK),
        "max_registers_per_multiprocessor": get(a.MAX_REGISTERS_PER_MULTIPROCESSOR),
        "max_threads_per_multiprocessor": get(a.MAX_THREADS_PER_MULTIPROCESSOR),
        "warp_size": get(a.WARP_SIZE),
        "max_vthread_extent": 8,
        "l2_cache_size": get(a.L2_CACHE_SIZE),
        "clock_rate_khz": get(a.CLOCK_RATE),
        "total_memory": device.total_memory(),
        # CUDA_VERSION as TVM's api_version reports it (12020 for 12.2), and the driver's.
        "api_version": _version_number(cuda.get_version()),
        "driver_version": cuda.get_driver_version(),
    }


def _version_number(version: tuple) -> int:
    major, minor = (tuple(version) + (0, 0))[:2]
    return int(major) * 1000 + int(minor) * 10


def query_properties(index: int = 0) -> dict:
    """Device ``index``'s properties (as :meth:`CUDABackend.properties`) without a context.

    Raises RuntimeError when pycuda, the driver or the device is missing.
    """
    try:
        import pycuda.driver as cuda
    except ImportError as err:
        raise RuntimeError("pycuda is not installed (pip install pycuda)") from err
    try:
        cuda.init()
        count = cuda.Device.count()
    except Exception as err:  # no driver
        raise RuntimeError(f"CUDA driver unavailable: {err}") from err
    if index >= count:
        raise RuntimeError(f"CUDA device {index} requested but {count} found")
    return _device_properties(cuda, cuda.Device(index))


class _Module:
    """A loaded cubin and its prepared kernel functions by name."""

    def __init__(self, module, functions: dict):
        self.module = module
        self.functions = functions


class _DynamicSharedKernel:
    """A pycuda function that is always launched with ``shared_bytes`` of dynamic shared
    memory (:data:`DYNAMIC_SHARED_SUFFIX`). Every launcher (plain calls, prepared calls, graph
    capture) calls it as a pycuda function, so none can forget the bytes: a launch without
    them would read past the block's shared memory."""

    def __init__(self, function, shared_bytes: int):
        self.function = function
        self.shared_bytes = shared_bytes

    def __call__(self, *args, **kwargs):
        return self.function(*args, shared=self.shared_bytes, **kwargs)

    def prepared_async_call(self, grid, block, stream, *args):
        return self.function.prepared_async_call(
            grid, block, stream, *args, shared_size=self.shared_bytes
        )

    def __getattr__(self, name):  # prepare, num_regs, ... of the pycuda function
        return getattr(self.function, name)


def _dynamic_shared_bytes(cuda, module, name: str) -> int:
    """The dynamic shared memory kernel ``name`` of a loaded ``module`` asks for (0: none)."""
    try:
        ptr, size = module.get_global(name + DYNAMIC_SHARED_SUFFIX)
    except cuda.Error:  # no such symbol: the kernel's shared arrays are static
        return 0
    value = np.zeros(1, np.uint32)
    cuda.memcpy_dtoh(value, ptr)
    return int(value[0])


def _optin_shared(cuda, device) -> int:
    """Shared bytes a block may opt in to (CUDA's ``MAX_SHARED_MEMORY_PER_BLOCK_OPTIN``), or
    the static limit where pycuda or the device does not say."""
    attr = getattr(cuda.device_attribute, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", None)
    try:
        return int(device.get_attribute(attr)) if attr is not None else STATIC_SHARED_LIMIT
    except cuda.Error:
        return STATIC_SHARED_LIMIT


def _kernel(compiled, name: str):
    """The compiled function ``name``, or a LaunchError listing what was compiled."""
    try:
        return compiled.functions[name]
    except KeyError:
        raise LaunchError(f"no kernel {name!r}; compiled {sorted(compiled.functions)}") from None


class CUDABackend:
    """Runtime backend for NVIDIA GPUs (see runtime_contract's Backend protocol).

    Parameters
    ----------
    index : int
        CUDA device ordinal.
    """

    kind = "cuda"

    def __init__(self, index: int = 0):
        try:
            import pycuda.driver as cuda
        except ImportError as err:
            raise RuntimeError("pycuda is not installed (pip install pycuda)") from err
        cuda.init()
        count = cuda.Device.count()
        if index >= count:
            raise RuntimeError(f"CUDA device {index} requested but {count} found")
        self._cuda = cuda
        self.index = index
        self.device = cuda.Device(index)
        self.context = self.device.retain_primary_context()
        if threading.current_thread() is threading.main_thread():
            # Keep it current on the main thread (no push/pop per call); pop it at exit, as
            # pycuda aborts at shutdown when a context is left on a thread's stack.
            self.context.push()
            atexit.register(self._release)
        major, minor = self.device.compute_capability()
        self.arch = f"sm_{major}{minor}"
        self._flush_buf = None  # flush_cache's buffer: (allocation, 4-byte words), twice the L2

    # ------------------------------------------------------------------ context
    @contextlib.contextmanager
    def _current(self):
        """Make the primary context current for one operation on any thread.

        Contexts are per thread; a worker thread (a tuner's compile pool, say) gets it pushed
        for the call and popped after, so no thread exits with a context on its stack.
        """
        cur = self._cuda.Context.get_current()
        if cur is not None and cur.handle == self.context.handle:
            yield
            return
        self.context.push()
        try:
            yield
        finally:
            self._cuda.Context.pop()

    def _release(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to do
            self._cuda.Context.pop()

    # ------------------------------------------------------------------ facts
    def properties(self) -> dict:
        return _device_properties(self._cuda, self.device)

    def free_memory(self) -> int:
        """Free device memory in bytes (``cuMemGetInfo``, in this device's context)."""
        with self._current():
            return int(self._cuda.mem_get_info()[0])

    # ------------------------------------------------------------------ memory
    def alloc(self, nbytes: int):
        with self._current():
            return self._cuda.mem_alloc(max(int(nbytes), 1))

    def copy_to_device(self, handle, host: np.ndarray) -> None:
        if host.nbytes:
            with self._current():
                self._cuda.memcpy_htod(handle, np.ascontiguousarray(host))

    def copy_to_host(self, handle, host: np.ndarray) -> None:
        if not host.flags.c_contiguous:
            raise ValueError("copy_to_host needs a C-contiguous numpy array")
        if host.nbytes:
            with self._current():
                self._cuda.memcpy_dtoh(host, handle)

    # ------------------------------------------------------------------ code
    def compile(self, code: str, kernel_names: tuple[str, ...], binary: bytes | None = None):
        """Compile ``code`` (:func:`compile_cubin`: NVRTC or nvcc), or load ``binary`` (a
        cubin for this device) instead."""
        if binary is None:
            binary = compile_cubin(code, self.arch)
        with self._current():
            return self._compile(code, kernel_names, binary)

    def _compile(self, code: str, kernel_names: tuple[str, ...], binary) -> _Module:
        try:
            mod = self._cuda.module_from_buffer(bytes(binary))
        except self._cuda.Error as err:  # e.g. a cubin for another architecture
            raise CompileError(f"loading the cubin on {self.arch} failed: {err}") from err
        functions = {}
        for name in kernel_names:
            try:
                fn = mod.get_function(name)
            except self._cuda.LogicError as err:
                raise CompileError(f"kernel {name!r} missing from the compiled module") from err
            shared = _dynamic_shared_bytes(self._cuda, mod, name)
            if shared:
                try:
                    attr = self._cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES
                    fn.set_attribute(attr, shared)
                except (self._cuda.Error, AttributeError) as err:
                    raise CompileError(
                        f"kernel {name!r} needs {shared} bytes of dynamic shared memory, and "
                        f"opting in to them failed on {self.arch}: {err}"
                    ) from err
                fn = _DynamicSharedKernel(fn, shared)
            functions[name] = fn
        return _Module(mod, functions)

    def launch(self, compiled: _Module, name: str, grid, block, handles: list) -> None:
        fn = _kernel(compiled, name)
        grid = tuple(int(g) for g in grid)
        block = tuple(int(b) for b in block)
        try:
            with self._current():
                # Pointers only: a bare numpy array would be packed by value (pycuda's rule).
                fn(*handles, grid=grid, block=block)
        except self._cuda.Error as err:
            raise LaunchError(
                f"launching {name} with grid={grid} block={block} failed: {err}"
            ) from err

    def bind(self, compiled: _Module, name: str, grid, block, handles: list):
        """A zero-argument launch of ``name`` with its arguments packed once (timing loops).

        Uses pycuda's prepared calls: the pointer struct is built here, so a call costs one
        driver launch (a few microseconds) rather than pycuda's per-call argument packing.
        Call it with the context current (``time_launches`` does that).
        """
        fn = _kernel(compiled, name)
        grid = tuple(int(g) for g in grid)
        block = tuple(int(b) for b in block)
        fmt = "P" * len(handles)
        fn.prepare(fmt)
        ptrs = [int(h) for h in handles]
        struct.pack(fmt, *ptrs)  # fail here, not in the timed loop, on a bad handle
        error = self._cuda.Error

        def call():
            try:
                fn.prepared_async_call(grid, block, None, *ptrs)
            except error as err:
                raise LaunchError(
                    f"launching {name} with grid={grid} block={block} failed: {err}"
                ) from err

        return call

    def synchronize(self) -> None:
        try:
            with self._current():
                self._cuda.Context.synchronize()
        except self._cuda.Error as err:  # faults inside kernels surface here
            raise LaunchError(f"a CUDA kernel failed: {err}") from err

    def flush_cache(self) -> None:
        """Evict the GPU's L2 cache: write a device buffer twice its size (allocated on first
        use). A kernel timed right after reads its inputs, weights included, from device
        memory, as it does inside a network whose weights do not fit in L2."""
        with self._current():
            if self._flush_buf is None:
                words = 2 * max(int(self.properties()["l2_cache_size"]), 1 << 20) // 4
                self._flush_buf = (self._cuda.mem_alloc(4 * words), words)
            buf, words = self._flush_buf
            self._cuda.memset_d32(buf, 0, words)  # a write allocates the lines: old ones go

    def time_launches(self, fn, number: int) -> float:
        """Mean seconds per call of ``fn`` between two CUDA events on the default stream."""
        with self._current():
            start, end = self._cuda.Event(), self._cuda.Event()
            start.record()
            for _ in range(number):
                fn()
            end.record()
            end.synchronize()
            return start.time_till(end) * 1e-3 / number
