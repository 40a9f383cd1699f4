"""``RPCRunner``: measure tuning candidates on the device servers of a key.

For each candidate the runner sends plain data to a server: the *state* (the DAG as plain
data, the steps as records store them, the target), never code, and the reference inputs
and outputs, computed here once per workload. The server builds the kernel with its own
compiler (it runs only what it built), checks its outputs, times it and answers ``{costs,
error_no, error_msg, server}`` and how its build went (``built``, ``build_s``, ``phases``,
``run_s``), which is validated here and becomes the ``MeasureResult``; a malformed reply
becomes an error record naming the server.

So the tuning machine does not build the candidates: :meth:`RPCRunner.build_and_run` (which
``ProgramMeasurer`` and AutoTVM's ``measure_batch`` call instead of the builder and
:meth:`RPCRunner.run`) returns the servers' builds as the ``BuildResult``s, with their error
codes (a candidate that does not build is a build error, as with a local build), seconds and
stages, for the records and the timing ledger. :meth:`RPCRunner.run` still takes candidates
built here (a builder that links each candidate with the board's toolchain,
``LocalBuilder(build_func="ndk")``, finds those that do not link before anything is sent).

Each server has at most one of this runner's requests at a time (``n_parallel`` in flight in
all). A request not answered within twice ``timeout`` (build and run) plus a margin is
RUN_TIMEOUT naming the server, which gets nothing more from this runner; a server that leaves
the tracker has its candidate sent to another; if the key has no server left the rest become
error records.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import math
import threading
import time
import warnings
from collections.abc import Sequence

from ..measure.data import (
    BuildResult,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    failed_result,
    state_data,
    steps_json_of,
)
from ..measure.local import ReferenceCache
from ..measure.timing import BUILD_PHASES
from ..measure.worker import random_inputs, short_error
from .cluster import DEFAULT_HOST, DEFAULT_PORT
from .server import STATE_FORMAT, STATE_VERSION
from .wire import BadReply

log = logging.getLogger(__name__)

POLL_S = 0.5
# A request that has not started on a live server (other clients' requests go first) gets its
# deadline renewed, up to this many deadlines in all.
MAX_QUEUE_WAITS = 10


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
        Seconds the server's build of one candidate may take, and again its run (load, check
        and timing); also how long to wait for a server of ``key`` to register.
    number, repeat, min_repeat_ms, enable_cpu_cache_flush, enable_gpu_cache_flush : see
        ``LocalRunner`` (the GPU flush runs on the server's CUDA device; a server of an older
        version ignores it and times warm).
    cooldown_interval : float
        Seconds the server rests after each candidate.
    check_correctness : bool
        Compare outputs with the reference before timing.
    security : distributed.Security, optional
        TLS certificates (:func:`autosched.rpc.make_security`).
    """

    # Candidates are timed on the servers' devices, not on this host's cores: the next
    # round's search may run beside the measurement (autosched/measure/overlap.py).
    measures_remotely = True

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
        enable_gpu_cache_flush: bool = False,
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
        self.enable_gpu_cache_flush = bool(enable_gpu_cache_flush)
        self.check_correctness = bool(check_correctness)
        self.security = security
        self._tracker = None
        self._refs = ReferenceCache()
        # Candidates each server answered (by address), for checking that servers share work.
        self.server_counts: collections.Counter = collections.Counter()
        # Seconds of the answered measure requests: "build" and "run" (load, check, timing)
        # as the servers reported them, "request" as seen here (the rest is transfer, queue).
        self.server_seconds: collections.Counter = collections.Counter()
        # Servers that did not answer in time: this runner sends them nothing more.
        self.hung_servers: set[str] = set()

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

    def _payload(self, inp: MeasureInput, br: BuildResult | None = None) -> dict:
        """The plain data of one measurement: the state (DAG, steps, target) and the
        reference arrays by tensor name; ``br``, when it was built here, is not sent (the
        server builds the state itself)."""
        del br
        ins, outs = self._reference(inp.task)
        flush = self.enable_cpu_cache_flush or self.enable_gpu_cache_flush
        return {
            "format": STATE_FORMAT,
            "format_version": STATE_VERSION,
            **state_data(inp.task.compute_dag, inp.state, inp.task.target),
            "inputs": ins,
            "outputs": outs,
            "number": 1 if flush else self.number,
            "repeat": self.repeat,
            "min_repeat_ms": 0.0 if flush else self.min_repeat_ms,
            "flush": self.enable_cpu_cache_flush,
            "flush_device": self.enable_gpu_cache_flush,
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
        self._measure(inputs, todo, results, [b.time_cost for b in build_results])
        return results  # type: ignore[return-value]

    #: ``ProgramMeasurer`` and AutoTVM's ``measure_batch`` call :meth:`build_and_run` instead
    #: of building candidates here for :meth:`run` (``autosched.measure.local.runner_builds``).
    builds_candidates = True

    def build_and_run(
        self, inputs: Sequence[MeasureInput]
    ) -> tuple[list[BuildResult], list[MeasureResult]]:
        """Build and measure each input on the servers, with no build here: a server runs only
        what it built from the state, so a build here would be thrown away.

        Returns
        -------
        (list of BuildResult, list of MeasureResult)
            One each per input. The build results are the servers' (no source: the code stays
            on the server): a candidate that did not build there has its build error (the
            codes of ``LocalBuilder``: INSTANTIATION_ERROR, COMPILE_HOST, COMPILE_DEVICE,
            BUILD_TIMEOUT) in both; ``time_cost`` and ``phases`` are what the server reported
            (0 and none when no reply came). The measure results have ``build_s`` and
            ``run_s`` filled (the server's build, the rest of the request).

        Raises
        ------
        autosched.rpc.NoServerError, ConnectionError
            As :meth:`run`.
        """
        n = len(inputs)
        results: list[MeasureResult | None] = [None] * n
        builds: list[BuildResult | None] = [None] * n
        self._measure(inputs, list(range(n)), results, [0.0] * n, builds)
        for i, res in enumerate(results):
            if builds[i] is None:  # no build report (no reply, a malformed one, refused)
                builds[i] = BuildResult(None, MeasureErrorNo.NO_ERROR, "", 0.0)
                if res.error_no in BUILD_ERRORS:
                    builds[i] = BuildResult(None, res.error_no, res.error_msg, 0.0)
        return builds, results  # type: ignore[return-value]

    def _measure(self, inputs, todo, results: list, spent: list, builds: list | None = None):
        """Measure ``inputs[i]`` for ``i`` in ``todo`` into ``results[i]`` (``spent[i]``: the
        seconds spent on it before); ``builds``, when given, gets the servers' builds."""
        payloads = {}
        for i in todo:
            try:
                steps_json_of(inputs[i].state)
            except Exception as exc:  # as in LocalBuilder: steps that cannot be sent
                msg = f"serialising the steps: {short_error(exc)}"
                results[i] = failed_result(MeasureErrorNo.INSTANTIATION_ERROR, msg, spent[i])
                continue
            payloads[i] = self._payload(inputs[i])
        if not payloads:
            return

        def finish(i, reply, secs, server):
            result, build = self._result(reply, secs, server)
            if builds is None or build is None:
                return result
            builds[i] = build  # the server's build is this candidate's: its seconds are too
            run_s = max(0.0, secs - build.time_cost)
            return dataclasses.replace(result, build_s=build.time_cost, run_s=run_s)

        self.run_jobs("measure", list(payloads), payloads.__getitem__, finish,
                      spent.__getitem__, results)  # fmt: skip

    def run_jobs(self, op: str, todo, payload, finish, spent, results: list) -> None:
        """Run one server request ``op`` per index of ``todo`` on the servers of ``key``,
        ``n_parallel`` in flight (all the key's servers when it is None), one per server.

        ``payload(i)`` makes request ``i``'s plain data; ``finish(i, reply, secs, server)``
        turns its decoded reply into ``results[i]`` (raising :class:`BadReply` when the reply
        is malformed); ``spent(i)`` gives the seconds spent on ``i`` before it was sent.
        Failures become error records naming the server (see the module doc); the same
        handling serves every op.
        """
        from .client import REPLY_MARGIN_S, RemoteError

        tracker = self._connect()
        servers = tracker.wait_for_key(self.key, self.timeout)
        limit = self.n_parallel or len(servers)
        wait_s = 2 * self.timeout + REPLY_MARGIN_S  # the server's build + run, and a margin
        finished = threading.Event()  # set by any future as it finishes
        pending = list(reversed(todo))
        in_flight: dict = {}  # future -> (index, server, submitted at)
        resent: set = set()  # indices sent again after their server left
        sent: dict = {}  # index -> when it was sent to its server
        no_server_since = None

        def record(i, code, msg):
            results[i] = failed_result(code, msg, spent(i) + time.perf_counter() - sent[i])

        while pending or in_flight:
            busy = {server for _, server, _ in in_flight.values()}
            free = [s for s in servers if s not in busy and s not in self.hung_servers]
            while pending and free and len(in_flight) < limit:
                i, server = pending.pop(), free.pop(0)
                # The clock starts before the submit: on a loaded machine the server may start
                # (and report its build seconds) before submit returns here.
                sent[i] = time.perf_counter()
                future = tracker.submit(
                    self.key, op, payload(i), priority=self.priority, timeout=self.timeout,
                    worker=server,
                )  # fmt: skip
                in_flight[future] = (i, server, time.perf_counter())
                future.add_done_callback(lambda _: finished.set())
            finished.wait(POLL_S)
            finished.clear()
            now = time.perf_counter()
            progress = False
            for future in [f for f in in_flight if f.done()]:
                i, server, _ = in_flight.pop(future)
                progress = True
                secs = spent(i) + now - sent[i]
                try:
                    results[i] = finish(i, tracker.read(future, server), secs, server)
                    self.server_counts[server] += 1
                except (RemoteError, BadReply) as exc:
                    if future.status == "cancelled" or self._lost_tracker(tracker):
                        record(i, MeasureErrorNo.RUNTIME_DEVICE, self._tracker_lost_msg())
                    else:
                        record(i, MeasureErrorNo.RUNTIME_DEVICE, str(exc)[:600])
            for future in [f for f, (_, _, t) in in_flight.items() if now - t > wait_s]:
                i, server, _ = in_flight[future]
                if now - sent[i] < MAX_QUEUE_WAITS * wait_s and tracker.waiting_behind_others(
                    future.key
                ):  # the server is alive and busy with other clients' requests: not hung
                    in_flight[future] = (i, server, now)
                    continue
                del in_flight[future]
                self._cancel(future)
                self.hung_servers.add(server)
                msg = (
                    f"no reply from the RPC server {server} (key {self.key!r}) within {wait_s:g} "
                    f"s (timeout={self.timeout:g} s for the build and for the run, plus "
                    f"{REPLY_MARGIN_S:g} s): it is hung or stopped; this runner sends it "
                    "nothing more"
                )
                log.warning("RPCRunner: %s", msg)
                record(i, MeasureErrorNo.RUN_TIMEOUT, msg)
            if progress:
                no_server_since = None
                continue
            # Nothing finished: fail what is left if the tracker or the key's servers are gone.
            servers = self._key_servers(tracker)
            if servers is None:
                self._fail(in_flight, pending, results, spent, self._tracker_lost_msg())
                return
            for future, (i, server, _) in list(in_flight.items()):
                if server not in servers:  # the server left: send its candidate elsewhere
                    del in_flight[future]
                    self._cancel(future)
                    if i in resent:
                        msg = f"the RPC server {server} left the tracker while measuring"
                        record(i, MeasureErrorNo.RUNTIME_DEVICE, msg)
                    else:
                        resent.add(i)
                        pending.append(i)
            usable = [a for a in servers if a not in self.hung_servers]
            if usable or not pending:
                no_server_since = None
                continue
            no_server_since = no_server_since or time.monotonic()
            if servers and not in_flight:  # every server of the key is hung
                hung = ", ".join(sorted(self.hung_servers))
                msg = f"every RPC server of key {self.key!r} timed out ({hung})"
                self._fail(in_flight, pending, results, spent, msg)
                return
            if time.monotonic() - no_server_since > self.timeout:
                msg = f"no RPC server with key {self.key!r} left at the tracker"
                self._fail(in_flight, pending, results, spent, msg)
                return

    def _result(self, reply, secs: float, server: str) -> tuple:
        """``(MeasureResult, BuildResult or None)`` of a measure reply, validated
        (:class:`BadReply` otherwise); the build result is the server's build, None when the
        reply does not report it."""
        costs, code, msg = check_measure_reply(reply, server, self.repeat)
        report = check_build_report(reply, server)
        build = None
        if report is not None:
            built, build_s, run_s, phases = report
            self.server_seconds.update(build=build_s, run=run_s, request=secs)
            failed = not built and code != MeasureErrorNo.NO_ERROR
            build = BuildResult(None, code if failed else MeasureErrorNo.NO_ERROR,
                                msg if failed else "", build_s, phases)  # fmt: skip
        if code != MeasureErrorNo.NO_ERROR:
            return failed_result(code, msg, secs), build
        return MeasureResult(costs, 0, "", secs, time.time()), build

    @staticmethod
    def _cancel(future) -> None:
        # Best effort: with the tracker gone the client may already be closed, and dask
        # raises ClosedClientError for a cancel it cannot send (the work died with it).
        with contextlib.suppress(Exception):
            future.cancel()

    def _lost_tracker(self, tracker) -> bool:
        return tracker.client.status not in ("running", "connecting")

    def _key_servers(self, tracker) -> list[str] | None:
        """The tracker's servers of this runner's key; None when the tracker is gone (also
        when it goes between the status check and the query)."""
        if self._lost_tracker(tracker):
            return None
        try:
            return [a for a, keys in tracker.servers().items() if self.key in keys]
        except ConnectionError:
            return None

    def _tracker_lost_msg(self) -> str:
        return (
            f"lost the connection to the RPC tracker at {self.host}:{self.port} (stopped or "
            "restarted?); later rounds reconnect when it is back"
        )

    def _fail(self, in_flight, pending, results, spent, msg) -> None:
        warnings.warn(f"RPCRunner: {msg}", stacklevel=3)
        for future, (i, _, start) in in_flight.items():
            self._cancel(future)
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


# ----------------------------------------------------------------------------- replies

_ERROR_CODES = frozenset(int(c) for c in MeasureErrorNo)


def check_error_fields(reply, server: str) -> tuple[int, str]:
    """``(error_no, error_msg)`` of a reply dict, or :class:`BadReply` naming ``server``."""
    if not isinstance(reply, dict):
        raise BadReply(f"malformed reply from {server}: a {type(reply).__name__}, not a dict")
    code, msg = reply.get("error_no"), reply.get("error_msg")
    if isinstance(code, bool) or not isinstance(code, int) or code not in _ERROR_CODES:
        raise BadReply(
            f"malformed reply from {server}: error_no {code!r} is not a known code"[:300]
        )
    if not isinstance(msg, str):
        raise BadReply(f"malformed reply from {server}: error_msg is not a str")
    if code != MeasureErrorNo.NO_ERROR and server not in msg:
        msg = f"{msg} (on {server})"
    return code, msg


#: The codes of a failed build (``LocalBuilder``'s): a reply without its build report that
#: fails with one of these failed building.
BUILD_ERRORS = frozenset({MeasureErrorNo.INSTANTIATION_ERROR, MeasureErrorNo.COMPILE_HOST,
                          MeasureErrorNo.BUILD_TIMEOUT})  # fmt: skip


def check_build_report(reply: dict, server: str) -> tuple | None:
    """``(built, build_s, run_s, phases)`` of a measure reply's report (the server's build of
    the state: whether it succeeded, its seconds, then the run's seconds and the build's
    ``lower`` / ``codegen`` / ``compile`` stages'), None when the reply has none (a server of
    an older autosched), or :class:`BadReply` naming ``server`` when it is malformed."""
    if "built" not in reply:
        return None
    built, phases = reply.get("built"), reply.get("phases")
    if not isinstance(built, bool):
        raise BadReply(f"malformed reply from {server}: built is not true or false")
    if not isinstance(phases, dict) or not set(phases) <= set(BUILD_PHASES):
        raise BadReply(f"malformed reply from {server}: phases must map "
                       f"{', '.join(BUILD_PHASES[:3])} to seconds")  # fmt: skip
    seconds = [check_seconds(reply.get(k), server, k) for k in ("build_s", "run_s")]
    phases = {k: check_seconds(v, server, f"phases.{k}") for k, v in phases.items()}
    return built, seconds[0], seconds[1], phases


def check_seconds(value, server: str, what: str) -> float:
    """A duration a server reported: a finite float >= 0, or :class:`BadReply`."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and value >= 0):
        raise BadReply(f"malformed reply from {server}: {what} {value!r} is not a number of "
                       "seconds"[:300])  # fmt: skip
    return float(value)


def check_cost(value, server: str, what: str = "cost") -> float:
    """A measured time: a finite float > 0, or :class:`BadReply` naming ``server``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadReply(f"malformed reply from {server}: {what} {value!r} is not a number"[:300])
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise BadReply(f"malformed reply from {server}: {what} {value!r} is not a finite "
                       "positive number")  # fmt: skip
    return value


def check_measure_reply(reply, server: str, repeat: int) -> tuple[tuple, int, str]:
    """``(costs, error_no, error_msg)`` of a measure reply, checked: a known code, and without
    error 1 to ``2 * repeat`` costs (repeats plus re-timed outliers), each finite and > 0."""
    code, msg = check_error_fields(reply, server)
    if code != MeasureErrorNo.NO_ERROR:
        return (), code, msg
    costs = reply.get("costs")
    if not isinstance(costs, list) or not 1 <= len(costs) <= 2 * repeat:
        n = len(costs) if isinstance(costs, list) else type(costs).__name__
        raise BadReply(f"malformed reply from {server}: {n} costs for repeat={repeat}")
    return tuple(check_cost(c, server) for c in costs), code, msg
