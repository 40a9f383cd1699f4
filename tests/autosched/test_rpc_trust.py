"""Remote measurement that cannot hang, lie or run code (issue 27, section 1).

Real processes on 127.0.0.1: a tracker, good servers, and fake servers
(``rpc_fake_server.py``) that answer with pickled objects, raise pickled exceptions, answer
garbage or never answer; one good server is SIGSTOPped. The client must run none of their
code, turn every bad reply into an error record naming the server, and finish a tune when
servers hang.
"""

import contextlib
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import autosched as ansor
from autosched import workloads
from autosched.measure import MeasureErrorNo
from autosched.measure.data import MeasureResult

pytest.importorskip("distributed")
from test_rpc import (  # noqa: E402
    ROOT,
    START_TIMEOUT,
    Processes,
    _built,
    _connect,
    _free_port,
    _make_certs,
    _server_args,
    _wait_for_servers,
)

from autosched import rpc  # noqa: E402

HERE = Path(__file__).resolve().parent
# The longest a test here may take once its cluster is up: generous, for a loaded 2-core machine;
# without the fixes the runs below never end.
BOUND_S = 240.0


def _start_fake(procs: Processes, name: str, mode: str, port: int, key: str, marker: Path):
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{HERE}",
               AUTOSCHED_TEST_MARKER=str(marker))  # fmt: skip
    workdir = procs.logdir / name
    workdir.mkdir()
    log = open(procs.logdir / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "rpc_fake_server", mode, *_server_args(port, key)[1:]],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir, start_new_session=True,
    )  # fmt: skip
    proc.log = log
    proc.workdir = workdir
    procs.procs.append(proc)
    return proc


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A tracker; key "cpu": a good server; key "junk": a fake server told what to answer by
    its ``control`` file; key "h": a good server, one to SIGSTOP and a fake that never answers."""
    logdir = tmp_path_factory.mktemp("rpc-trust")
    procs = Processes(logdir)
    port = _free_port()
    marker = logdir / "marker"
    try:
        procs.start("tracker", "autosched.exec.rpc_tracker", "--port", str(port))
        servers = {
            "cpu": procs.start("cpu", *_server_args(port, "cpu")),
            "junk": _start_fake(procs, "junk", "control", port, "junk", marker),
            "good": procs.start("good", *_server_args(port, "h")),
            "stopped": procs.start("stopped", *_server_args(port, "h")),
            "hang": _start_fake(procs, "hang", "hang", port, "h", marker),
        }
        tracker = _connect(port, procs.procs[0])
        _wait_for_servers(tracker, {"cpu": 1, "junk": 1, "h": 3}, list(servers.values()))
        info = tracker.client.scheduler_info(n_workers=-1)["workers"]
        by_pid = {w["name"].rsplit(":", 1)[-1]: addr for addr, w in info.items()}
        address = {name: by_pid[str(p.pid)] for name, p in servers.items()}
        yield {"port": port, "tracker": tracker, "procs": procs, "servers": servers,
               "address": address, "marker": marker, "logdir": logdir}  # fmt: skip
        tracker.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(servers["stopped"].pid, signal.SIGCONT)
        procs.close()


@pytest.fixture(scope="module")
def task():
    return ansor.SearchTask(compute_dag=ansor.ComputeDAG(workloads.matmul(16, 16, 16)),
                            target="llvm")  # fmt: skip


def _in_thread(fn, bound=BOUND_S):
    """``fn()`` in a daemon thread, joined for at most ``bound`` seconds (a hang fails)."""
    out = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(bound)
    assert not thread.is_alive(), f"still running after {bound:g} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


# ----------------------------------------------------------------------------- 1. pickles


def test_a_server_cannot_run_code_on_the_client(cluster, task):
    junk = cluster["servers"]["junk"]
    inputs, built = _built(task)
    with rpc.RPCRunner("junk", "127.0.0.1", cluster["port"], timeout=20) as runner:
        for mode in ("pickle", "raise", "warn", "type"):
            (junk.workdir / "control").write_text(mode)
            (result,) = _in_thread(lambda: runner.run(inputs, built))
            marker = cluster["marker"]
            deadline = time.monotonic() + 3  # a dask event may arrive after the reply
            while mode == "warn" and not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not marker.exists(), (
                f"{mode}: {marker.read_text()} (the client is {os.getpid()})"
            )
            assert result.error_no != MeasureErrorNo.NO_ERROR, mode
            assert cluster["address"]["junk"] in result.error_msg, (mode, result.error_msg)
            assert "\n" not in result.error_msg


# ----------------------------------------------------------------------------- 4. garbage


def test_garbage_replies_become_error_records_naming_the_server(cluster, task):
    from rpc_fake_server import GARBAGE

    junk = cluster["servers"]["junk"]
    inputs, built = _built(task)
    problems = []
    with rpc.RPCRunner("junk", "127.0.0.1", cluster["port"], timeout=20) as runner:
        for k, reply in enumerate(GARBAGE):
            (junk.workdir / "control").write_text(f"garbage {k}")
            try:
                (result,) = _in_thread(lambda: runner.run(inputs, built))
            except Exception as exc:  # noqa: BLE001 - the finding: a crash
                problems.append(f"{reply}: {type(exc).__name__}: {exc}")
                continue
            if result.error_no == MeasureErrorNo.NO_ERROR:
                problems.append(f"{reply}: accepted as an error-free record {result.costs}")
            elif cluster["address"]["junk"] not in result.error_msg:
                problems.append(f"{reply}: the error does not name the server: {result.error_msg}")
    assert not problems, problems


def test_vta_reply_without_cycles_is_an_error_record(cluster):
    from test_vta_templates import CONV_ARGS

    from autosched import autotvm, vta

    junk = cluster["servers"]["junk"]
    (junk.workdir / "control").write_text("garbage 0")
    vta_task = autotvm.task.create("conv2d_packed.vta", CONV_ARGS, target=vta.get_env().target)
    runner = autotvm.RPCRunner("junk", host="127.0.0.1", port=cluster["port"], timeout=20,
                               module_loader=vta.module_loader())  # fmt: skip
    with runner:
        configs = [vta_task.config_space.get(575)]
        _, (result,) = _in_thread(lambda: runner.measure_configs(vta_task, configs))
    assert result.error_no != MeasureErrorNo.NO_ERROR, result
    assert "cycles" in result.error_msg and cluster["address"]["junk"] in result.error_msg


def test_search_policy_takes_a_zero_cost(task):
    policy = ansor.SketchPolicy(task, ansor.RandomModel(0), seed=0, verbose=0)
    state = task.compute_dag.get_init_state()
    inp = ansor.MeasureInput(task, state)
    policy.record_results([inp, inp], [MeasureResult((0.0,)), MeasureResult((1e-3,))])
    assert all(math.isfinite(t) and t > 0 for t, _ in policy.measured)
    assert policy.best_cost == 1e-3


# ----------------------------------------------------------------------------- 3. hangs


@pytest.mark.slow
def test_hung_servers_time_out_and_tuning_goes_on(cluster, task, monkeypatch):
    """One server SIGSTOPped, one that never answers, one good: every candidate gets a result,
    the hung ones RUN_TIMEOUT naming their server, and the good server measures the rest."""
    from autosched.rpc import client

    monkeypatch.setattr(client, "REPLY_MARGIN_S", 10.0)  # deadlines of 2 * 3 + 10 s
    stopped = cluster["servers"]["stopped"]
    address = cluster["address"]
    inputs, built = _built(task, 8)
    os.killpg(stopped.pid, signal.SIGSTOP)
    try:
        runner = rpc.RPCRunner("h", "127.0.0.1", cluster["port"], n_parallel=3, number=1,
                               timeout=3)  # fmt: skip
        with runner:
            results = _in_thread(lambda: runner.run(inputs, built))
    finally:
        os.killpg(stopped.pid, signal.SIGCONT)
    assert len(results) == 8
    timeouts = [r for r in results if r.error_no == MeasureErrorNo.RUN_TIMEOUT]
    ok = [r for r in results if r.error_no == MeasureErrorNo.NO_ERROR]
    # Each hung server gets one candidate at most: the runner stops sending to it.
    assert len(timeouts) <= 2 and len(ok) + len(timeouts) == 8, [r.error_msg for r in results]
    named = {name for name in ("stopped", "hang") for r in timeouts if address[name] in r.error_msg}
    assert len(named) == len(timeouts), [r.error_msg for r in timeouts]
    assert all(address["good"] not in r.error_msg for r in timeouts)


@pytest.mark.slow
def test_waiting_behind_another_clients_request_is_not_a_hang(cluster, task, monkeypatch):
    """The deadline counts from when the request starts on a live server: a server busy
    with another client's long request is not called hung."""
    from autosched.rpc import client

    monkeypatch.setattr(client, "REPLY_MARGIN_S", 1.0)  # deadlines of 2 * 3 + 1 s
    inputs, built = _built(task)
    runner = rpc.RPCRunner("cpu", "127.0.0.1", cluster["port"], number=1, timeout=3)
    blocker = dict(runner._payload(inputs[0], built[0]), min_repeat_ms=9_000.0)
    with rpc.connect_tracker("127.0.0.1", cluster["port"]) as other, runner:
        busy = other.submit("cpu", "measure", blocker, timeout=30)
        deadline = time.monotonic() + 60
        while not other.client.processing().get(cluster["address"]["cpu"]):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        (result,) = _in_thread(lambda: runner.run(inputs, built))
        assert other.reply(busy, None, 120)["error_no"] == MeasureErrorNo.NO_ERROR
    assert result.error_no == MeasureErrorNo.NO_ERROR, result.error_msg
    assert not runner.hung_servers


# ----------------------------------------------------------------------------- 2. code on servers


def _evil_ir(code: str, marker: Path) -> str:
    """The kernel's LLVM IR with a call to ``system("touch MARKER")`` at its entry."""
    cmd = f"touch {marker}".encode() + b"\x00"
    text = "".join(f"\\{b:02X}" for b in cmd)
    code = code.replace("entry:\n", "entry:\n  %sys = call i32 @system(ptr @cmd)\n", 1)
    return (
        code + f'\n@cmd = private constant [{len(cmd)} x i8] c"{text}"\ndeclare i32 @system(ptr)\n'
    )


def test_server_never_runs_code_from_a_measure_request(cluster, task, tmp_path):
    marker = tmp_path / "ran-on-server"
    inputs, built = _built(task)
    with rpc.RPCRunner("cpu", "127.0.0.1", cluster["port"], timeout=20) as runner:
        src = dict(built[0].source, code=_evil_ir(built[0].source["code"], marker), binary=None)
        evil = type(built[0])(src, 0, "", 0.0)
        (result,) = _in_thread(lambda: runner.run(inputs, [evil]))
        assert not marker.exists(), "the server ran LLVM IR sent by a client"
        assert result.error_no == MeasureErrorNo.NO_ERROR, result.error_msg  # built from the state
        payload = runner._payload(inputs[0], built[0])
    assert "artifact" not in payload and "code" not in payload  # the state travels, not code


def test_loading_a_library_needs_trust_and_does_not_run_it_otherwise(cluster, tmp_path):
    marker = tmp_path / "constructor-ran"
    c_file = tmp_path / "evil.c"
    c_file.write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void boom(void) {\n"
        f'  FILE *f = fopen("{marker}", "w"); if (f) fclose(f);\n}}\n'
    )
    lib = tmp_path / "evil.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(c_file)], check=True,
                   capture_output=True, timeout=60)  # fmt: skip
    remote = cluster["tracker"].request("cpu", timeout=20)
    remote.upload(lib)
    with pytest.raises((RuntimeError, ValueError), match="trust=True"):
        remote.load_module("evil.so")
    # The server refuses on its own, whatever the client says
    with pytest.raises(RuntimeError, match="trust=True"):
        remote.call("load", handle="h", name="evil.so", kind="cpu", index=0)
    assert not marker.exists(), "the server ran an uploaded library's constructor"


@pytest.mark.slow
@pytest.mark.skipif(subprocess.run(["which", "openssl"], capture_output=True).returncode != 0,
                    reason="no openssl command")  # fmt: skip
def test_tls_tracker_serves_no_identity_over_plain_http(tmp_path):
    import psutil

    good = _make_certs(tmp_path, "good")
    tls = ("--tls-ca-file", good["ca"], "--tls-cert", good["cert"], "--tls-key", good["key"])
    procs = Processes(tmp_path)
    port = _free_port()
    try:
        tracker = procs.start("tls-tracker", "autosched.exec.rpc_tracker", "--port", str(port),
                              *tls)  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT
        while "listening" not in (tmp_path / "tls-tracker.log").read_text():
            assert tracker.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        ports = {c.laddr.port for c in psutil.Process(tracker.pid).net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN} - {port}  # fmt: skip
        served = []
        for http_port in ports:
            for route in ("info/main/workers.html", "json/identity.json", "health"):
                url = f"http://127.0.0.1:{http_port}/{route}"
                with (
                    contextlib.suppress(urllib.error.URLError, OSError),
                    urllib.request.urlopen(url, timeout=10),
                ):
                    served.append(route)
        assert set(served) <= {"health"}, served  # health checks only
        bad = subprocess.run(
            [sys.executable, "-m", "autosched.exec.rpc_tracker", "--port", str(_free_port()),
             "--dashboard", str(_free_port()), *tls],
            capture_output=True, text=True, timeout=30, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )  # fmt: skip
        assert bad.returncode == 2 and "dashboard" in bad.stderr, bad.stderr
    finally:
        procs.close()
