"""Replay a compiled network's kernel launches as one CUDA graph (pycuda, imported lazily).

``GraphModule.run()`` on a CUDA device launches every kernel from Python: one driver call and
some argument packing per kernel. :class:`CUDAGraphRunner` captures that sequence once into a
CUDA graph (``Stream.begin_capture`` / ``end_capture`` / ``Graph.instantiate``, pycuda 2022.1
and later) and replays it with a single ``GraphExec.launch``. A graph holds the raw device
pointers it was captured with, so the runner is told the current launches at construction and
:meth:`invalidate` drops the graph when any buffer changes (the next :meth:`launch` captures
again).

Where pycuda has no graph API, or capturing fails (an old driver, a launch that cannot be
captured), :meth:`launch` returns False with :attr:`reason` set, and the caller launches the
kernels itself. Set ``AUTOSCHED_CUDA_GRAPH=0`` to turn graphs off.
"""

from __future__ import annotations

import contextlib
import logging

from .environment import env

_log = logging.getLogger(f"autosched.{__name__}")

ENV = "AUTOSCHED_CUDA_GRAPH"


def graph_api_missing(cuda) -> str | None:
    """Why the pycuda driver module ``cuda`` cannot capture graphs, or None when it can."""
    stream_cls = getattr(cuda, "Stream", None)
    for owner, attr in ((stream_cls, "begin_capture"), (stream_cls, "end_capture")):
        if owner is None or not hasattr(owner, attr):
            return f"pycuda has no Stream.{attr} (CUDA graphs need pycuda >= 2022.1)"
    if not hasattr(cuda, "Graph"):
        return "pycuda has no Graph class (CUDA graphs need pycuda >= 2022.1)"
    return None


class CUDAGraphRunner:
    """Capture a list of kernel launches into a CUDA graph once; replay it on each launch.

    Parameters
    ----------
    backend : runtime.cuda.CUDABackend (or anything with ``_cuda``, the pycuda driver module,
        and a ``_current()`` context manager making its context current)
    launches : list of (function, grid, block, handles)
        pycuda kernel functions with their launch dimensions and device buffers, in order.
    """

    def __init__(self, backend, launches):
        self._backend = backend
        self._cuda = backend._cuda
        self._launches = [(f, tuple(g), tuple(b), list(h)) for f, g, b, h in launches]
        self._exec = None
        self._graph = None
        self._stream = None
        self.captures = 0  # how many times the launches were captured (for tests and logs)
        self.replays = 0
        self.reason: str | None = None
        if not env(ENV):
            self.reason = f"CUDA graphs turned off by {ENV}"
        else:
            self.reason = graph_api_missing(self._cuda)

    @property
    def enabled(self) -> bool:
        """False once graphs are known not to work here (see :attr:`reason`)."""
        return self.reason is None

    def set_launches(self, launches) -> None:
        """New buffers or kernels: forget the captured graph; the next launch captures again."""
        self._launches = [(f, tuple(g), tuple(b), list(h)) for f, g, b, h in launches]
        self.invalidate()

    def invalidate(self) -> None:
        self._exec = None
        self._graph = None

    def capture(self) -> bool:
        """Capture the launches into a graph; False (and :attr:`reason`) when that fails."""
        if not self.enabled:
            return False
        cuda = self._cuda
        with self._backend._current():
            try:
                if self._stream is None:
                    self._stream = cuda.Stream()
                stream = self._stream
                stream.begin_capture()
                try:
                    for fn, grid, block, handles in self._launches:
                        fn(*handles, grid=grid, block=block, stream=stream)
                finally:
                    graph = stream.end_capture()  # always leave capture mode
                self._exec = graph.instantiate()
                self._graph = graph
            except Exception as err:  # pycuda without working graphs, or an uncapturable launch
                self._exec = self._graph = None
                self.reason = f"capturing a CUDA graph failed: {type(err).__name__}: {err}"
                # Same results, launched one by one: a diagnostic, kept in self.reason too.
                _log.warning("%s; launching the kernels one by one instead", self.reason)
                return False
        self.captures += 1
        return True

    def launch(self) -> bool:
        """Enqueue one replay (capturing first if needed); False when graphs cannot be used.

        The graph runs on the legacy default stream, so it is ordered with the synchronous
        copies of ``set_input`` / ``get_output`` and with plain kernel launches.
        """
        if self._exec is None and not self.capture():
            return False
        with self._backend._current():
            self._exec.launch()
        self.replays += 1
        return True

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.invalidate()
            self._stream = None


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
