"""``RPCRunner``: measure tuning candidates on the device servers of a key.

Builds happen on the tuning machine (``LocalBuilder``, in parallel, as for local runs). For
each built candidate the runner sends plain data to the servers: the artifact (code, buffer
lists, launches, the object code and the target triple it was compiled for) and the
reference inputs and outputs, computed here once per workload. A server loads it, checks its
outputs, times it and answers ``(costs, error_no, error_msg)``, which becomes the
``MeasureResult``. Several servers with one key share the candidates (``n_parallel`` in
flight); when a server dies, dask gives its candidate to another server, and if the key has
no server left the rest become error records.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
import warnings
from collections.abc import Sequence

from ..measure.data import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult, failed_result
from ..measure.local import _ReferenceCache
from ..measure.worker import _param_array, random_inputs
from .cluster import DEFAULT_HOST, DEFAULT_PORT
from .server import ARTIFACT_FORMAT, ARTIFACT_VERSION

log = logging.getLogger("autosched.rpc.runner")

POLL_S = 0.5


class RPCRunner:
    """Runs built candidates on the RPC servers registered under ``key`` at a tracker.

    Parameters
    ----------
    key : str
        The device key the servers registered with (``rpc_server --key``).
    host, port : str, int
        The tracker.
    priority : int
        Larger goes first when several clients wait for the same servers.
    n_parallel : int or None
        Candidates in flight at once; None: as many as the key has servers (each run asks).
    timeout : float
        Seconds one candidate may take on its server (load, check and timing), and how long
        to wait for a server of ``key`` to register.
    number, repeat, min_repeat_ms, enable_cpu_cache_flush : see ``LocalRunner``.
    cooldown_interval : float
        Seconds the server rests after each candidate.
    check_correctness : bool
        Compare outputs with the reference before timing.
    security : distributed.Security, optional
        TLS certificates (:func:`autosched.rpc.make_security`).
    """

    def __init__(
        self,
        key: str,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        priority: int = 1,
        n_parallel: int = 1,
        timeout: float = 10,
        number: int = 3,
        repeat: int = 1,
        min_repeat_ms: float = 0,
        cooldown_interval: float = 0.0,
        enable_cpu_cache_flush: bool = False,
        check_correctness: bool = True,
        security=None,
    ):
        if number < 1 or repeat < 1 or timeout <= 0 or (n_parallel is not None and n_parallel < 1):
            raise ValueError(
                "RPCRunner needs number >= 1, repeat >= 1, timeout > 0 and n_parallel >= 1, got "
                f"number={number}, repeat={repeat}, timeout={timeout}, n_parallel={n_parallel}"
            )
        self.key, self.host, self.port = str(key), str(host), int(port)
        self.priority = int(priority)
        self.n_parallel = None if n_parallel is None else int(n_parallel)
        self.timeout = float(timeout)
        self.number, self.repeat = int(number), int(repeat)
        self.min_repeat_ms = float(min_repeat_ms)
        self.cooldown_interval = float(cooldown_interval)
        self.enable_cpu_cache_flush = bool(enable_cpu_cache_flush)
        self.check_correctness = bool(check_correctness)
        self.security = security
        self._tracker = None
        self._refs = _ReferenceCache()
        # Candidates each server answered ("KEY@pid"), for checking that servers share work.
        self.server_counts: collections.Counter = collections.Counter()

    # ------------------------------------------------------------------ connection
    def _connect(self):
        if self._tracker is not None and self._tracker.client.status == "running":
            return self._tracker
        from .client import connect_tracker

        if self._tracker is not None:
            self._tracker.close()
            self._tracker = None
        self._tracker = connect_tracker(self.host, self.port, self.security, self.timeout)
        return self._tracker

    # ------------------------------------------------------------------ payloads
    def _reference(self, task) -> tuple[dict, dict]:
        """Reference inputs and outputs of ``task``'s DAG by tensor name, computed once."""
        key = task.workload_key
        ref = self._refs.get(key)
        if ref is None:
            from tensorir.interp import eval_dag

            dag = task.compute_dag
            inputs = random_inputs(dag)
            ref = (inputs, eval_dag(dag, inputs))
            self._refs.put(key, ref)
        dag = task.compute_dag
        ins = {t.name: a for t, a in zip(dag.input_tensors, ref[0])}
        outs = {t.name: a for t, a in zip(dag.output_tensors, ref[1])}
        return ins, outs

    def _payload(self, inp: MeasureInput, br: BuildResult) -> dict:
        from codegen.target import target_triple
        from runtime.cpu import _llvm, host_signature

        src = br.source
        ins, outs = self._reference(inp.task)
        layouts = {str(lay[0]): lay for lay in src.get("layouts", ())}
        # Inputs travel in the layout the kernel reads (pre-transformed weights).
        inputs = {
            name: _param_array(ins[name], layouts.get(name))
            for name, _, _ in src["params"]
            if name in ins
        }
        lang = src["lang"]
        artifact = {
            "format": ARTIFACT_FORMAT,
            "format_version": ARTIFACT_VERSION,
            "lang": lang,
            "code": src["code"],
            "params": [list(p) for p in src["params"]],
            "workspaces": [list(w) for w in src["workspaces"]],
            "launches": [[n, list(a), list(g), list(b)] for n, a, g, b in src["launches"]],
            "layouts": [list(lay) for lay in src.get("layouts", ())],
            "binary": src.get("binary"),
        }
        if lang == "llvm":
            artifact["triple"] = target_triple(inp.task.target) or _llvm().get_default_triple()
            artifact["host_signature"] = host_signature() if src.get("binary") else None
        flush = self.enable_cpu_cache_flush
        return {
            "artifact": artifact,
            "inputs": inputs,
            "outputs": outs,
            "number": 1 if flush else self.number,
            "repeat": self.repeat,
            "min_repeat_ms": 0.0 if flush else self.min_repeat_ms,
            "flush": flush,
            "check": self.check_correctness,
            "cooldown_interval": self.cooldown_interval,
        }

    # ------------------------------------------------------------------ running
    def run(
        self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult]
    ) -> list[MeasureResult]:
        """Measure each successfully built input on the servers; failed builds pass their
        error through.

        Raises
        ------
        autosched.rpc.NoServerError
            When no server of ``key`` registers within ``timeout`` seconds.
        ConnectionError
            When the tracker cannot be reached.
        """
        if len(inputs) != len(build_results):
            raise ValueError(f"run got {len(inputs)} inputs but {len(build_results)} build results")
        results: list[MeasureResult | None] = [None] * len(inputs)
        todo = []
        for i, br in enumerate(build_results):
            if br.error_no != MeasureErrorNo.NO_ERROR:
                results[i] = failed_result(br.error_no, br.error_msg, br.time_cost)
            else:
                todo.append(i)
        if todo:
            self.run_jobs(
                "measure",
                todo,
                payload=lambda i: self._payload(inputs[i], build_results[i]),
                finish=lambda i, future, start: self._result(future, build_results[i], start),
                spent=lambda i: build_results[i].time_cost,
                results=results,
            )
        return results  # type: ignore[return-value]

    def run_jobs(self, op: str, todo, payload, finish, spent, results: list) -> None:
        """Run one server request ``op`` per index of ``todo`` on the servers of ``key``,
        ``n_parallel`` in flight (all the key's servers when it is None).

        ``payload(i)`` makes request ``i``'s plain data, ``finish(i, future, start)`` turns its
        finished future into ``results[i]`` and ``spent(i)`` gives the seconds spent on ``i``
        before it was sent (for the error records when the servers or the tracker are lost).
        The same failure handling serves every op (see :meth:`run`).
        """
        tracker = self._connect()
        servers = tracker.wait_for_key(self.key, self.timeout)
        limit = self.n_parallel or len(servers)
        finished = threading.Event()  # set by any future as it finishes
        pending = list(reversed(todo))
        in_flight: dict = {}  # future -> (index, submitted at)
        no_server_since = None

        def fail(msg: str) -> None:
            self._fail(in_flight, pending, results, spent, msg)

        while pending or in_flight:
            while pending and len(in_flight) < limit:
                i = pending.pop()
                future = tracker.submit(
                    self.key, op, payload(i), priority=self.priority, timeout=self.timeout
                )
                in_flight[future] = (i, time.perf_counter())
                future.add_done_callback(lambda _: finished.set())
            finished.wait(POLL_S)
            finished.clear()
            done = [f for f in in_flight if f.done()]
            for future in done:
                i, start = in_flight.pop(future)
                results[i] = finish(i, future, start)
            if done:
                no_server_since = None
                continue
            # Nothing finished: fail what is left if the key has lost all its servers.
            if self._lost_tracker(tracker):
                fail(self._tracker_lost_msg())
                return
            if not any(self.key in keys for keys in tracker.servers().values()):
                no_server_since = no_server_since or time.monotonic()
                if time.monotonic() - no_server_since > self.timeout:
                    fail(f"no RPC server with key {self.key!r} left at the tracker")
                    return
            else:
                no_server_since = None

    def remote_error(self, future) -> str | None:
        """The one-line error of a future that raised (the server died, the tracker went
        away), or None when it has a value."""
        try:
            future.result()
        except Exception as exc:
            name = type(exc).__name__
            if name in ("CancelledError", "FutureCancelledError"):
                return self._tracker_lost_msg()
            return f"remote measurement failed: {name}: {exc}"[:400]
        return None

    def _result(self, future, br: BuildResult, start: float) -> MeasureResult:
        secs = br.time_cost + time.perf_counter() - start
        error = self.remote_error(future)  # the server died (KilledWorker), the tracker left...
        if error is not None:
            return failed_result(MeasureErrorNo.RUNTIME_DEVICE, error, secs)
        costs, code, msg, server = future.result()
        self.server_counts[server] += 1
        if code != MeasureErrorNo.NO_ERROR:
            return failed_result(code, msg, secs)
        return MeasureResult(tuple(costs), 0, "", secs, time.time())

    def _lost_tracker(self, tracker) -> bool:
        return tracker.client.status not in ("running", "connecting")

    def _tracker_lost_msg(self) -> str:
        return (
            f"lost the connection to the RPC tracker at {self.host}:{self.port} (stopped or "
            "restarted?); later rounds reconnect when it is back"
        )

    def _fail(self, in_flight, pending, results, spent, msg) -> None:
        warnings.warn(f"RPCRunner: {msg}", stacklevel=3)
        for future, (i, start) in in_flight.items():
            # Best effort: with the tracker gone the client may already be closed, and dask
            # raises ClosedClientError for a cancel it cannot send (the work died with it).
            with contextlib.suppress(Exception):
                future.cancel()
            secs = spent(i) + time.perf_counter() - start
            results[i] = failed_result(MeasureErrorNo.RUNTIME_DEVICE, msg, secs)
        for i in pending:
            results[i] = failed_result(MeasureErrorNo.RUNTIME_DEVICE, msg, 0.0)
        in_flight.clear()

    def close(self) -> None:
        """Disconnect from the tracker (a later :meth:`run` connects again)."""
        if self._tracker is not None:
            self._tracker.close()
            self._tracker = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()
