"""The server side of remote devices: what runs inside an RPC server's dask worker.

Clients submit one function, :func:`device_call`, with plain data (str, numbers, bytes, numpy
arrays of numbers, lists and dicts of them): never code of their own. It checks the request
and forwards it to the server's device process (:mod:`autosched.rpc.device_process`), which
owns the device and is replaced when a kernel crashes it or a measurement runs past its
timeout. Every answer is reply bytes (:mod:`autosched.rpc.wire`), errors included: the
function never raises, so nothing the client reads is a pickle.

A measurement request carries a *state*, not code: the DAG as plain data
(:mod:`tensorir.dag_data`), the steps as records store them and the target. The device
process replays the steps, generates the kernel and compiles it with this server's own code
generator and compiler; the server never links, loads or JITs code it received. So does a
session's ``load`` of an uploaded library: every kernel is rebuilt here from the state the
library records and compared with what the file carries (:mod:`autosched.rpc.rebuild`), or
the library is refused. The one exception is a ``load`` whose request says ``trust=True``
(:meth:`RemoteSession.load_module`), which loads the library as it is, running its code.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from codegen.target import BACKENDS

from ..measure.data import MeasureErrorNo
from .wire import encode_reply

#: What a measurement request is: a state (DAG, steps, target), never code.
STATE_FORMAT = "autosched-state"
STATE_VERSION = 2
LANGS = {k: b.device_kind for k, b in BACKENDS.items() if b.lang is not None}  # kind -> device
#: The simulated VTA: a server of this device kind runs VTA programs (``"vta_measure"``).
VTA_DEVICE = "vta"
DEVICE_KINDS = (*LANGS.values(), VTA_DEVICE)
#: Keys whose servers simulate VTA unless ``--device`` says otherwise: the VTA environment's
#: ``TARGET`` (``autotvm.RPCRunner(env.TARGET, ...)`` in seed 004).
VTA_KEYS = ("sim",)


def default_devices(key: str) -> tuple:
    """The device kinds of a server of ``key`` started without ``--device``."""
    return (VTA_DEVICE,) if key in VTA_KEYS else ("cpu",)


NO_ERROR = int(MeasureErrorNo.NO_ERROR)
INSTANTIATION_ERROR = int(MeasureErrorNo.INSTANTIATION_ERROR)
COMPILE_HOST = int(MeasureErrorNo.COMPILE_HOST)
COMPILE_DEVICE = int(MeasureErrorNo.COMPILE_DEVICE)
BUILD_TIMEOUT = int(MeasureErrorNo.BUILD_TIMEOUT)
RUNTIME_DEVICE = int(MeasureErrorNo.RUNTIME_DEVICE)
RUN_TIMEOUT = int(MeasureErrorNo.RUN_TIMEOUT)

# This server's configuration (set by ``python -m autosched.exec.rpc_server``) and its device
# process; one dask worker thread uses them, the lock guards against a second.
_server = {"key": None, "devices": ("cpu",), "workdir": None}
_lock = threading.Lock()
_device: dict = {"proc": None}

START_TIMEOUT = 120.0
# Seconds past a measure request's build timeout before its device process is called hung.
BUILD_GRACE_S = 5.0
SESSION_OP_TIMEOUT = 600.0


def configure(key: str, devices=("cpu",), workdir: str | None = None) -> None:
    """Set this process up as the server of ``key`` for device kinds ``devices``."""
    bad = [d for d in devices if d not in DEVICE_KINDS]
    if bad:
        raise ValueError(f"--device {bad[0]!r}: use one of {', '.join(DEVICE_KINDS)}")
    _server.update(
        key=key,
        devices=tuple(devices),
        workdir=workdir or tempfile.mkdtemp(prefix=f"autosched-rpc-{key}-"),
    )


def server_triple() -> str:
    import llvmlite.binding as llvm

    return llvm.get_default_triple()


def _describe() -> str:
    return f"server {_server['key']!r} ({', '.join(_server['devices'])}; {server_triple()})"


# ----------------------------------------------------------------------------- checks


def _check_plain(value, where: str = "request") -> None:
    """Refuse anything but plain data (the protocol never carries code or objects)."""
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            raise TypeError(f"{where}: arrays must hold numbers, got dtype {value.dtype}")
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_plain(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{where}: dict keys must be str, got {type(k).__name__}")
            _check_plain(item, f"{where}.{k}")
        return
    raise TypeError(f"{where}: {type(value).__name__} is not plain data; send arrays and dicts")


def request_problem(job: dict) -> str | None:
    """Why this server cannot measure ``job``, or None when it can."""
    if job.get("format") != STATE_FORMAT or job.get("format_version") != STATE_VERSION:
        return (
            f"{_describe()} refuses a request of format {job.get('format')!r} version "
            f"{job.get('format_version')} (it reads {STATE_FORMAT!r} {STATE_VERSION}: a state "
            "it builds itself, never code); use the same autosched version on both sides"
        )
    return target_problem(job.get("target"))


def target_problem(target) -> str | None:
    """Why this server cannot build and run kernels for ``target``, or None when it can."""
    from codegen.target import Target, target_triple
    from runtime.cpu import same_triple

    try:
        target = Target(str(target))
    except Exception as exc:
        return f"{_describe()} refuses the target {str(target)[:100]!r}: {exc}"[:400]
    kind = LANGS.get(target.kind)
    if kind not in _server["devices"]:
        return (
            f"{_describe()} refuses a {target.kind} kernel: it serves "
            f"{', '.join(_server['devices'])}; send it to a server of that device kind"
        )
    triple = target_triple(target) if target.backend.on_host else None
    if triple and not same_triple(triple, server_triple()):
        return (
            f"{_describe()} refuses CPU code for {triple}; tune with a target whose "
            f"-mtriple is {server_triple()}"
        )
    return None


# ----------------------------------------------------------------------------- device process


def _device_process():
    proc = _device["proc"]
    if proc is None or proc.proc.poll() is not None:
        from ..workers import WorkerProcess
        from .device_process import device_main

        proc = WorkerProcess(("autosched.rpc.device_process",), f"{_server['key']} device")
        proc.wait_ready(START_TIMEOUT)
        proc.serve(device_main)
        reply = proc.recv(START_TIMEOUT)
        if reply is None or reply[0] != "hello":
            detail = reply[1] if reply and reply[0] == "failed" else proc.death()
            proc.kill()
            raise RuntimeError(f"{_describe()}: the device process did not start: {detail}")
        _device["proc"] = proc
    return proc


def _replace_device_process() -> None:
    proc, _device["proc"] = _device["proc"], None
    if proc is not None:
        proc.kill()


def _ask(op: str, kwargs: dict, timeout: float) -> tuple:
    """``("ok", value)`` / ``("error", msg)`` from the device process, ``("died", why)`` when
    it crashed, ``("timeout", None)`` when it did not answer in time (it is then replaced)."""
    proc = _device_process()
    try:
        proc.conn.send((op, kwargs))
    except OSError:
        reply = ("eof",)
    else:
        reply = proc.recv(timeout)
    if reply is None:
        _replace_device_process()
        return ("timeout", None)
    if reply[0] == "eof":
        why = proc.death()
        _replace_device_process()
        return ("died", why)
    return reply


# ----------------------------------------------------------------------------- the entry point


def device_call(op: str, args: dict, timeout: float | None = None) -> bytes:
    """Run one request on this server's device (the one function clients submit).

    Parameters
    ----------
    op : str
        ``"measure"`` (a state, :func:`_measure`), ``"vta_measure"`` (a VTA program on a
        ``vta`` server, :mod:`autosched.rpc.vta_job`), ``"upload"``, ``"info"`` or a session
        operation of :data:`autosched.rpc.device_process.OPS`.
    args : dict
        Plain data only.
    timeout : float, optional
        Seconds the device may take (a measurement past it is RUN_TIMEOUT and the device
        process is replaced).

    Returns
    -------
    bytes
        Reply bytes (:func:`autosched.rpc.wire.encode_reply`) of ``{"ok": value}`` or
        ``{"error": one line}``. For ``"measure"`` the value is ``{"costs", "error_no",
        "error_msg", "server"}``, for ``"vta_measure"`` a dict (:func:`_measure_vta`).
    """
    try:
        if _server["key"] is None:
            raise RuntimeError("this dask worker is not an autosched RPC server (rpc_server)")
        _check_plain(args, op)
        with _lock:
            value = _dispatch(op, args, timeout)
        return encode_reply({"ok": value})
    except Exception as exc:  # every failure is one line of data, never a pickled exception
        from ..measure.worker import short_error

        text = str(exc) if isinstance(exc, RuntimeError) else short_error(exc)
        return encode_reply({"error": " ".join(text.split())[:1000]})


def _dispatch(op: str, args: dict, timeout: float | None):
    from .device_process import MEASURE_OPS, OPS

    if op == "info":
        return {
            "key": _server["key"],
            "devices": list(_server["devices"]),
            "triple": server_triple(),
            "pid": os.getpid(),
        }
    if op == "upload":
        return _upload(args["name"], args["data"])
    if op == "measure":
        return _measure(args, timeout)
    if op == "vta_measure":
        return _measure_vta(args, timeout)
    if op not in OPS or op in MEASURE_OPS:
        raise RuntimeError(f"{_describe()}: unknown operation {op!r}")
    if op == "load":
        path = str(_workfile(args["name"]))
        trust = args.get("trust") is True  # loading a library as it is runs its code
        if not trust:
            _check_rebuildable(path)
        args = {k: v for k, v in args.items() if k not in ("name", "trust")}
        args.update(path=path, trust=trust)
    reply = _ask(op, args, timeout or SESSION_OP_TIMEOUT)
    if reply[0] == "ok":
        return reply[1]
    if reply[0] == "died":
        raise RuntimeError(f"{_describe()}: the device process {reply[1]} during {op}")
    if reply[0] == "timeout":
        raise RuntimeError(f"{_describe()}: {op} did not finish within {timeout:g} s")
    raise RuntimeError(f"{_describe()}: {reply[1]}")


def _check_rebuildable(path: str) -> None:
    """Refuse, before the device process sees it, a library this server cannot rebuild from
    its recorded states (:mod:`autosched.rpc.rebuild`; read as data, nothing loaded)."""
    from .rebuild import TRUST_HINT, kernel_label, read_description, recorded_states

    try:
        meta, _ = read_description(path)
        states = recorded_states(path, meta)
    except ValueError as exc:
        text = " ".join(str(exc).split())
        hint = "" if TRUST_HINT in text else f"; {TRUST_HINT}"
        raise RuntimeError(f"{_describe()}: {text}{hint}") from None
    for i, (kernel, state) in enumerate(zip(meta["kernels"], states)):
        problem = target_problem(state["target"])
        if problem:
            where = kernel_label(i, kernel, state)
            raise RuntimeError(f"{problem} ({Path(path).name}: {where})")


def _measure(job: dict, timeout: float | None) -> dict:
    """Build the state of ``job`` here and measure it: ``{"costs", "error_no", "error_msg",
    "server", "built", "build_s", "phases", "run_s"}``.

    The build gets ``timeout`` seconds and the run (load, check, timing) the rest of
    ``2 * timeout``, in the device process; ``built`` says whether the build succeeded (so
    the client classifies a failure as a build or a run error, as a local build would),
    ``build_s`` and ``phases`` are the build's seconds and its stages' (``lower``,
    ``codegen``, ``compile``), ``run_s`` the run's, all measured here (0 for a stage that did
    not happen).
    """
    server = f"{_server['key']}@{os.getpid()}"
    report = {"built": False, "build_s": 0.0, "phases": {}, "run_s": 0.0}

    def result(costs, code, msg) -> dict:
        return {"costs": list(costs), "error_no": int(code), "error_msg": msg,
                "server": server, **report}  # fmt: skip

    problem = request_problem(job)
    if problem:
        return result((), COMPILE_DEVICE, problem)
    timeout = float(timeout or 10.0)
    start = time.perf_counter()
    # The build stops itself at ``timeout`` (build_one's alarm); the grace covers a build
    # stuck in C code, within the 2 * timeout the client allows the request.
    reply = _ask("build_candidate", {"job": job, "timeout": timeout}, timeout + BUILD_GRACE_S)
    report["build_s"] = time.perf_counter() - start
    if reply[0] == "timeout":
        msg = f"building the candidate did not finish within {timeout:g} s on {_describe()}"
        return result((), BUILD_TIMEOUT, msg)
    if reply[0] == "died":  # e.g. a crash in LLVM: a build error, as in the local builder
        return result((), COMPILE_HOST, f"building on {_describe()}: the device process "
                                        f"{reply[1]}")  # fmt: skip
    if reply[0] != "ok":  # build_one reports its own errors: the request was malformed
        return result((), INSTANTIATION_ERROR, f"the server refuses the state: {reply[1]}")
    built = reply[1]
    report.update(build_s=float(built["build_s"]), phases=dict(built["phases"]))
    if built["error_no"] != NO_ERROR:
        return result((), built["error_no"], built["error_msg"])
    report["built"] = True
    start = time.perf_counter()
    left = max(timeout, 2 * timeout - report["build_s"])
    reply = _ask("run_candidate", {}, left)
    report["run_s"] = time.perf_counter() - start
    if reply[0] == "ok":
        costs, code, msg, restart = reply[1]
        if restart:  # the device context is broken: the next candidate gets a fresh process
            _replace_device_process()
        return result(costs, code, msg)
    if reply[0] == "timeout":
        msg = f"the candidate did not finish within {left:g} s on {_describe()}"
        return result((), RUN_TIMEOUT, msg)
    if reply[0] == "died":
        return result((), RUNTIME_DEVICE, f"the device process of {_describe()} {reply[1]}")
    return result((), RUNTIME_DEVICE, reply[1])


def _measure_vta(job: dict, timeout: float | None) -> dict:
    """Simulate one VTA job (:mod:`autosched.rpc.vta_job`) in the device process.

    Returns ``{"error_no", "error_msg", "server"}`` plus, without error, ``cycles``,
    ``seconds`` and ``counters``. A job that is not a well-formed instruction stream is
    refused (COMPILE_DEVICE), a program the simulator rejects (deadlock, buffer overflow) or a
    device process that dies is RUNTIME_DEVICE, a wrong output WRONG_ANSWER, and one past
    ``timeout`` RUN_TIMEOUT (the device process is then replaced).
    """
    server = f"{_server['key']}@{os.getpid()}"

    def error(code: int, msg: str) -> dict:
        return {"error_no": code, "error_msg": msg, "server": server}

    if VTA_DEVICE not in _server["devices"]:
        return error(
            COMPILE_DEVICE,
            f"{_describe()} refuses a VTA program: it is not a VTA simulator server; start one "
            f"with python -m autosched.exec.rpc_server --key sim (or --device {VTA_DEVICE})",
        )
    timeout = float(timeout or 10.0)
    reply = _ask("vta_measure", {"job": job}, timeout)
    if reply[0] == "ok":
        result = {**reply[1], "server": server}
        if result["error_no"] == COMPILE_DEVICE:  # name the server that refused it
            result["error_msg"] = f"{_describe()} {result['error_msg']}"
        return result
    if reply[0] == "timeout":
        return error(RUN_TIMEOUT, f"the VTA program did not finish within {timeout:g} s on "
                                  f"{_describe()}")  # fmt: skip
    if reply[0] == "died":
        return error(RUNTIME_DEVICE, f"the device process of {_describe()} {reply[1]}")
    return error(RUNTIME_DEVICE, reply[1])


_SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def _workfile(name: str) -> Path:
    name = str(name)
    if not _SAFE_NAME.match(name) or name in (".", ".."):
        raise RuntimeError(
            f"{_describe()}: file name {name!r} must be a plain name (letters, digits, . _ -)"
        )
    return Path(_server["workdir"]) / name


def _upload(name: str, data: bytes) -> str:
    path = _workfile(name)
    path.write_bytes(bytes(data))
    return path.name


def start_device_process() -> None:
    """Start the device process now (a server does, so the first request does not wait)."""
    with _lock:
        _device_process()


def stop_device_process() -> None:
    """Stop the device process and remove the uploaded files."""
    with _lock:
        proc, _device["proc"] = _device["proc"], None
        if proc is not None:
            proc.stop()
        if _server["workdir"] is not None:
            shutil.rmtree(_server["workdir"], ignore_errors=True)
