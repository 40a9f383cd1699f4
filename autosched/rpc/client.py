"""The client side of remote devices: ``connect_tracker(host, port).request(key)``.

A :class:`TrackerSession` is a dask client of the tracker; :meth:`TrackerSession.request`
picks a server of a device key and returns a :class:`RemoteSession` bound to it, whose
devices (:class:`RemoteDevice`) read their attributes on the server and whose
``upload`` / ``load_module`` put an exported library there and run it
(:class:`RemoteModule`, :class:`RemoteGraphModule`). Every request is the one server function
:func:`autosched.rpc.server.device_call` with plain data, queued with the session's priority
(higher first) behind the server's resource ``{key: 1}``.

What comes back is plain data only: the server answers reply bytes
(:mod:`autosched.rpc.wire`) that :meth:`TrackerSession.reply` decodes strictly; this client's
dask connection deserializes msgpack only (no pickle, and not dask's own serializers, which
unpickle a type), and a task that failed on a server is reported by the tracker's one-line
text of its error, never by unpickling the exception the server sent.
"""

from __future__ import annotations

import itertools
import logging
import statistics
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from ..suppressed import suppressed
from .cluster import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    distributed,
    quiet_dask_logs,
    tracker_address,
)
from .queue import queue_state, request_state, task_error, text_summary
from .server import SESSION_OP_TIMEOUT, device_call
from .wire import BadReply, decode_reply

log = logging.getLogger(__name__)

#: Seconds a client waits for a reply beyond the request's own timeout (the server's
#: queue, a device process restarting) before it calls the server hung.
REPLY_MARGIN_S = 30.0
#: Seconds without a heartbeat after which the tracker's view of a server is stale (dask's
#: heartbeats come every second or so).
SILENT_S = 20.0


class NoServerError(LookupError):
    """No server with the requested key registered at the tracker in time."""


class RemoteError(RuntimeError):
    """A request failed on a server, or its reply was not well-formed (one line naming the
    server)."""


class RemoteTimeout(RemoteError, TimeoutError):
    """A server did not answer a request within its timeout plus :data:`REPLY_MARGIN_S`."""


_CLIENT_CLASS: list = []


def _plain_warning(event) -> None:
    """A dask worker's warning event, reported without reading (unpickling) its payload."""
    log.warning("a dask worker sent a warning event (not unpickled: it is a pickle)")


def _plain_client_class():
    """dask's Client, except that it never unpickles what a server sent: not a failed task's
    exception, not a result's type, not a warning event (the three places where dask's client
    calls ``pickle.loads`` on bytes a worker chose, besides results, which the msgpack-only
    deserializers cover)."""
    if not _CLIENT_CLASS:
        dd = distributed()

        class PlainDataClient(dd.Client):
            def _handle_task_erred(self, key=None, exception=None, traceback=None):
                # dask would unpickle ``exception`` (bytes a worker chose) right here; the
                # text of the error is read from the tracker instead (TrackerSession.reply).
                del exception, traceback
                super()._handle_task_erred(key, RemoteError(f"task {key} failed"), None)

            def _handle_key_in_memory(self, key=None, type=None, workers=None):
                # ``type`` is the pickled type of the result, as the worker chose to send it;
                # dask unpickles it for a repr. Never read it.
                del type
                super()._handle_key_in_memory(key=key, type=None, workers=workers)

            def subscribe_topic(self, topic, handler):
                # dask's handler of workers' "warn" events unpickles their message and
                # category: any worker could run code here. Such a warning is one plain line.
                if topic == "warn":
                    handler = _plain_warning
                super().subscribe_topic(topic, handler)

        _CLIENT_CLASS.append(PlainDataClient)
    return _CLIENT_CLASS[0]


def connect_tracker(host=DEFAULT_HOST, port=DEFAULT_PORT, security=None, timeout=10.0):
    """Connect to the RPC tracker at ``host:port``.

    Parameters
    ----------
    security : distributed.Security, optional
        TLS certificates (:func:`autosched.rpc.make_security`) when the tracker requires them.
    timeout : float
        Seconds to wait for the connection.

    Returns
    -------
    TrackerSession
    """
    return TrackerSession(host, port, security, timeout)


class TrackerSession:
    """A connection to the tracker (see :func:`connect_tracker`)."""

    def __init__(self, host, port, security=None, timeout=10.0):
        distributed()
        quiet_dask_logs()
        self.host, self.port, self.security = host, int(port), security
        self.address = tracker_address(host, port, security)
        try:
            self.client = _plain_client_class()(
                self.address,
                security=security,
                timeout=f"{float(timeout)}s",
                set_as_default=False,
                # Requests go out as dask sends them (the function by reference); only
                # msgpack comes back in.
                deserializers=["msgpack"],
                direct_to_workers=False,
            )
        except (OSError, TimeoutError) as e:
            tls = " (with TLS: check the certificates)" if security is not None else ""
            raise ConnectionError(
                f"cannot connect to the RPC tracker at {host}:{port}{tls}: {e}; start it with "
                f"python -m autosched.exec.rpc_tracker --port {port}"
            ) from None

    # ------------------------------------------------------------------ tracker state
    def servers(self) -> dict[str, list[str]]:
        """Server address -> the device keys it holds."""
        info = self.client.scheduler_info(n_workers=-1)
        if "workers" not in info:
            # dask answers from its cache, without the workers, once the connection closed
            raise ConnectionError(
                f"lost the connection to the RPC tracker at {self.address} (stopped or restarted?)"
            )
        return {addr: sorted(w.get("resources") or {}) for addr, w in info["workers"].items()}

    def summary(self) -> dict:
        """TVM's summary: ``server_info`` (address and ``server:KEY``) and ``queue_info``."""
        server_info = [
            {"addr": addr.split("://", 1)[-1], "key": f"server:{key}"}
            for addr, keys in self.servers().items()
            for key in keys
        ]
        return {"server_info": server_info, "queue_info": self.client.run_on_scheduler(queue_state)}

    def text_summary(self) -> str:
        data = self.summary()
        return text_summary(data["server_info"], data["queue_info"])

    def wait_for_key(self, key: str, timeout: float) -> list[str]:
        """The addresses of servers holding ``key``, waiting up to ``timeout`` seconds for
        one to register; :class:`NoServerError` naming the keys there are otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            servers = self.servers()
            found = [addr for addr, keys in servers.items() if key in keys]
            if found:
                return found
            if time.monotonic() >= deadline:
                have = sorted({k for keys in servers.values() for k in keys})
                raise NoServerError(
                    f"no RPC server with key {key!r} registered at the tracker "
                    f"{self.host}:{self.port} within {timeout:g} s (keys there: {have or 'none'}); "
                    f"start one with python -m autosched.exec.rpc_server --tracker "
                    f"{self.host}:{self.port} --key {key}"
                )
            time.sleep(0.2)

    # ------------------------------------------------------------------ requests
    def submit(self, key: str, op: str, args: dict, *, priority=1, timeout=None, worker=None):
        """A future of ``device_call(op, args, timeout)`` on a server of ``key``."""
        return self.client.submit(
            device_call,
            op,
            args,
            timeout,
            key=f"autosched-{op}-{uuid.uuid4().hex}",
            resources={key: 1},
            workers=[worker] if worker is not None else None,
            allow_other_workers=False,
            priority=int(priority),
            pure=False,
        )

    def reply(self, future, server: str | None, wait_s: float | None):
        """The decoded value of a request's ``future`` (``{"ok": value}`` from the server);
        :class:`RemoteError` naming ``server`` when it failed or its reply is malformed,
        :class:`RemoteTimeout` when no reply came within ``wait_s`` seconds."""
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        if not done.wait(wait_s):
            future.cancel()
            where = server or "the server"
            raise RemoteTimeout(f"no reply from {where} within {wait_s:g} s (hung or stopped?)")
        return self.read(future, server)

    def read(self, future, server: str | None):
        """The decoded value of a finished request (see :meth:`reply`)."""
        where = server or "the server"
        if future.status == "error":
            raise RemoteError(f"the request failed on {where}: {self.error_text(future.key)}")
        if future.status != "finished":
            raise RemoteError(f"the request to {where} was {future.status} (tracker lost?)")
        try:
            raw = future.result(timeout=REPLY_MARGIN_S)
        except Exception as exc:  # e.g. a reply dask cannot read as msgpack
            msg = " ".join(str(exc).split())[:200]
            raise RemoteError(
                f"malformed reply from {where}: {type(exc).__name__}: {msg}"
            ) from None
        envelope = decode_reply(raw, where)
        if isinstance(envelope, dict) and set(envelope) == {"ok"}:
            return envelope["ok"]
        if isinstance(envelope, dict) and set(envelope) == {"error"}:
            text = envelope["error"]
            if isinstance(text, str):
                raise RemoteError(text if where in text else f"{text} (on {where})")
        raise BadReply(f"malformed reply from {where}: not {{'ok': ...}} or {{'error': str}}")

    def waiting_behind_others(self, key: str) -> bool:
        """Whether the request ``key`` has not started yet on a server that is alive (it
        waits behind other clients' requests), as the tracker sees it."""
        try:
            state = self.client.run_on_scheduler(request_state, key=key)
            return not state["started"] and float(state["silent_s"]) < SILENT_S
        except Exception:  # noqa: BLE001 - a tracker that does not answer: not known to wait
            suppressed("tracker queries", expected=Exception)
            return False

    def error_text(self, key: str) -> str:
        """The tracker's one-line text of a failed task (what dask keeps as text, not the
        pickled exception)."""
        try:
            text = self.client.run_on_scheduler(task_error, key=key)
        except Exception as exc:
            return f"(its error could not be read from the tracker: {type(exc).__name__})"
        return " ".join(str(text).split())[:400] if isinstance(text, str) else "unknown error"

    def request(self, key: str, priority: int = 1, session_timeout: float = 0, timeout=10.0):
        """A session on one server of ``key`` (waiting up to ``timeout`` s for one).

        Parameters
        ----------
        priority : int
            Larger runs first when requests wait for the same server.
        session_timeout : float
            Seconds after which the session refuses further requests (0: no limit).
        """
        servers = self.wait_for_key(key, timeout)
        busy = self.client.processing(servers)  # the least busy server of the key
        server = min(servers, key=lambda addr: len(busy.get(addr, ())))
        return RemoteSession(self, key, server, priority, session_timeout)

    def close(self) -> None:
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RemoteSession:
    """Requests to one server (what :meth:`TrackerSession.request` returns)."""

    _handles = itertools.count()

    def __init__(self, tracker: TrackerSession, key: str, server: str, priority, session_timeout):
        self.tracker, self.key, self.server = tracker, key, server
        self.priority = int(priority)
        self.session_timeout = float(session_timeout or 0)
        self._start = time.monotonic()
        self._id = uuid.uuid4().hex[:8]

    def call(self, op: str, timeout: float | None = None, **args):
        """Run ``op`` on the server and return its value (RuntimeError on failure)."""
        if self.session_timeout and time.monotonic() - self._start > self.session_timeout:
            raise TimeoutError(
                f"the session on {self.key!r} ended after session_timeout="
                f"{self.session_timeout:g} s; request a new one"
            )
        future = self.tracker.submit(
            self.key, op, args, priority=self.priority, timeout=timeout, worker=self.server
        )
        wait_s = float(timeout or SESSION_OP_TIMEOUT) + REPLY_MARGIN_S
        try:
            return self.tracker.reply(future, self.server, wait_s)
        except BadReply as exc:
            raise RemoteError(str(exc)) from None

    def new_handle(self, what: str) -> str:
        return f"{self._id}-{what}-{next(self._handles)}"

    # ------------------------------------------------------------------ devices
    def device(self, kind: str, index: int = 0) -> RemoteDevice:
        from runtime.device import ALIASES  # the device table's names ("cl", "gpu", "llvm")

        return RemoteDevice(self, ALIASES.get(kind, kind), int(index))

    def cpu(self, index: int = 0) -> RemoteDevice:
        return self.device("cpu", index)

    def cuda(self, index: int = 0) -> RemoteDevice:
        return self.device("cuda", index)

    def cl(self, index: int = 0) -> RemoteDevice:
        return self.device("opencl", index)

    opencl = cl

    # ------------------------------------------------------------------ files
    def upload(self, path, target: str | None = None) -> str:
        """Copy the file at ``path`` (and its ``.params.npz`` weights, if any) to the server's
        work directory under ``target`` (default: its name); returns that name."""
        path = Path(path)
        name = target or path.name
        self.call("upload", name=name, data=path.read_bytes())
        params = path.with_name(path.name + ".params.npz")
        if params.exists():
            self.call("upload", name=name + ".params.npz", data=params.read_bytes())
        return name

    def load_module(
        self, name: str, dev: RemoteDevice | None = None, *, trust: bool = False
    ) -> RemoteModule:
        """Load the library uploaded as ``name`` on the server (TVM's
        ``remote.load_module(filename)``), on ``dev`` or, by default, on the server's device
        its kernels are for (the CPU for CPU code, the OpenCL device for an OpenCL network).

        ``lib["default"](dev)`` then binds a network to a device of this session for
        ``GraphModule``, as the seeds write it::

            remote.upload(path_lib)
            loaded_lib = remote.load_module("deploy_lib.so")
            module = graph_executor.GraphModule(loaded_lib["default"](remote.cl()))

        A library is code. Without ``trust`` the server runs none of the code in the file:
        it refuses the library unless it can rebuild every kernel from the state the
        library records, with its own compiler (docs/remote.md, "Security"). ``trust=True``
        says that you built the file and want the server to load it as it is.
        """
        if dev is not None and not isinstance(dev, RemoteDevice):
            raise TypeError(
                f"remote.load_module({name!r}, dev): dev must be a device of this session "
                f"(remote.cpu(), remote.cl()), got {dev!r}; a local device is "
                "autosched.load_module's"
            )
        handle = self.new_handle("lib")
        kind, index = (dev.kind, dev.index) if dev is not None else (None, 0)
        desc = self.call(
            "load", handle=handle, name=name, kind=kind, index=index, trust=trust is True
        )
        if dev is None:
            loaded = desc.get("device") or ["cpu", 0]
            dev = self.device(loaded[0], loaded[1])
        return RemoteModule(self, handle, desc, dev)

    def __repr__(self) -> str:
        return f"RemoteSession(key={self.key!r}, server={self.server!r})"


class RemoteDevice:
    """A device of a remote server; TVM's attributes (``max_threads_per_block``,
    ``warp_size``, ``max_shared_memory_per_block``, ...) are read on the server once."""

    def __init__(self, session: RemoteSession, kind: str, index: int):
        self.session, self.kind, self.index = session, kind, index
        self._attrs: dict | None = None

    def attributes(self) -> dict:
        if self._attrs is None:
            self._attrs = self.session.call("attributes", kind=self.kind, index=self.index)
        return self._attrs

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        attrs = self.attributes()
        if name not in attrs:
            raise AttributeError(f"remote device has no attribute {name!r}; have {sorted(attrs)}")
        return attrs[name]

    def __repr__(self) -> str:
        return f"remote device({self.kind!r}, {self.index}) on {self.session.key!r}"


def _timing(results) -> object:
    from runtime import TimingResult

    results = tuple(float(r) for r in results)
    return TimingResult(sum(results) / len(results), statistics.median(results), results)


class RemoteModule:
    """A library loaded on a server: one kernel (call it, ``time_evaluator``) or a network
    (``lib["default"](dev)`` for ``GraphModule``)."""

    def __init__(self, session: RemoteSession, handle: str, desc: dict, dev: RemoteDevice):
        self.session, self.handle, self.desc, self.device = session, handle, desc, dev

    def _arrays(self, args) -> list:
        return [a.numpy() if hasattr(a, "numpy") else np.asarray(a) for a in args]

    def __call__(self, *args) -> None:
        """Run the kernel on the server; numpy outputs are written back in place."""
        if self.desc["kind"] != "kernel":
            raise TypeError("this library holds a network: use GraphModule(lib['default'](dev))")
        results = self.session.call("call", handle=self.handle, args=self._arrays(args))
        for dst, src in zip(args, results):
            if isinstance(dst, np.ndarray) and dst.flags.writeable:
                dst[...] = src.reshape(dst.shape)

    def time_evaluator(self, number: int = 10, repeat: int = 3, min_repeat_ms: float = 0):
        def evaluate(*args):
            return _timing(
                self.session.call(
                    "time",
                    handle=self.handle,
                    args=self._arrays(args),
                    number=int(number),
                    repeat=int(repeat),
                    min_repeat_ms=float(min_repeat_ms),
                )
            )

        return evaluate

    def __getitem__(self, name: str):
        if name != "default" or self.desc["kind"] != "network":
            raise KeyError(f"a remote network library has one function, 'default'; got {name!r}")
        return self._bind

    def _bind(self, dev: RemoteDevice | None = None) -> _RemoteFactory:
        """``lib["default"](dev)``: ``dev`` is a device of this library's session."""
        if dev is not None and getattr(dev, "session", None) is not self.session:
            where = "another session" if isinstance(dev, RemoteDevice) else "this machine"
            raise TypeError(
                f"lib['default'](dev): {dev!r} is a device of {where}; pass one of the session "
                "that loaded the library (remote.cl(), remote.cpu())"
            )
        return _RemoteFactory(self, dev or self.device)


class _RemoteFactory:
    """``rlib["default"](dev)``: what ``GraphModule(...)`` turns into a RemoteGraphModule."""

    def __init__(self, lib: RemoteModule, dev: RemoteDevice):
        self.lib, self.device = lib, dev

    def graph_module(self, dev=None) -> RemoteGraphModule:
        return RemoteGraphModule(self.lib, dev or self.device)


class _RemoteFunctions:
    def __init__(self, graph: RemoteGraphModule):
        self.graph = graph

    def time_evaluator(self, name, dev=None, number=5, repeat=5, min_repeat_ms=0, **_):
        if name != "run":
            raise KeyError(f"a graph module times 'run', got {name!r}")
        return lambda: self.graph.benchmark(dev, repeat, number, min_repeat_ms)


class RemoteGraphModule:
    """A network running on a server: ``set_input`` / ``run`` / ``get_output`` /
    ``benchmark`` as :class:`runtime.graph_executor.GraphModule` (inputs travel with ``run``,
    outputs come back after it)."""

    def __init__(self, lib: RemoteModule, dev: RemoteDevice):
        self.lib, self.device, self.session = lib, dev, lib.session
        self.handle = self.session.new_handle("graph")
        self.session.call(
            "graph_create", graph=self.handle, handle=lib.handle, kind=dev.kind, index=dev.index
        )
        self._inputs: dict = {}
        self._outputs: list = []

    def set_input(self, key=None, value=None, **params) -> None:
        items = dict(params)
        if key is not None:
            items[key] = value
        known = self.lib.desc["inputs"]
        for name, val in items.items():
            if name not in known:
                raise KeyError(f"no input named {name!r}; the inputs are {list(known)}")
            self._inputs[name] = val.numpy() if hasattr(val, "numpy") else np.asarray(val)

    def run(self, **inputs) -> None:
        if inputs:
            self.set_input(**inputs)
        self._outputs = self.session.call("graph_run", graph=self.handle, inputs=self._inputs)
        self._inputs = {}

    def get_num_outputs(self) -> int:
        return len(self.lib.desc["outputs"])

    def get_output(self, index: int):
        from runtime import array

        if not self._outputs:
            raise RuntimeError("call run() before get_output()")
        return array(self._outputs[index])

    def benchmark(self, dev=None, repeat: int = 5, number: int = 5, min_repeat_ms: float = 0):
        results = self.session.call(
            "graph_benchmark",
            graph=self.handle,
            repeat=int(repeat),
            number=int(number),
            min_repeat_ms=float(min_repeat_ms),
        )
        return _timing(results)

    @property
    def module(self) -> _RemoteFunctions:
        return _RemoteFunctions(self)
