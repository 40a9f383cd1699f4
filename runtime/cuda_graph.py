"""Replay a compiled network's kernel launches as one CUDA graph (pycuda, imported lazily).

``GraphModule.run()`` on a CUDA device launches every kernel from Python: one driver call and
some argument packing per kernel. :class:`CUDAGraphRunner` captures that sequence once into a
CUDA graph and replays it with a single launch. Two ways to capture, tried in order:

1. pycuda's own graph API (``Stream.begin_capture`` / ``end_capture`` / ``Graph.instantiate``),
   where the installed pycuda was built with it;
2. the CUDA driver library itself through ``ctypes`` (:class:`DriverGraphs`:
   ``cuStreamBeginCapture_v2`` / ``cuStreamEndCapture`` / ``cuGraphInstantiateWithFlags`` /
   ``cuGraphLaunch``). ``libcuda.so.1`` is loaded wherever pycuda runs, so this needs nothing
   more; it covers pycuda builds without the graph API (the prebuilt pycuda 2026.1 has none).

The kernels are still launched by pycuda, on a stream being captured. A graph holds the raw
device pointers it was captured with, so the runner is told the current launches at
construction and :meth:`invalidate` drops the graph when any buffer changes (the next
:meth:`launch` captures again).

Where neither way works, or capturing fails (an old driver, a launch that cannot be captured),
:meth:`launch` returns False with :attr:`reason` set (logged once), and the caller launches the
kernels itself. Set ``AUTOSCHED_CUDA_GRAPH=0`` to turn graphs off.

Programmatic dependent launch (sm_90 on). A stream capture links each kernel to the one before
it by a full dependency: the next kernel is launched only once the previous one has completed,
and on a network of many short kernels those gaps add up. Where every kernel of the network
starts by waiting on its grid dependency (``griddepcontrol.wait``, which the CUDA code
generator emits first in every kernel for sm_90 and newer) the runner turns the captured
kernel-to-kernel edges programmatic (:meth:`DriverGraphs.make_programmatic`, CUDA 12.3's edge
data): the next kernel is launched as the previous one's last blocks exit, and its threads wait
in that instruction until the previous kernel's writes are visible. Results are the same
bit for bit; on an H200 resnet-50 batch 1 ran 0.316 -> 0.301 ms, resnet-18 TF32 0.251 ->
0.247. ``AUTOSCHED_PROGRAMMATIC_LAUNCH=0`` keeps the plain edges.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import re
import sys

from .environment import env

_log = logging.getLogger(f"autosched.{__name__}")

ENV = "AUTOSCHED_CUDA_GRAPH"
PROGRAMMATIC_ENV = "AUTOSCHED_PROGRAMMATIC_LAUNCH"
GRID_DEPENDENCY_WAIT = "griddepcontrol.wait"
"""The PTX instruction a kernel's code must contain to be launched programmatically: the
contract with the CUDA code generator (``codegen.cuda``), which the runtime may not import."""
PROGRAMMATIC_MIN_COMPUTE = 90  # sm_90: griddepcontrol and programmatic edges

# cuda.h: CUstreamCaptureMode. Thread-local: only this thread's unsafe calls (a cudaMalloc, a
# synchronous copy) are errors during capture; other threads (a tuner's pool) are untouched.
CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1
# cuda.h: CU_STREAM_LEGACY, the legacy default stream whatever the per-thread setting, which
# pycuda's synchronous copies and plain kernel launches use.
CU_STREAM_LEGACY = 1
# cuda.h: CUgraphNodeType's kernel node, CUgraphDependencyType's programmatic edge and the
# kernel node port that fires when every block has triggered (launch_dependents) or exited.
CU_GRAPH_NODE_TYPE_KERNEL = 0
CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC = 1
CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC = 1
_DRIVER_NAMES = ("libcuda.so.1", "libcuda.so", "nvcuda.dll")
_logged: set[str] = set()


def _log_once(level: int, reason: str) -> None:
    """Say why graphs are off once per process, not once per GraphModule."""
    if reason not in _logged:
        _logged.add(reason)
        _log.log(level, "%s; kernels are launched one by one", reason)


def graph_api_missing(cuda) -> str | None:
    """Why the pycuda driver module ``cuda`` cannot capture graphs itself, or None when it can."""
    stream_cls = getattr(cuda, "Stream", None)
    for owner, attr in ((stream_cls, "begin_capture"), (stream_cls, "end_capture")):
        if owner is None or not hasattr(owner, attr):
            return f"pycuda has no Stream.{attr} (its graph API needs pycuda >= 2022.1)"
    if not hasattr(cuda, "Graph"):
        return "pycuda has no Graph class (its graph API needs pycuda >= 2022.1)"
    return None


class DriverError(RuntimeError):
    """A CUDA driver call of :class:`DriverGraphs` returned an error code."""


class EdgeData(ctypes.Structure):
    """cuda.h's ``CUgraphEdgeData`` (CUDA 12.3 on): how one graph edge fires."""

    _fields_ = [
        ("from_port", ctypes.c_ubyte),
        ("to_port", ctypes.c_ubyte),
        ("type", ctypes.c_ubyte),
        ("reserved", ctypes.c_ubyte * 5),
    ]


def programmatic_launch_possible(arch: str, codes) -> bool:
    """Whether a network's kernels (``codes``: their CUDA sources) on a device of ``arch``
    (``sm_90``) may be linked by programmatic edges: the device has them, and every kernel
    waits on its grid dependency before touching memory."""
    found = re.fullmatch(r"sm_(\d+)[a-z]?", str(arch))
    if found is None or int(found.group(1)) < PROGRAMMATIC_MIN_COMPUTE:
        return False
    codes = list(codes)
    return bool(codes) and all(GRID_DEPENDENCY_WAIT in code for code in codes)


class PycudaGraphs:
    """Graph capture through pycuda's own API (pycuda >= 2022.1 built with it)."""

    name = "pycuda"

    def begin(self, stream) -> None:
        stream.begin_capture()

    def end(self, stream):
        return stream.end_capture()

    def instantiate(self, graph):
        return graph.instantiate()

    def launch(self, graph_exec) -> None:
        graph_exec.launch()  # no stream: the legacy default stream

    def destroy(self, graph_exec, graph) -> None:
        """pycuda frees both when they are garbage collected."""


class DriverGraphs:
    """Graph capture by calling the CUDA driver library directly (``ctypes``).

    Parameters
    ----------
    lib : ctypes.CDLL of ``libcuda`` (or any object with the same functions, for tests):
        ``cuStreamBeginCapture_v2``, ``cuStreamEndCapture``, ``cuGraphInstantiateWithFlags``,
        ``cuGraphLaunch``, ``cuGraphExecDestroy``, ``cuGraphDestroy`` and optionally
        ``cuGetErrorName``. Functions taking an out-parameter get a ``ctypes.pointer``.

    Every call needs the owning context current (the runner makes it so) and raises
    :class:`DriverError` naming the function and the ``CUresult`` on failure.
    """

    name = "driver"
    # (symbol, argtypes): the CUDA 12/13 signatures of cuda.h. cuStreamBeginCapture and
    # cuGraphInstantiate are macros for these symbols there.
    _SIGNATURES = {
        "cuStreamBeginCapture_v2": (ctypes.c_void_p, ctypes.c_int),
        "cuStreamEndCapture": (ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)),
        "cuGraphInstantiateWithFlags": (
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_void_p,
            ctypes.c_ulonglong,
        ),
        "cuGraphLaunch": (ctypes.c_void_p, ctypes.c_void_p),
        "cuGraphExecDestroy": (ctypes.c_void_p,),
        "cuGraphDestroy": (ctypes.c_void_p,),
    }

    _NODES = ctypes.POINTER(ctypes.c_void_p)
    _EDGES = ctypes.POINTER(EdgeData)
    # Needed only for programmatic edges (CUDA 12.3 on); looked up when first used.
    _EDGE_SIGNATURES = {
        "cuGraphGetEdges_v2": (
            ctypes.c_void_p,
            _NODES,
            _NODES,
            _EDGES,
            ctypes.POINTER(ctypes.c_size_t),
        ),
        "cuGraphRemoveDependencies_v2": (ctypes.c_void_p, _NODES, _NODES, _EDGES, ctypes.c_size_t),
        "cuGraphAddDependencies_v2": (ctypes.c_void_p, _NODES, _NODES, _EDGES, ctypes.c_size_t),
        "cuGraphNodeGetType": (ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)),
    }

    def __init__(self, lib):
        self._lib = lib
        self._fns = {}
        for symbol, argtypes in self._SIGNATURES.items():
            self._fns[symbol] = self._bind(symbol, argtypes)

    def _bind(self, symbol: str, argtypes):
        fn = getattr(self._lib, symbol)  # AttributeError: a driver older than the symbol
        if isinstance(self._lib, ctypes.CDLL):
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
        return fn

    @classmethod
    def load(cls) -> DriverGraphs:
        """The driver library of this process; OSError/AttributeError when it has no graphs."""
        errors = []
        for name in _DRIVER_NAMES:
            try:
                return cls(ctypes.CDLL(name))
            except OSError as err:
                errors.append(str(err))
        raise OSError("; ".join(errors))

    def _error_name(self, code: int) -> str:
        fn = getattr(self._lib, "cuGetErrorName", None)
        if fn is None:
            return "CUDA error"
        text = ctypes.c_char_p()
        try:
            if fn(int(code), ctypes.pointer(text)) == 0 and text.value:
                return text.value.decode(errors="replace")
        except Exception as err:  # a wrong signature must not hide the real error
            _log.debug("cuGetErrorName(%s) failed: %s", code, err)
        return "CUDA error"

    def _call(self, symbol: str, *args) -> None:
        code = self._fns[symbol](*args)
        if code != 0:
            raise DriverError(f"{symbol} returned {self._error_name(code)} ({code})")

    @staticmethod
    def _handle(stream) -> int:
        handle = getattr(stream, "handle", None)
        if handle is None:
            raise DriverError("this pycuda Stream has no .handle to capture on")
        return int(handle)

    def begin(self, stream) -> None:
        mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self._call("cuStreamBeginCapture_v2", self._handle(stream), mode)

    def end(self, stream):
        graph = ctypes.c_void_p()
        self._call("cuStreamEndCapture", self._handle(stream), ctypes.pointer(graph))
        if not graph.value:
            raise DriverError("cuStreamEndCapture returned no graph")
        return graph.value

    def instantiate(self, graph):
        graph_exec = ctypes.c_void_p()
        self._call("cuGraphInstantiateWithFlags", ctypes.pointer(graph_exec), graph, 0)
        if not graph_exec.value:
            raise DriverError("cuGraphInstantiateWithFlags returned no executable graph")
        return graph_exec.value

    def launch(self, graph_exec) -> None:
        self._call("cuGraphLaunch", graph_exec, CU_STREAM_LEGACY)

    def destroy(self, graph_exec, graph) -> None:
        if graph_exec is not None:
            self._call("cuGraphExecDestroy", graph_exec)
        if graph is not None:
            self._call("cuGraphDestroy", graph)

    def make_programmatic(self, graph) -> int:
        """Turn every kernel-to-kernel edge of ``graph`` (not yet instantiated) programmatic;
        how many. Raises :class:`DriverError` where the driver has no edge data (before CUDA
        12.3) or refuses an edge; the graph may then be half changed, so capture it again."""
        for symbol, argtypes in self._EDGE_SIGNATURES.items():
            if symbol not in self._fns:
                try:
                    self._fns[symbol] = self._bind(symbol, argtypes)
                except AttributeError as err:
                    raise DriverError(f"this CUDA driver has no {symbol}") from err
        count = ctypes.c_size_t(0)
        self._call("cuGraphGetEdges_v2", graph, None, None, None, ctypes.pointer(count))
        n = count.value
        if n == 0:
            return 0
        sources, targets = (ctypes.c_void_p * n)(), (ctypes.c_void_p * n)()
        data = (EdgeData * n)()
        self._call("cuGraphGetEdges_v2", graph, sources, targets, data, ctypes.pointer(count))
        kinds: dict[int, int] = {}

        def is_kernel(node) -> bool:
            if node not in kinds:
                kind = ctypes.c_int(-1)
                self._call("cuGraphNodeGetType", node, ctypes.pointer(kind))
                kinds[node] = kind.value
            return kinds[node] == CU_GRAPH_NODE_TYPE_KERNEL

        edges = [
            i for i in range(min(n, count.value))
            if is_kernel(sources[i]) and is_kernel(targets[i])
        ]  # fmt: skip
        if not edges:
            return 0
        m = len(edges)
        old_from, old_to = (ctypes.c_void_p * m)(), (ctypes.c_void_p * m)()
        old_data, new_data = (EdgeData * m)(), (EdgeData * m)()
        for j, i in enumerate(edges):
            old_from[j], old_to[j], old_data[j] = sources[i], targets[i], data[i]
            new_data[j].from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
            new_data[j].to_port = data[i].to_port
            new_data[j].type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
        self._call("cuGraphRemoveDependencies_v2", graph, old_from, old_to, old_data, m)
        self._call("cuGraphAddDependencies_v2", graph, old_from, old_to, new_data, m)
        return m


def graph_api(cuda, driver=None):
    """``(api, None)`` for the first way to capture graphs that exists here, else
    ``(None, reason)``: pycuda's own API, then the driver library (``driver``: a
    :class:`DriverGraphs` or a zero-argument factory of one; default :meth:`DriverGraphs.load`)."""
    missing = graph_api_missing(cuda)
    if missing is None:
        return PycudaGraphs(), None
    try:
        if driver is None:
            driver = DriverGraphs.load
        return (driver() if callable(driver) else driver), None
    except (OSError, AttributeError) as err:
        return None, f"{missing}, and the CUDA driver library has no graph API: {err}"


class CUDAGraphRunner:
    """Capture a list of kernel launches into a CUDA graph once; replay it on each launch.

    Parameters
    ----------
    backend : runtime.cuda.CUDABackend (or anything with ``_cuda``, the pycuda driver module,
        and a ``_current()`` context manager making its context current)
    launches : list of (function, grid, block, handles)
        pycuda kernel functions with their launch dimensions and device buffers, in order.
    programmatic : bool
        Every kernel waits on its grid dependency first (see :func:`programmatic_launch_possible`):
        link the captured kernels by programmatic edges where the driver can.
        ``AUTOSCHED_PROGRAMMATIC_LAUNCH=0`` overrides it.
    driver : DriverGraphs, a factory of one, or None
        How to reach the driver's graph API where pycuda has none (tests pass a fake);
        None loads ``libcuda`` when needed.
    """

    def __init__(self, backend, launches, driver=None, programmatic: bool = False):
        self._backend = backend
        self._cuda = backend._cuda
        self._launches = [(f, tuple(g), tuple(b), list(h)) for f, g, b, h in launches]
        self._programmatic = programmatic
        self.programmatic_edges = 0  # edges the last capture made programmatic
        self.programmatic_reason: str | None = None  # why there are none, once tried
        self._exec = None
        self._graph = None
        self._stream = None
        self._api = None
        self.captures = 0  # how many times the launches were captured (for tests and logs)
        self.replays = 0
        self.reason: str | None = None
        if not env(ENV):
            self.reason = f"CUDA graphs turned off by {ENV}"
        else:
            self._api, self.reason = graph_api(self._cuda, driver)
        if self.reason is not None:
            _log_once(logging.INFO, self.reason)

    @property
    def enabled(self) -> bool:
        """False once graphs are known not to work here (see :attr:`reason`)."""
        return self.reason is None

    @property
    def api(self) -> str | None:
        """Which graph API captures: ``"pycuda"``, ``"driver"`` (ctypes), or None."""
        return None if self._api is None or not self.enabled else self._api.name

    def set_launches(self, launches) -> None:
        """New buffers or kernels: forget the captured graph; the next launch captures again."""
        self._launches = [(f, tuple(g), tuple(b), list(h)) for f, g, b, h in launches]
        self.invalidate()

    def _link_programmatically(self, graph) -> None:
        """Make the captured graph's kernel edges programmatic where wanted and possible.
        Raises when the driver fails part way: the caller captures again without."""
        self.programmatic_edges = 0
        if not self._programmatic or self.programmatic_reason is not None:
            return
        if not env(PROGRAMMATIC_ENV):
            self.programmatic_reason = f"turned off by {PROGRAMMATIC_ENV}"
            return
        make = getattr(self._api, "make_programmatic", None)
        if make is None:
            self.programmatic_reason = f"the {self._api.name} graph API cannot edit edges"
            _log.info("CUDA graph: no programmatic launches (%s)", self.programmatic_reason)
            return
        self.programmatic_edges = make(graph)

    def invalidate(self) -> None:
        """Drop (and free) the captured graph."""
        graph_exec, graph = self._exec, self._graph
        self._exec = self._graph = None
        if self._api is not None and (graph_exec is not None or graph is not None):
            try:
                with self._backend._current():
                    self._api.destroy(graph_exec, graph)
            except Exception as err:  # a leak at worst; the next capture makes a new graph
                _log.debug("freeing a CUDA graph failed: %s", err)

    def _fail(self, why: str) -> bool:
        self.reason = f"capturing a CUDA graph failed: {why}"
        # Same results, launched one by one: a diagnostic, kept in self.reason too.
        _log.warning("%s; launching the kernels one by one instead", self.reason)
        return False

    def capture(self) -> bool:
        """Capture the launches into a graph; False (and :attr:`reason`) when that fails."""
        if not self.enabled:
            return False
        self.invalidate()
        api, graph = self._api, None
        with self._backend._current():
            try:
                if self._stream is None:
                    self._stream = self._cuda.Stream()
                stream = self._stream
                api.begin(stream)
                try:
                    for fn, grid, block, handles in self._launches:
                        fn(*handles, grid=grid, block=block, stream=stream)
                except Exception:
                    # Leave capture mode (the stream is unusable otherwise) and report the
                    # launch's error, not the capture's invalidation that follows from it.
                    with contextlib.suppress(Exception):
                        api.destroy(None, api.end(stream))
                    raise
                graph = api.end(stream)
            except Exception as err:  # no working graphs, or an uncapturable launch
                if graph is not None:
                    with contextlib.suppress(Exception):
                        api.destroy(None, graph)
                return self._fail(f"{type(err).__name__}: {err}")
            try:
                self._link_programmatically(graph)
            except DriverError as err:
                # The same kernels with plain edges: slower launches, same results.
                self.programmatic_reason = str(err)
                _log.info("CUDA graph: no programmatic launches (%s)", err)
                with contextlib.suppress(Exception):
                    api.destroy(None, graph)
                return self.capture()
            try:
                graph_exec = api.instantiate(graph)
            except Exception as err:
                with contextlib.suppress(Exception):
                    api.destroy(None, graph)
                if self.programmatic_edges:  # refused with programmatic edges: try without
                    self.programmatic_reason = f"instantiating refused them: {err}"
                    _log.info("CUDA graph: no programmatic launches (%s)", err)
                    return self.capture()
                return self._fail(f"{type(err).__name__}: {err}")
        self._exec, self._graph = graph_exec, graph
        self.captures += 1
        return True

    def launch(self) -> bool:
        """Enqueue one replay (capturing first if needed); False when graphs cannot be used.

        The graph runs on the legacy default stream, so it is ordered with the synchronous
        copies of ``set_input`` / ``get_output`` and with plain kernel launches.
        """
        if self._exec is None and not self.capture():
            return False
        try:
            with self._backend._current():
                self._api.launch(self._exec)
        except Exception as err:  # e.g. the driver refused the executable graph
            self.invalidate()
            return self._fail(f"launching it: {type(err).__name__}: {err}")
        self.replays += 1
        return True

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.invalidate()
            self._stream = None

    def __del__(self):
        # At interpreter exit the driver frees every graph with the process; touching a
        # context that may already be popped or released gains nothing.
        if not sys.is_finalizing():
            self.close()

    def __repr__(self) -> str:
        state = f"on ({self.api})" if self.enabled else f"off: {self.reason}"
        if self.programmatic_edges:
            state += f", {self.programmatic_edges} programmatic edges"
        return (
            f"CUDAGraphRunner({len(self._launches)} launches, {state}, "
            f"captures={self.captures}, replays={self.replays})"
        )


def cuda_launches(modules, calls, buffers) -> list:
    """(function, grid, block, handles) for every kernel of ``calls`` on CUDA ``modules``.

    ``calls`` are a GraphPlan's ``(kernel index, storage ids)``; ``buffers`` the storages'
    device handles by storage id.
    """
    out = []
    for kernel, args in calls:
        module = modules[kernel]
        handles = dict(module._workspace_handles)
        for (name, _, _), sid in zip(module.params, args):
            handles[name] = buffers[sid]
        functions = module._compiled.functions
        for name, arg_names, grid, block in module.launches:
            out.append((functions[name], grid, block, [handles[a] for a in arg_names]))
    return out
