"""CPU backend: LLVM IR text -> O3 (new pass manager) -> MCJIT -> ctypes function pointers.

ABI of the generated code (codegen/llvm.py emits it):

- every launch name is a function ``i32 name(ptr, ptr, ...)`` taking one pointer per buffer
  argument, returning 0 on success (non-zero: an allocation failed inside);
- a ``parallel`` loop calls ``void autosched_parallel_for(ptr task, ptr closure, i64 extent)``
  which runs ``void task(ptr closure, i64 begin, i64 end)`` over disjoint ranges covering
  ``[0, extent)`` and returns when all are done. This file provides that symbol: by default our
  own thread pool (runtime/cpu_pool.py: per-thread ranges with stealing, so that a thread the OS
  has descheduled is never waited for), or libgomp's ``GOMP_parallel`` with static ranges when
  AUTOSCHED_PARALLEL_LAUNCHER=openmp (the pool takes over in a child after ``fork()``, where
  libgomp's threads are gone). ``autosched_parallel_launch`` (the ABI before: one call per task)
  stays defined for object code built before.

The number of threads is AUTOSCHED_NUM_THREADS if set, else the usable cores (``cpu_count()``:
affinity and cgroup quota); :func:`set_num_threads` changes it at run time and
:func:`num_threads` for a block of code.

This module holds the launcher's setup, the thread count and the backend (:class:`CPUBackend`:
memory, loading, launching, timing); ``cpu_compile.py`` (LLVM IR -> machine code) and
``cpu_launcher_ir.py`` (the launchers' IR text) hold the rest. Import every name from here.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import logging
import os
import threading
import time

import numpy as np

from . import cpu_pool
from .cpu_compile import (
    _check_required_features,
    _jit,
    _kernel_arity,
    _llvm,
    _optimize,
    _parse,
    _state,
    _target_machine,
    _text_arity,
    compile_assembly,
    compile_object,
    emit_object,
    host_cpu_features,
    host_signature,
    same_triple,
    triple_arch,
)
from .cpu_launcher_ir import GOMP_IR as _GOMP_IR
from .cpu_launcher_ir import LAUNCHER_IR as _LAUNCHER_IR
from .cpu_launcher_ir import SERIAL_IR as _SERIAL_IR
from .environment import cpu_count, env
from .errors import CompileError, IndexOutOfRangeError, LaunchError

__all__ = [
    "ALIGNMENT",
    "INDEX_CHECKS_SUFFIX",
    "INDEX_ERROR_STATUS",
    "INDEX_ERROR_SUFFIX",
    "PARALLEL_FOR_SYMBOL",
    "PARALLEL_LAUNCH_SYMBOL",
    "CPUBackend",
    "CompiledCPU",
    "compile_assembly",
    "compile_object",
    "default_num_threads",
    "emit_object",
    "get_num_threads",
    "host_cpu_features",
    "host_signature",
    "index_error",
    "num_threads",
    "parallel_for",
    "parallel_launcher",
    "same_triple",
    "set_num_threads",
    "triple_arch",
    # Private, imported from here by runtime/shared_library.py, tests and benchmarks.
    "_LAUNCHER_IR",
    "_llvm",
    "_optimize",
    "_parse",
    "_state",
    "_target_machine",
    "_text_arity",
]

PARALLEL_FOR_SYMBOL = "autosched_parallel_for"
# codegen/llvm.py's checked data-dependent indices (the ABI: kept in step with it).
INDEX_ERROR_STATUS = 3
INDEX_ERROR_SUFFIX = "__index_error"
INDEX_CHECKS_SUFFIX = "__index_checks"
PARALLEL_LAUNCH_SYMBOL = "autosched_parallel_launch"
ALIGNMENT = 64  # bytes; a cache line, and enough for any vector load

_logger = logging.getLogger(f"autosched.{__name__}")

_TASK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_PARALLEL_FOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
_WORKER = ctypes.CFUNCTYPE(None, ctypes.c_int32)
_VOID = ctypes.CFUNCTYPE(None)

# The launcher is set up once per process (see _init_parallel); its state is cpu_compile._state.
_init_lock = threading.Lock()


def default_num_threads() -> int:
    """Threads of a parallel kernel: AUTOSCHED_NUM_THREADS, else the usable cores."""
    return env("AUTOSCHED_NUM_THREADS") or cpu_count()


def _init_parallel() -> None:
    """Set up the parallel launcher once per process and register its symbols."""
    with _init_lock:
        if "launcher" in _state:
            return
        llvm = _llvm()
        pooled = cpu_pool.supported()
        engine = _jit(cpu_pool.pool_ir() if pooled else _SERIAL_IR)
        fn, glob = engine.get_function_address, engine.get_global_value_address
        _state.update(
            engine=engine,
            threads=[],
            nthreads_ptrs=[ctypes.c_int32.from_address(glob("autosched_num_threads"))],
            launcher="threadpool" if pooled else "serial",
        )
        if pooled:
            _state.update(
                worker=_WORKER(fn("autosched_pool_worker")),
                shutdown=_VOID(fn("autosched_pool_shutdown")),
                reset=_VOID(fn("autosched_pool_reset")),
            )
        parallel_for = fn(PARALLEL_FOR_SYMBOL)
        llvm.add_symbol(PARALLEL_LAUNCH_SYMBOL, fn(PARALLEL_LAUNCH_SYMBOL))
        if env("AUTOSCHED_PARALLEL_LAUNCHER") == "openmp":
            try:
                llvm.load_library_permanently(ctypes.util.find_library("gomp") or "libgomp.so.1")
                llvm.add_symbol("as_pool_parallel_for", parallel_for)
                gomp = _jit(_GOMP_IR)
            except Exception as err:  # no libgomp: keep the pool
                _logger.warning("libgomp could not be loaded (%s); using our thread pool", err)
            else:
                gg = gomp.get_global_value_address
                _state["gomp_engine"] = gomp
                _state["gomp_off"] = ctypes.c_int32.from_address(gg("gomp_off"))
                _state["nthreads_ptrs"].append(ctypes.c_int32.from_address(gg("gomp_num_threads")))
                parallel_for = gomp.get_function_address("autosched_gomp_parallel_for")
                _state["launcher"] = "openmp"
        llvm.add_symbol(PARALLEL_FOR_SYMBOL, parallel_for)
        _state["parallel_for"] = _PARALLEL_FOR(parallel_for)
        _set_threads(default_num_threads())
        os.register_at_fork(after_in_child=_after_fork_in_child)
        atexit.register(_stop_workers)


def _set_threads(n: int) -> None:
    for ptr in _state["nthreads_ptrs"]:
        ptr.value = n
    _start_workers(n - 1)


def _start_workers(count: int) -> None:
    """Make sure ``count`` pool workers run (each a Python thread inside the native loop)."""
    if "worker" not in _state:
        return
    threads = _state["threads"]
    while len(threads) < min(count, cpu_pool.MAX_THREADS - 1):
        index = len(threads) + 1
        t = threading.Thread(
            target=_state["worker"], args=(index,), name=f"autosched-cpu-{index}", daemon=True
        )
        t.start()
        threads.append(t)


def _stop_workers() -> None:
    """At exit: let the workers leave their loop before the pool's code is freed."""
    if "shutdown" in _state and _state["threads"]:
        _state["shutdown"]()
        for t in _state["threads"]:
            t.join(timeout=2.0)
        _state["threads"] = []
        _state["reset"]()


def _after_fork_in_child() -> None:
    """Threads do not survive fork(): start the pool's workers again; leave libgomp."""
    if "reset" in _state:
        _state["threads"] = []
        _state["reset"]()
    if _state.get("launcher") == "openmp":
        _state["gomp_off"].value = 1
        _state["launcher"] = "threadpool"
    if "worker" in _state:
        _start_workers(_state["nthreads_ptrs"][0].value - 1)


def set_num_threads(n: int) -> None:
    """Run ``parallel`` loops with ``n`` threads from now on (process-wide).

    Parameters
    ----------
    n : int
        Threads, the calling one included (onnxruntime's ``intra_op_num_threads``); more than
        the usable cores (:func:`runtime.environment.cpu_count`) over-subscribes them.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"number of threads must be a positive int, got {n!r}")
    _init_parallel()
    _set_threads(n)


def get_num_threads() -> int:
    _init_parallel()
    return _state["nthreads_ptrs"][0].value


@contextlib.contextmanager
def num_threads(n: int | None):
    """``with num_threads(n):`` runs the block's parallel loops with ``n`` threads (None: as
    set), then restores the count before."""
    if n is None:
        yield
        return
    before = get_num_threads()
    set_num_threads(n)
    try:
        yield
    finally:
        set_num_threads(before)


def parallel_launcher() -> str:
    """ "threadpool" (ours), "openmp" (libgomp) or "serial": what runs parallel loops here."""
    _init_parallel()
    return _state["launcher"]


def parallel_for(task, closure, extent: int) -> None:
    """Run a ``task(closure, begin, end)`` function pointer over ``[0, extent)`` (for tests)."""
    _init_parallel()
    _state["parallel_for"](task, closure, extent)


class CompiledCPU:
    """A JIT-compiled LLVM module; keeps the execution engine (and so the code) alive."""

    def __init__(self, engine, module, functions: dict, code: str | None = None):
        self.engine = engine
        self._module = module
        self._code = code
        self.functions = functions

    @property
    def module(self):
        """The llvmlite module (parsed on first use when the code was loaded as an object)."""
        if self._module is None and self._code is not None:
            self._module = _parse(self._code)
        return self._module

    @property
    def ir(self) -> str:
        """The optimised LLVM IR (after O3); the IR as generated when the code was loaded
        from its object file."""
        return str(self.module)


def index_error(symbol_address, name: str) -> IndexOutOfRangeError | None:
    """The error of kernel ``name``'s out-of-range data-dependent index, read (and cleared, for
    the next run) from its module's error slot; ``symbol_address(symbol)`` gives a global's
    address (0 if absent). None when the kernel has no such slot."""
    slot_addr = symbol_address(name + INDEX_ERROR_SUFFIX)
    table_addr = symbol_address(name + INDEX_CHECKS_SUFFIX)
    if not slot_addr or not table_addr:
        return None
    slot = (ctypes.c_int64 * 2).from_address(slot_addr)
    check, value = int(slot[0]), int(slot[1])
    slot[0] = slot[1] = 0
    lines = ctypes.string_at(table_addr).decode().splitlines()
    if not 1 <= check <= len(lines):
        return None
    tensor, axis, extent = lines[check - 1].split("\t")
    return IndexOutOfRangeError(
        f"kernel {name!r}: index {value} is out of range for axis {axis} of tensor {tensor!r} "
        f"(size {extent}; valid indices are 0..{int(extent) - 1}): a data-dependent index "
        "read from an input (a token id, say) is outside the table; fix the input. Nothing was "
        "read outside the tensor and this run's outputs are invalid",
        tensor=tensor,
        axis=int(axis),
        value=value,
    )


def _status_error(compiled, name: str, status: int) -> LaunchError:
    if status == INDEX_ERROR_STATUS:
        # A JIT engine can look the error slot up; an exported library keeps it internal.
        lookup = getattr(compiled.engine, "get_global_value_address", None)
        err = index_error(lookup, name) if lookup is not None else None
        if err is None:
            err = IndexOutOfRangeError(
                f"kernel {name!r}: a data-dependent index (a token id, say) is out of range "
                "for its tensor; fix the input. Nothing was read outside the tensor and this "
                "run's outputs are invalid"
            )
        return err
    return LaunchError(f"kernel {name!r} failed with status {status} (out of memory?)")


class CPUBackend:
    """The host CPU through llvmlite (see the module docstring for the calling convention)."""

    kind = "cpu"

    def __init__(self, index: int = 0):
        if index != 0:
            raise RuntimeError(f"there is only one CPU device (index 0), got index {index}")
        self.index = index
        _llvm()
        _init_parallel()

    def properties(self) -> dict:
        llvm = _llvm()
        features = llvm.get_host_cpu_features()
        vector_bits = 512 if features.get("avx512f") else 256 if features.get("avx") else 128
        return {
            "name": llvm.get_host_cpu_name(),
            "num_cores": get_num_threads(),
            "vector_bits": vector_bits,
            "vector_unit_bytes": vector_bits // 8,  # Ansor's HardwareParams name
            "cache_line_bytes": 64,
            "target_triple": llvm.get_process_triple(),
            "parallel_launcher": parallel_launcher(),
            # GPU limits do not apply; 1 keeps a GPU verifier from accepting a thread binding.
            "max_threads_per_block": 1,
            "max_shared_memory_per_block": 0,
            "max_local_memory_per_block": 1 << 30,
            "warp_size": 1,
        }

    # ---------------------------------------------------------------- memory
    def alloc(self, nbytes: int) -> np.ndarray:
        raw = np.empty(int(nbytes) + ALIGNMENT, dtype=np.uint8)
        offset = (-raw.ctypes.data) % ALIGNMENT
        return raw[offset : offset + int(nbytes)]

    def copy_to_device(self, handle, host: np.ndarray) -> None:
        src = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        handle.reshape(-1).view(np.uint8)[: src.size] = src

    def copy_to_host(self, handle, host: np.ndarray) -> None:
        dst = host.reshape(-1).view(np.uint8)
        dst[...] = handle.reshape(-1).view(np.uint8)[: dst.size]

    # ---------------------------------------------------------------- code
    def compile(self, code: str, kernel_names: tuple[str, ...], binary: bytes | None = None):
        """JIT-compile ``code``; with ``binary`` (from :func:`compile_object` of the same
        code, possibly in another process) only link that object file, which takes
        milliseconds instead of the O3 pipeline's tenths of a second."""
        llvm = _llvm()
        _check_required_features(code)
        # With the object file, the IR is only needed for the kernels' arity: read it from
        # the text (the measuring process loads every candidate; parsing took it ~10-100 ms).
        nargs = None if binary is None else _text_arity(code, kernel_names)
        mod = None
        if nargs is None:
            mod = _parse(code)
            nargs = _kernel_arity(mod, kernel_names)
        tm = _target_machine()
        if binary is None:
            _optimize(mod, tm)
        try:
            if binary is None:
                engine = llvm.create_mcjit_compiler(mod, tm)  # the engine owns tm and mod now
            else:
                engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
                engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(binary)))
            engine.finalize_object()
        except RuntimeError as err:
            raise CompileError("LLVM failed to generate machine code", str(err)) from err
        functions = {}
        for name in kernel_names:
            addr = engine.get_function_address(name)
            if not addr:
                raise CompileError(f"kernel {name!r} has no address after JIT compilation")
            proto = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.c_void_p] * nargs[name]))
            functions[name] = proto(addr)
        return CompiledCPU(engine, mod, functions, code)

    def launch(self, compiled: CompiledCPU, name: str, grid, block, handles: list) -> None:
        fn = compiled.functions.get(name)
        if fn is None:
            have = sorted(compiled.functions)
            raise LaunchError(f"kernel {name!r} was not compiled; have {have}")
        status = fn(*[h.ctypes.data for h in handles])
        if status != 0:
            raise _status_error(compiled, name, status)

    def bind(self, compiled: CompiledCPU, name: str, grid, block, handles: list):
        """``launch`` with its arguments converted once: a zero-argument callable."""
        fn = compiled.functions.get(name)
        if fn is None:
            have = sorted(compiled.functions)
            raise LaunchError(f"kernel {name!r} was not compiled; have {have}")
        ptrs = [h.ctypes.data for h in handles]

        def run() -> None:
            status = fn(*ptrs)
            if status != 0:
                raise _status_error(compiled, name, status)

        run.handles = list(handles)  # the pointers are only valid while the arrays live
        return run

    def synchronize(self) -> None:
        """CPU launches are synchronous."""

    def time_launches(self, fn, number: int) -> float:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - start) / number
