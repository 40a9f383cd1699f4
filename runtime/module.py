"""Loaded modules: compile generated code once, then run or time it on numpy arrays or NDArrays.

``load_module`` takes plain values only (``codegen.Source.as_dict()``), so the runtime never
imports codegen or tensorir.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np

from .device import DEVICE_KINDS, Device
from .device import device as make_device
from .ndarray import NDArray, np_dtype
from .timer import TimingResult, measure, measure_short_runs

# Source language -> the device kind that loads it (runtime.device's table).
LANG_DEVICE = {k.lang: k.name for k in DEVICE_KINDS.values()}


def cpu_threads(dev: Device, num_threads: int | None):
    """A context-manager factory running a block's CPU parallel loops with ``num_threads``
    threads (None: leave the count as it is). Checked now, so a bad value fails at once."""
    if num_threads is None:
        return contextlib.nullcontext
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive int or None, got {num_threads!r}")
    if not dev.on_host:
        raise ValueError(f"num_threads applies to CPU parallel loops, not to {dev}; leave it None")
    from .cpu import num_threads as threads

    return lambda: threads(num_threads)


def _same_memory(a, b) -> bool:
    """Whether two arguments overlap in memory (numpy arrays) or are one buffer (NDArrays)."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        # may_share_memory compares bounds only (cheap); shares_memory settles strided views.
        return np.may_share_memory(a, b) and np.shares_memory(a, b)
    return a is b


class Module:
    """A compiled program bound to a device.

    Call it with one array per param (inputs then outputs, in ``params`` order). numpy arrays
    are copied to the device and back (on the CPU a C-contiguous array of the right dtype is
    used in place); NDArrays on the module's device are used in place. ``shapes`` (param name
    -> shape) and ``outputs`` (the names the code writes), when given, make a call check each
    array's shape (not only its size) and refuse a read-only array as an output.

    ``state``, where the builder sets it, is the state the kernel was built from as plain
    data (as ``GraphPlan.states``): :meth:`export_library` records it, so that an RPC server
    can rebuild the kernel instead of running the library's code.
    """

    state: dict | None = None

    def __init__(
        self, lang, code, params, workspaces, launches, dev: Device, binary=None, layouts=(),
        shapes=None, outputs=(), compiled=None,
    ):  # fmt: skip
        self.lang = lang
        self.code = code
        self.params = tuple((str(n), str(d), int(s)) for n, d, s in params)
        self.workspaces = tuple((str(n), str(d), int(s)) for n, d, s in workspaces)
        self.launches = tuple(
            (str(name), tuple(args), tuple(grid), tuple(block))
            for name, args, grid, block in launches
        )
        # Params stored in a rewritten layout: name -> (name, orig_size, offset, coefs, shape).
        self.layouts = {str(lay[0]): tuple(lay) for lay in layouts}
        self.shapes = {str(n): tuple(int(d) for d in sh) for n, sh in dict(shapes or {}).items()}
        self.outputs = frozenset(str(n) for n in outputs)
        self.device = dev
        self._backend = dev.backend
        names = [p[0] for p in self.params] + [w[0] for w in self.workspaces]
        if len(set(names)) != len(names):
            raise ValueError(f"buffer names of a module must be unique, got {names}")
        for name, args, _, _ in self.launches:
            unknown = [a for a in args if a not in names]
            if unknown:
                raise ValueError(f"launch {name!r} names unknown buffers {unknown}; known: {names}")
        kernel_names = tuple(dict.fromkeys(la[0] for la in self.launches))
        if compiled is not None:  # already loaded, e.g. from a shared library
            self._compiled = compiled
        elif binary is None:
            self._compiled = self._backend.compile(code, kernel_names)
        else:
            self._compiled = self._backend.compile(code, kernel_names, binary=binary)
        self._workspace_handles = {
            n: self._backend.alloc(max(1, s * np_dtype(d).itemsize)) for n, d, s in self.workspaces
        }
        self._staging: dict[int, object] = {}  # param index -> device buffer for numpy args

    # ------------------------------------------------------------------ arguments
    def _check(self, args: Sequence) -> None:
        if len(args) != len(self.params):
            expected = ", ".join(f"{n}: {d}[{s}]" for n, d, s in self.params)
            raise TypeError(
                f"module expects {len(self.params)} arrays ({expected}) but got {len(args)}"
            )
        for (name, dtype, size), arr in zip(self.params, args):
            if isinstance(arr, NDArray):
                if arr.device != self.device:
                    raise ValueError(
                        f"param {name!r}: array is on {arr.device} but the module runs on "
                        f"{self.device}; copy it with runtime.array(x.numpy(), dev)"
                    )
                got_dtype, got_size = arr.dtype, arr.size
            elif isinstance(arr, np.ndarray):
                got_dtype, got_size = str(arr.dtype), arr.size
            else:
                raise TypeError(
                    f"param {name!r}: expected a numpy array or NDArray, got {type(arr).__name__}"
                )
            if np_dtype(got_dtype) != np_dtype(dtype):
                raise TypeError(f"param {name!r}: expected dtype {dtype}, got {got_dtype}")
            if got_size != size:
                raise ValueError(
                    f"param {name!r}: expected {size} elements, got {got_size} "
                    f"(shape {getattr(arr, 'shape', '?')})"
                )
            want = self.shapes.get(name)
            if want is not None and tuple(arr.shape) != want:
                raise ValueError(
                    f"param {name!r}: expected shape {want}, got {tuple(arr.shape)} (same size, "
                    "other shape); reshape the array to the tensor's shape"
                )
            if name in self.outputs and isinstance(arr, np.ndarray) and not arr.flags.writeable:
                raise ValueError(
                    f"param {name!r} is an output but its array is read-only "
                    "(flags.writeable=False); pass a writable array, e.g. np.empty_like(...)"
                )
        self._check_no_aliasing(args)

    def _check_no_aliasing(self, args: Sequence) -> None:
        """Refuse an output whose memory is also another argument's: kernels read inputs while
        writing outputs, so ``f(a, a)`` computed from half-overwritten data, silently."""
        names = [name for name, _, _ in self.params]
        for k, (name, out) in enumerate(zip(names, args)):
            if name not in self.outputs:
                continue
            for j, (other_name, other) in enumerate(zip(names, args)):
                if j != k and _same_memory(out, other):
                    raise ValueError(
                        f"param {name!r} is an output but its array shares memory with param "
                        f"{other_name!r}; pass a separate output array, e.g. np.empty_like(...)"
                    )

    def _prepare(self, args: Sequence) -> tuple[dict, list]:
        """Device handles by buffer name, and the (numpy array, handle) pairs to copy back."""
        self._check(args)
        handles = dict(self._workspace_handles)
        copy_back = []
        on_cpu = self.device.on_host
        for i, ((name, dtype, size), arr) in enumerate(zip(self.params, args)):
            if isinstance(arr, NDArray):
                handles[name] = arr.handle
                continue
            if on_cpu and arr.flags.c_contiguous and arr.flags.writeable:
                handles[name] = arr  # zero copy: the CPU backend takes numpy arrays as handles
                continue
            h = self._staging.get(i)
            if h is None:
                h = self._backend.alloc(max(1, size * np_dtype(dtype).itemsize))
                self._staging[i] = h
            if size:
                self._backend.copy_to_device(h, np.ascontiguousarray(arr).reshape(-1))
            handles[name] = h
            if arr.flags.writeable:
                copy_back.append((arr, h))
        return handles, copy_back

    def _finish(self, copy_back: list) -> None:
        self._backend.synchronize()
        for arr, h in copy_back:
            if arr.flags.c_contiguous:
                self._backend.copy_to_host(h, arr.reshape(-1))
            else:
                tmp = np.empty(arr.size, dtype=arr.dtype)
                self._backend.copy_to_host(h, tmp)
                arr[...] = tmp.reshape(arr.shape)

    def _run(self, handles: dict) -> None:
        for name, args, grid, block in self.launches:
            self._backend.launch(self._compiled, name, grid, block, [handles[a] for a in args])

    def _bound_run(self, handles: dict):
        """A zero-argument function running all launches on ``handles``, for timing loops.

        Backends may offer ``bind(compiled, name, grid, block, handles) -> callable`` to take
        argument conversion out of the timed loop; otherwise ``launch`` is called each time.
        """
        bind = getattr(self._backend, "bind", None)
        if bind is None:
            return lambda: self._run(handles)
        calls = [
            bind(self._compiled, name, grid, block, [handles[a] for a in args])
            for name, args, grid, block in self.launches
        ]
        if len(calls) == 1:
            return calls[0]

        def run_all():
            for call in calls:
                call()

        return run_all

    # ------------------------------------------------------------------ public API
    def __call__(self, *args) -> None:
        """Run every launch once on ``args`` (one array per param) and wait for the result."""
        handles, copy_back = self._prepare(args)
        self._run(handles)
        self._finish(copy_back)

    def time_evaluator(
        self, number: int = 10, repeat: int = 3, min_repeat_ms: float = 0, num_threads=None
    ):
        """A function ``f(*args) -> TimingResult`` timing this module on ``args``.

        One warm-up run comes first; each of ``repeat`` results is the mean over ``number`` runs,
        ``number`` being raised until one repeat lasts at least ``min_repeat_ms``. Times are in
        seconds and cover the launches only (argument copies happen before timing). On CUDA a
        run shorter than 50 us is timed as replays of a CUDA graph of 10 runs, as a network
        replays its kernels (:func:`runtime.timer.measure_short_runs`: launched one by one from
        Python, such runs cannot start faster than the host issues them).
        ``num_threads`` (CPU only) runs the parallel loops with that many threads while timing
        (default: the process-wide count, :func:`runtime.cpu.set_num_threads`).
        """
        threads = cpu_threads(self.device, num_threads)

        def evaluate(*args) -> TimingResult:
            handles, copy_back = self._prepare(args)
            run = self._bound_run(handles)
            graphs: list = []
            try:
                with threads():
                    if self.device.kind == "cuda":
                        result = measure_short_runs(
                            self._backend.time_launches,
                            run,
                            lambda runs: self._graph_replay(handles, runs, graphs),
                            number=number,
                            repeat=repeat,
                            min_repeat_ms=min_repeat_ms,
                        )
                    else:
                        result = measure(
                            self._backend.time_launches,
                            run,
                            number=number,
                            repeat=repeat,
                            min_repeat_ms=min_repeat_ms,
                        )
            finally:
                for graph in graphs:
                    graph.close()
            self._finish(copy_back)
            return result

        return evaluate

    def _graph_replay(self, handles: dict, runs: int, graphs: list):
        """A function enqueuing one replay of a CUDA graph of ``runs`` runs of every launch on
        ``handles`` (the runner is appended to ``graphs`` for closing); None when capturing
        fails (:class:`runtime.cuda_graph.CUDAGraphRunner` says why, once)."""
        from .cuda_graph import CUDAGraphRunner

        functions = self._compiled.functions
        launches = [
            (functions[name], grid, block, [handles[a] for a in args])
            for name, args, grid, block in self.launches
        ]
        runner = CUDAGraphRunner(self._backend, launches * runs)
        graphs.append(runner)
        if not runner.capture():
            return None

        def replay() -> None:
            if not runner.launch():  # timing nothing would read as a very fast kernel
                raise RuntimeError(f"replaying the timing graph failed: {runner.reason}")

        return replay

    def get_source(self) -> str:
        """The generated code (a ``str``; a notebook shows it highlighted)."""
        from .display import SourceCode

        return SourceCode(self.code, self.lang)

    def artifact(self) -> dict:
        """This module's code and buffers as ``load_module`` keyword values (plain values)."""
        return {
            "lang": self.lang,
            "code": self.code,
            "params": [list(p) for p in self.params],
            "workspaces": [list(w) for w in self.workspaces],
            "launches": [[n, list(a), list(g), list(b)] for n, a, g, b in self.launches],
            "layouts": [list(lay) for lay in self.layouts.values()],
        }

    def export_library(self, path, fcompile=None) -> None:
        """Write this CPU kernel as a shared library at ``path`` (e.g. ``"kernel.so"``),
        linked by ``cc -shared`` or ``fcompile(output, objects, options)``; load it back with
        ``load_module(path)``. See :mod:`runtime.shared_library`."""
        from .shared_library import export_shared_library

        meta = {
            "kind": "kernel",
            "shapes": {k: list(v) for k, v in self.shapes.items()},
            "outputs": sorted(self.outputs),
        }
        if self.state is not None:
            meta["states"] = [self.state]
        export_shared_library(path, [self.artifact()], meta, fcompile=fcompile)

    def __repr__(self) -> str:
        kernels = ", ".join(la[0] for la in self.launches)
        return f"Module(lang={self.lang!r}, device={self.device}, kernels=[{kernels}])"


def load_module(
    lang, code=None, params=None, workspaces=(), launches=(), device=None, dev=None, binary=None,
    layouts=(), shapes=None, outputs=(),
) -> Module:  # fmt: skip
    """Compile ``code`` for ``device`` and return a :class:`Module`; or, called with only a
    path, load a kernel that :meth:`Module.export_library` wrote as a shared library.

    Parameters
    ----------
    lang : str or path
        "llvm", "cuda" or "opencl"; or the path of an exported kernel library.
    code : str
        The generated source (LLVM IR text or C).
    params, workspaces : sequence of (name, dtype, size)
        User-visible buffers (inputs then outputs) and intermediates allocated once here.
    launches : sequence of (kernel_name, arg_names, grid, block)
        Run in order by each call.
    device : Device or str, optional
        Defaults to the device kind of ``lang`` (index 0).
    binary : bytes, optional
        ``code`` compiled ahead of time for this device (for "llvm":
        ``runtime.cpu.compile_object(code)`` on this host); loading then skips the compiler.
        It is linked as it is, unchecked: it must come from this very ``code``. Files that
        carry object code record and check that (``runtime.plan_file``).
    layouts : sequence of tuple, optional
        Params the code reads in a rewritten layout (``Source.layouts``); kept as
        ``Module.layouts`` for callers that transform those inputs.
    shapes : dict of str to tuple of int, optional
        The tensor shape of each param; a call then refuses an array of the right size but
        another shape.
    outputs : sequence of str, optional
        The params the code writes; a call then refuses a read-only numpy array for them
        (its result would be lost).

    Raises
    ------
    runtime.errors.CompileError
        If the backend compiler rejects ``code``.
    """
    if code is None and params is None:
        return load_kernel_library(lang, device if device is not None else dev)
    if lang not in LANG_DEVICE:
        raise ValueError(f"unknown source language {lang!r}; use one of {sorted(LANG_DEVICE)}")
    target = device if device is not None else dev
    target = make_device(target) if target is not None else Device(LANG_DEVICE[lang])
    if target.kind != LANG_DEVICE[lang]:
        raise ValueError(
            f"{lang} code runs on a {LANG_DEVICE[lang]} device, not on {target}; "
            f"pass device=runtime.device({LANG_DEVICE[lang]!r})"
        )
    return Module(lang, code, params, workspaces, launches, target, binary=binary,
                  layouts=layouts, shapes=shapes, outputs=outputs)  # fmt: skip


def load_kernel_library(path, device=None) -> Module:
    """The kernel in the shared library ``path`` (written by :meth:`Module.export_library`).

    Raises
    ------
    ValueError
        One line naming the file: not such a library, built for another architecture, or a
        network library (load that with ``autosched.load_module``).
    """
    from .shared_library import SharedLibrary

    lib = SharedLibrary(path)
    if lib.meta.get("kind") != "kernel":
        raise ValueError(
            f"{path}: holds a {lib.meta.get('kind')} (not one kernel); load it with "
            "autosched.load_module(path)"
        )
    dev = make_device(device) if device is not None else Device("cpu")
    if not dev.on_host:
        raise ValueError(f"{path}: a CPU kernel library runs on the cpu device, not on {dev}")
    art = lib.artifact(0)
    return Module(**art, dev=dev, shapes=lib.meta.get("shapes"),
                  outputs=lib.meta.get("outputs", ()), compiled=lib.compiled(0))  # fmt: skip
