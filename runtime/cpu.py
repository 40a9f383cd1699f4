"""CPU backend: LLVM IR text -> O3 (new pass manager) -> MCJIT -> ctypes function pointers.

ABI of the generated code (codegen/llvm.py emits it):

- every launch name is a function ``i32 name(ptr, ptr, ...)`` taking one pointer per buffer
  argument, returning 0 on success (non-zero: an allocation failed inside);
- a ``parallel`` loop calls ``void autosched_parallel_launch(ptr task, ptr closure, i32 max_tasks)``
  which runs ``void task(ptr closure, i32 task_id, i32 num_tasks)`` once per task
  (``0 <= task_id < num_tasks``, ``num_tasks <= max_tasks`` when ``max_tasks > 0``) and returns
  when all are done. This file provides that symbol: through OpenMP's ``GOMP_parallel`` when
  libgomp can be loaded, else through a Python thread pool calling the task via ctypes (ctypes
  ``CFUNCTYPE`` calls release the GIL, so tasks do run concurrently).

The number of tasks is the usable cores (``environment.cpu_count()``) unless the environment
sets AUTOSCHED_NUM_THREADS; :func:`set_num_threads` changes it at run time.
AUTOSCHED_PARALLEL_LAUNCHER=threadpool forces the thread-pool launcher (read once, when the
first CPU backend is created).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .environment import cpu_count, env
from .errors import CompileError, LaunchError

PARALLEL_LAUNCH_SYMBOL = "autosched_parallel_launch"
ALIGNMENT = 64  # bytes; a cache line, and enough for any vector load

_TASK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32)
_LAUNCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)

# The launcher, set up once per process (see _init_parallel).
_state: dict = {}
_init_lock = threading.Lock()

# After fork() libgomp's thread pool is gone in the child and its next parallel region hangs;
# the child then routes parallel loops to the Python thread pool through @autosched_fallback.
_LAUNCHER_IR = r"""
@autosched_num_threads = global i32 1
@autosched_fallback = global ptr null
@autosched_gomp_used = global i32 0

declare void @GOMP_parallel(ptr, ptr, i32, i32)
declare i32 @omp_get_thread_num()
declare i32 @omp_get_num_threads()

define internal void @trampoline(ptr %data) {
  %fn = load ptr, ptr %data
  %cp = getelementptr inbounds ptr, ptr %data, i64 1
  %closure = load ptr, ptr %cp
  %t = call i32 @omp_get_thread_num()
  %n = call i32 @omp_get_num_threads()
  call void %fn(ptr %closure, i32 %t, i32 %n)
  ret void
}

define void @autosched_parallel_launch(ptr %fn, ptr %closure, i32 %max_tasks) {
entry:
  %nt = load i32, ptr @autosched_num_threads
  %limited = icmp sgt i32 %max_tasks, 0
  %less = icmp slt i32 %max_tasks, %nt
  %cap = and i1 %limited, %less
  %n = select i1 %cap, i32 %max_tasks, i32 %nt
  %single = icmp sle i32 %n, 1
  br i1 %single, label %serial, label %parallel
serial:
  call void %fn(ptr %closure, i32 0, i32 1)
  ret void
parallel:
  %fb = load ptr, ptr @autosched_fallback
  %has_fb = icmp ne ptr %fb, null
  br i1 %has_fb, label %fallback, label %gomp
fallback:
  call void %fb(ptr %fn, ptr %closure, i32 %n)
  ret void
gomp:
  store i32 1, ptr @autosched_gomp_used
  %pack = alloca [2 x ptr]
  store ptr %fn, ptr %pack
  %cp = getelementptr inbounds ptr, ptr %pack, i64 1
  store ptr %closure, ptr %cp
  call void @GOMP_parallel(ptr @trampoline, ptr %pack, i32 %n, i32 0)
  ret void
}
"""


def default_num_threads() -> int:
    """Threads of a parallel kernel: AUTOSCHED_NUM_THREADS, else the usable cores."""
    return env("AUTOSCHED_NUM_THREADS") or cpu_count()


def _llvm():
    """llvmlite.binding, with the native target initialised once (no llvm.initialize() in 0.50)."""
    import llvmlite.binding as llvm

    if "llvm" not in _state:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _state["llvm"] = llvm
    return llvm


def _target_machine(
    triple: str | None = None, pic: bool = False, cpu: str | None = None, features: str = ""
):
    """This host's CPU, or CPU ``cpu`` (default generic) with ``features`` of ``triple``
    (cross-compiling: all LLVM targets are initialised on first use). ``pic`` makes
    position-independent code, which a shared library needs; the JIT takes LLVM's default."""
    llvm = _llvm()
    reloc = "pic" if pic else "default"
    if triple is None or same_triple(triple, llvm.get_default_triple()):
        target = llvm.Target.from_default_triple()
        return target.create_target_machine(
            cpu=llvm.get_host_cpu_name(),
            features=llvm.get_host_cpu_features().flatten(),
            opt=3,
            reloc=reloc,
            codemodel="default" if pic else "jitdefault",
        )
    if "all_targets" not in _state:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _state["all_targets"] = True
    try:
        target = llvm.Target.from_triple(triple)
    except RuntimeError as err:
        raise CompileError(f"LLVM cannot generate code for target triple {triple!r}") from err
    return target.create_target_machine(
        cpu=cpu or "generic", features=features or "", opt=3, reloc=reloc, codemodel="default"
    )


def triple_arch(triple: str) -> str:
    """The architecture part of a target triple (``aarch64-linux-gnu`` -> ``aarch64``)."""
    return triple.split("-", 1)[0].lower()


def same_triple(a: str, b: str) -> bool:
    """Whether code for triple ``a`` runs where ``b`` does: same architecture and system
    (vendor fields such as ``unknown`` / ``pc`` do not matter)."""
    pa, pb = a.lower().split("-"), b.lower().split("-")
    system = lambda parts: [p for p in parts[1:] if p not in ("unknown", "pc", "none")]  # noqa: E731
    return pa[0] == pb[0] and system(pa)[:1] == system(pb)[:1]


def host_cpu_features() -> frozenset[str]:
    """LLVM's names of the features this host's CPU has (``avx512vnni``, ``avxvnni``, ...):
    what generated code may use, since it is compiled for and run on the host."""
    features = _llvm().get_host_cpu_features()
    return frozenset(name for name, on in features.items() if on)


_REQUIRES = "; autosched-requires-cpu-features: "  # codegen.llvm_dot.REQUIRES_HEADER


def _check_required_features(code: str) -> None:
    """Refuse IR that uses CPU instructions this host lacks (LLVM would abort the process)."""
    if not code.startswith(_REQUIRES):
        return
    needed = code[len(_REQUIRES) : code.index("\n")].strip()  # "a+b|c": a and b, or c
    have = host_cpu_features()
    if not any(set(alt.split("+")) <= have for alt in needed.split("|")):
        raise CompileError(
            f"this kernel uses CPU features {needed!r} that this host lacks (it was generated "
            "on another machine); rebuild it here"
        )


def host_signature() -> str:
    """What :func:`compile_object`'s machine code depends on: the target triple, the host CPU
    and its features. Object code made under another signature may not run here."""
    llvm = _llvm()
    cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    return f"{llvm.get_default_triple()} {cpu} {features}"


def _parse(code: str):
    llvm = _llvm()
    try:
        mod = llvm.parse_assembly(code)
        mod.verify()
    except RuntimeError as err:
        raise CompileError("LLVM rejected the generated IR", str(err)) from err
    return mod


def _kernel_arity(mod, kernel_names) -> dict:
    nargs = {}
    for name in kernel_names:
        try:
            fn = mod.get_function(name)
        except NameError as err:
            raise CompileError(f"kernel {name!r} is not defined in the LLVM module") from err
        nargs[name] = len(list(fn.arguments))
    return nargs


def _optimize(mod, tm) -> None:
    llvm = _llvm()
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)


def compile_assembly(code: str) -> str:
    """LLVM IR text -> O3 -> this host's assembly text (what ``compile_object`` would encode):
    to see which instructions a kernel uses."""
    mod = _parse(code)
    tm = _target_machine()
    _optimize(mod, tm)
    try:
        return tm.emit_assembly(mod)
    except RuntimeError as err:
        raise CompileError("LLVM failed to generate assembly", str(err)) from err


def compile_object(
    code: str, triple: str | None = None, pic: bool = False, cpu: str | None = None,
    features: str = "",
) -> bytes:  # fmt: skip
    """LLVM IR text -> O3 -> a relocatable object file, as bytes: for this host, or for
    ``triple`` (e.g. ``"aarch64-linux-gnu"``, a generic CPU of that architecture).

    The expensive half of :meth:`CPUBackend.compile`, as a pure function so that tuning can run
    it in parallel builder processes and ship the bytes to the measuring process. ``pic``
    makes position-independent code, for linking into a shared library
    (:mod:`runtime.shared_library`); ``cpu`` / ``features`` (LLVM's ``-mcpu`` / ``-mattr``)
    choose the CPU of another triple.
    """
    return emit_object(_parse(code), triple, pic, cpu, features)


def emit_object(
    mod, triple: str | None = None, pic: bool = False, cpu: str | None = None, features: str = ""
) -> bytes:
    """An object file of the parsed llvmlite module ``mod`` (see :func:`compile_object`)."""
    tm = _target_machine(triple, pic, cpu, features)
    _optimize(mod, tm)
    try:
        return bytes(tm.emit_object(mod))
    except RuntimeError as err:
        raise CompileError("LLVM failed to generate machine code", str(err)) from err


def _init_parallel() -> None:
    """Register the parallel launcher symbol once per process."""
    with _init_lock:
        if "launcher" in _state:
            return
        llvm = _llvm()
        gomp = ctypes.util.find_library("gomp") or "libgomp.so.1"
        try:
            if env("AUTOSCHED_PARALLEL_LAUNCHER") == "threadpool":
                raise RuntimeError("thread pool launcher requested")
            llvm.load_library_permanently(gomp)
            mod = llvm.parse_assembly(_LAUNCHER_IR)
            mod.verify()
            engine = llvm.create_mcjit_compiler(mod, _target_machine())
            engine.finalize_object()
            addr = engine.get_function_address(PARALLEL_LAUNCH_SYMBOL)
            glob = engine.get_global_value_address
            _state.update(
                engine=engine,
                nthreads_ptr=ctypes.c_int32.from_address(glob("autosched_num_threads")),
                fallback_ptr=ctypes.c_void_p.from_address(glob("autosched_fallback")),
                gomp_used=ctypes.c_int32.from_address(glob("autosched_gomp_used")),
            )
            _state["launcher"] = "openmp"
        except Exception:  # no libgomp: fall back to a thread pool driven from Python
            cb = _LAUNCH(_python_launch)
            addr = ctypes.cast(cb, ctypes.c_void_p).value
            _state.update(callback=cb, nthreads_ptr=ctypes.c_int32(1))
            _state["launcher"] = "threadpool"
        llvm.add_symbol(PARALLEL_LAUNCH_SYMBOL, addr)
        _state["nthreads_ptr"].value = default_num_threads()
        os.register_at_fork(after_in_child=_after_fork_in_child)


def _after_fork_in_child() -> None:
    """Threads do not survive fork(): drop the pool; leave libgomp if the parent used it."""
    _state.pop("pool", None)
    if _state.get("launcher") == "openmp" and _state["gomp_used"].value:
        cb = _state["callback"] = _LAUNCH(_python_launch)
        _state["fallback_ptr"].value = ctypes.cast(cb, ctypes.c_void_p).value
        _state["launcher"] = "threadpool"


def _python_launch(fn, closure, max_tasks) -> None:
    n = _state["nthreads_ptr"].value
    if max_tasks > 0:
        n = min(n, max_tasks)
    task = _TASK(fn)
    if n <= 1:
        task(closure, 0, 1)
        return
    pool = _state.get("pool")
    if pool is None or pool._max_workers < n - 1:
        pool = _state["pool"] = ThreadPoolExecutor(max_workers=n - 1)
    futures = [pool.submit(task, closure, t, n) for t in range(1, n)]
    task(closure, 0, n)
    for f in futures:
        f.result()


def set_num_threads(n: int) -> None:
    """Run ``parallel`` loops with ``n`` tasks from now on (process-wide)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"number of threads must be a positive int, got {n!r}")
    _init_parallel()
    _state["nthreads_ptr"].value = n


def get_num_threads() -> int:
    _init_parallel()
    return _state["nthreads_ptr"].value


def parallel_launcher() -> str:
    """ "openmp" or "threadpool": what runs parallel loops in this process."""
    _init_parallel()
    return _state["launcher"]


class CompiledCPU:
    """A JIT-compiled LLVM module; keeps the execution engine (and so the code) alive."""

    def __init__(self, engine, module, functions: dict):
        self.engine = engine
        self.module = module
        self.functions = functions

    @property
    def ir(self) -> str:
        """The optimised LLVM IR (after O3)."""
        return str(self.module)


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
        return CompiledCPU(engine, mod, functions)

    def launch(self, compiled: CompiledCPU, name: str, grid, block, handles: list) -> None:
        fn = compiled.functions.get(name)
        if fn is None:
            have = sorted(compiled.functions)
            raise LaunchError(f"kernel {name!r} was not compiled; have {have}")
        status = fn(*[h.ctypes.data for h in handles])
        if status != 0:
            raise LaunchError(f"kernel {name!r} failed with status {status} (out of memory?)")

    def bind(self, compiled: CompiledCPU, name: str, grid, block, handles: list):
        """``launch`` with its arguments converted once: a zero-argument callable."""
        fn = compiled.functions.get(name)
        if fn is None:
            have = sorted(compiled.functions)
            raise LaunchError(f"kernel {name!r} was not compiled; have {have}")
        ptrs = [h.ctypes.data for h in handles]

        def run() -> None:
            if fn(*ptrs) != 0:
                raise LaunchError(f"kernel {name!r} failed with a non-zero status")

        run.handles = list(handles)  # the pointers are only valid while the arrays live
        return run

    def synchronize(self) -> None:
        """CPU launches are synchronous."""

    def time_launches(self, fn, number: int) -> float:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - start) / number
