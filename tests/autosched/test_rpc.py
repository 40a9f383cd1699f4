"""Remote devices on dask.distributed, with real processes on 127.0.0.1: the tracker and
servers started with the seed's commands, queries, tuning through RPCRunner, a server killed
mid-run, unknown keys, priorities, request checks, a remote GraphModule and TLS."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from test_network import small_net

import autosched as ansor
import runtime
from autosched import workloads
from autosched.measure import MeasureErrorNo
from autosched.measure.data import MeasureInput
from autosched.measure.records import load_records, log_ended_cleanly

pytest.importorskip("distributed")
from autosched import rpc  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Processes:
    """Commands started for a test, all killed (with their children) at the end."""

    def __init__(self, logdir: Path):
        self.logdir = logdir
        self.procs: list[subprocess.Popen] = []

    def start(self, name: str, *args: str) -> subprocess.Popen:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        log = open(self.logdir / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.logdir,
            start_new_session=True,  # its own process group: its device process dies with it
        )
        proc.log = log
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        proc.log.close()

    def close(self) -> None:
        for proc in self.procs:
            self.kill(proc)


def _server_args(port: int, key: str, *extra: str) -> tuple:
    return ("autosched.exec.rpc_server", "--tracker", f"127.0.0.1:{port}", "--key", key, *extra)


def _wait_for_servers(tracker, counts: dict, procs=()) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        servers = tracker.servers()
        have = {k: sum(k in keys for keys in servers.values()) for k in counts}
        if all(have[k] >= n for k, n in counts.items()):
            return
        dead = [p.args for p in procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            raise RuntimeError(f"servers did not register: {have} (dead: {dead})")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A tracker, two servers of key "cpu" and one of key "solo"."""
    logdir = tmp_path_factory.mktemp("rpc")
    procs = Processes(logdir)
    port = _free_port()
    try:
        procs.start("tracker", "autosched.exec.rpc_tracker", "--port", str(port))
        servers = [
            procs.start("cpu-a", *_server_args(port, "cpu")),
            procs.start("cpu-b", *_server_args(port, "cpu")),
            procs.start("solo", *_server_args(port, "solo")),
        ]
        tracker = _connect(port, procs.procs[0])
        _wait_for_servers(tracker, {"cpu": 2, "solo": 1}, servers)
        yield {"port": port, "tracker": tracker, "procs": procs, "logdir": logdir}
        tracker.close()
    finally:
        procs.close()


def _connect(port, tracker_proc):
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            return rpc.connect_tracker("127.0.0.1", port, timeout=2)
        except ConnectionError:
            if tracker_proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.3)


@pytest.fixture(scope="module")
def task():
    dag = ansor.ComputeDAG(workloads.matmul(32, 32, 32))
    return ansor.SearchTask(compute_dag=dag, target="llvm")


def _built(task, n=1):
    """``n`` built candidates of ``task`` (its initial state)."""
    state = task.compute_dag.get_init_state()
    inputs = [MeasureInput(task, state)] * n
    with ansor.LocalBuilder(n_parallel=1) as builder:
        return inputs, builder.build(inputs)


def test_query_rpc_tracker_shows_the_servers(cluster):
    out = subprocess.run(
        [sys.executable, "-m", "autosched.exec.query_rpc_tracker", "--port", str(cluster["port"])],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.count("server:cpu\n") == 2 and text.count("server:solo\n") == 1
    assert "Queue Status" in text and "key    total  free  pending" in text
    rows = {
        line.split()[0]: line.split()[1:]
        for line in text.splitlines()
        if line[:4] in ("cpu ", "solo")
    }
    assert rows == {"cpu": ["2", "2", "0"], "solo": ["1", "1", "0"]}


def test_tune_through_rpc_runner_writes_valid_records(cluster, task, tmp_path):
    log = tmp_path / "rpc.json"
    runner = rpc.RPCRunner("cpu", "127.0.0.1", cluster["port"], n_parallel=2, number=2, timeout=20)
    with runner:
        options = ansor.TuningOptions(
            num_measure_trials=8, num_measures_per_round=8, verbose=0, runner=runner,
            builder=ansor.LocalBuilder(n_parallel=2), measure_callbacks=[ansor.RecordToFile(log)],
        )  # fmt: skip
        best = task.tune(options)
    records = list(load_records(log))
    assert best is not None and len(records) == 8 and log_ended_cleanly(log)
    ok = [r for _, r in records if r.error_no == MeasureErrorNo.NO_ERROR]
    assert len(ok) >= 6, [r.error_msg for _, r in records]
    assert all(0 < r.mean_cost < 1 and len(r.costs) == 1 and r.timestamp > 0 for r in ok)
    assert len(runner.server_counts) == 2, runner.server_counts  # both servers took work
    sch = task.apply_best(log)  # the records replay as LocalRunner's do
    func = ansor.build(sch, "llvm")
    rng = np.random.default_rng(7)
    a, b = (rng.uniform(-1, 1, (32, 32)).astype("float32") for _ in range(2))
    c = np.empty((32, 32), "float32")
    func(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)


def test_remote_tune_builds_on_the_server_only(cluster, task, tmp_path, monkeypatch):
    """The client builds nothing (a server runs only what it built from the state), and the
    records keep the server's build seconds, as a local build's."""
    local_builds = []
    build = ansor.LocalBuilder.build

    def counted(self, inputs):
        local_builds.append(len(inputs))
        return build(self, inputs)

    monkeypatch.setattr(ansor.LocalBuilder, "build", counted)
    log = tmp_path / "rpc.json"
    runner = rpc.RPCRunner("cpu", "127.0.0.1", cluster["port"], n_parallel=2, timeout=20)
    with runner:
        options = ansor.TuningOptions(
            num_measure_trials=4, num_measures_per_round=4, verbose=0, runner=runner,
            measure_callbacks=[ansor.RecordToFile(log)],
        )  # fmt: skip
        policy = ansor.SketchPolicy(task, ansor.RandomModel(0), seed=1, verbose=0)
        task.tune(options, policy)
    records = [r for _, r in load_records(log)]
    assert local_builds == [] and len(records) == 4
    ok = [r for r in records if r.error_no == MeasureErrorNo.NO_ERROR]
    assert len(ok) >= 3, [r.error_msg for r in records]
    assert all(0 < r.build_s < r.all_cost and 0 < r.run_s < r.all_cost for r in ok), [
        (r.build_s, r.run_s, r.all_cost) for r in ok
    ]
    # The servers' builds are in the timing ledger: code generation and LLVM's compile.
    assert policy.ledger.seconds["compile"] > 0 and policy.ledger.seconds["wait"] == 0


def test_server_build_errors_stay_build_errors(cluster, task):
    runner = rpc.RPCRunner("solo", "127.0.0.1", cluster["port"], timeout=20)
    good = MeasureInput(task, task.compute_dag.get_init_state())
    bad = MeasureInput(task, SimpleNamespace(dag=task.compute_dag,
                                             steps_json='[["SP", 9, 0, 32, [4], 1]]'))  # fmt: skip
    with runner:
        builds, results = runner.build_and_run([bad, good])
    assert [b.error_no for b in builds] == [MeasureErrorNo.INSTANTIATION_ERROR, 0], builds
    assert [r.error_no for r in results] == [MeasureErrorNo.INSTANTIATION_ERROR, 0], results
    assert "building on the server: replaying the steps" in results[0].error_msg
    assert builds[1].source is None and builds[1].phases["compile"] > 0
    assert results[1].build_s == builds[1].time_cost > 0
    # The server's build timeout is a build timeout, not a run timeout; a tampered state
    # (a DAG that calls a function the server does not know) is refused before it builds.
    payload = runner._payload(good)
    reply = _measure(cluster["tracker"], "solo", payload, timeout=1e-4)
    assert reply["error_no"] == MeasureErrorNo.BUILD_TIMEOUT and reply["built"] is False, reply
    system = ["compute", "x", [], ["call", "system", [], "int32"], "", {"dict": []}]
    reply = _measure(
        cluster["tracker"], "solo", dict(payload, dag=dict(payload["dag"], ops=[system]))
    )
    assert reply["error_no"] == MeasureErrorNo.INSTANTIATION_ERROR and not reply["built"], reply
    assert "only the math functions" in reply["error_msg"], reply


def test_killing_a_server_mid_run_loses_at_most_its_candidate(cluster, task):
    procs, port, tracker = cluster["procs"], cluster["port"], cluster["tracker"]
    before = set(tracker.servers())
    victim = procs.start("cpu-victim", *_server_args(port, "cpu"))
    _wait_for_servers(tracker, {"cpu": 3}, [victim])
    (victim_address,) = set(tracker.servers()) - before
    inputs, built = _built(task, 6)
    runner = rpc.RPCRunner("cpu", "127.0.0.1", port, n_parallel=3, min_repeat_ms=300, timeout=20)
    killed = threading.Event()

    def kill_when_busy():  # once the victim measures a candidate (each takes >= 0.3 s)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not tracker.client.processing([victim_address]).get(
            victim_address
        ):
            time.sleep(0.02)
        time.sleep(0.1)
        procs.kill(victim)
        killed.set()

    killer = threading.Thread(target=kill_when_busy, daemon=True)
    killer.start()
    try:
        with runner:
            results = runner.run(inputs, built)
    finally:
        killer.join(35)
        procs.kill(victim)
    assert killed.is_set() and victim.returncode == -signal.SIGKILL
    errors = [r for r in results if r.error_no != MeasureErrorNo.NO_ERROR]
    assert len(results) == 6 and len(errors) <= 1, [r.error_msg for r in errors]
    assert sum(runner.server_counts.values()) >= 5  # the other two servers took the rest


def test_unknown_key_is_a_clear_error_after_the_timeout(cluster, task):
    inputs, built = _built(task)
    runner = rpc.RPCRunner("no-such-key", "127.0.0.1", cluster["port"], timeout=1)
    start = time.monotonic()
    with runner, pytest.raises(rpc.NoServerError, match=r"no RPC server with key 'no-such-key'"):
        runner.run(inputs, built)
    assert 1 <= time.monotonic() - start < 10


def _measure(tracker, key, job, **kw) -> dict:
    return tracker.reply(tracker.submit(key, "measure", job, **kw), None, 60)


def test_server_refuses_requests_not_for_its_device(cluster, task):
    inputs, built = _built(task)
    runner = rpc.RPCRunner("solo", "127.0.0.1", cluster["port"])
    payload = runner._payload(inputs[0], built[0])
    tracker = cluster["tracker"]
    cases = {
        "cuda": dict(payload, target="cuda"),
        "aarch64": dict(payload, target="llvm -mtriple=aarch64-linux-gnu"),
        "format": dict(payload, format="autosched-artifact", format_version=1),
    }
    for what, job in cases.items():
        reply = _measure(tracker, "solo", job, timeout=10)
        assert reply["error_no"] == MeasureErrorNo.COMPILE_DEVICE, (what, reply)
        assert "refuses" in reply["error_msg"], (what, reply)
    reply = _measure(tracker, "solo", payload, timeout=10)
    assert reply["error_no"] == MeasureErrorNo.NO_ERROR and reply["costs"], reply
    system = ["compute", "x", [], ["call", "system", [], "int32"], "", {"dict": []}]
    bad_dag = dict(payload, dag=dict(payload["dag"], ops=[system]))
    reply = _measure(tracker, "solo", bad_dag, timeout=10)
    assert reply["error_no"] == MeasureErrorNo.INSTANTIATION_ERROR, reply
    assert "only the math functions" in reply["error_msg"], reply
    runner.close()


def test_priorities_order_two_clients(cluster, task):
    inputs, built = _built(task)
    runner = rpc.RPCRunner("solo", "127.0.0.1", cluster["port"])
    quick = runner._payload(inputs[0], built[0])
    blocker = dict(quick, min_repeat_ms=1500.0)
    port = cluster["port"]
    with (
        rpc.connect_tracker("127.0.0.1", port) as a,
        rpc.connect_tracker("127.0.0.1", port) as low,
        rpc.connect_tracker("127.0.0.1", port) as high,
    ):
        busy = a.submit("solo", "measure", blocker, timeout=20)
        time.sleep(0.5)  # the blocker holds the one server
        finished = {}
        f_low = low.submit("solo", "measure", quick, priority=1, timeout=20)
        time.sleep(0.2)
        f_high = high.submit("solo", "measure", quick, priority=10, timeout=20)
        for name, f in (("low", f_low), ("high", f_high)):
            f.add_done_callback(lambda _, name=name: finished.setdefault(name, time.monotonic()))
        for c, f in ((a, busy), (low, f_low), (high, f_high)):
            assert c.reply(f, None, 60)["error_no"] == MeasureErrorNo.NO_ERROR
    assert finished["high"] < finished["low"]
    runner.close()


def test_remote_session_device_and_graph_module_equal_local(cluster, tmp_path):
    rng = np.random.default_rng(11)
    func, params = small_net(rng, n_blocks=1)
    data = rng.uniform(-1, 1, (1, 8, 8, 3)).astype("float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tuning records: default schedules
        lib = ansor.build(func, "llvm", params=params)
    local = ansor.GraphModule(lib)
    local.set_input("data", data)
    local.run()
    expected = local.get_output(0).numpy()
    path = tmp_path / "net.so"
    lib.export_library(path)

    remote = cluster["tracker"].request("solo", priority=1, session_timeout=60)
    dev = remote.cpu()
    assert dev.exist and dev.multi_processor_count >= 1 and dev.max_threads_per_block is None
    cl, local_cl = remote.cl(0), runtime.device("opencl", 0)  # read on the server, same machine
    assert cl.exist == local_cl.exist
    if local_cl.exist:
        assert (cl.max_threads_per_block, cl.warp_size) == (
            local_cl.max_threads_per_block,
            local_cl.warp_size,
        )
        hw = ansor.HardwareParams(
            max_shared_memory_per_block=cl.max_shared_memory_per_block,
            max_threads_per_block=cl.max_threads_per_block,
            warp_size=cl.warp_size,
        )
        assert hw.max_threads_per_block == local_cl.max_threads_per_block
    remote.upload(path)
    rlib = remote.load_module("net.so", trust=True)
    module = ansor.GraphModule(rlib["default"](dev))
    module.set_input("data", data)
    module.run()
    np.testing.assert_array_equal(module.get_output(0).numpy(), expected)
    timing = module.benchmark(dev, repeat=2, number=1)
    assert len(timing.results) == 2 and timing.mean > 0
    with pytest.raises(RuntimeError, match="plain name"):
        remote.upload(path, target="../escape.so")


# ----------------------------------------------------------------------------- TLS


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_certs(d: Path, name: str) -> dict:
    """A throwaway CA ``name`` and a certificate signed by it for 127.0.0.1."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", f"{name}-ca.key", "-out", f"{name}-ca.pem",
             "-days", "1", "-subj", f"/CN={name}-ca", cwd=d)  # fmt: skip
    _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", "/CN=127.0.0.1", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{name}-ca.pem", "-CAkey",
             f"{name}-ca.key", "-CAcreateserial", "-out", f"{name}.pem", "-days", "1",
             "-extfile", "san.ext", cwd=d)  # fmt: skip
    return {"ca": str(d / f"{name}-ca.pem"), "cert": str(d / f"{name}.pem"),
            "key": str(d / f"{name}.key")}  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(subprocess.run(["which", "openssl"], capture_output=True).returncode != 0,
                    reason="no openssl command")  # fmt: skip
def test_tls_refuses_a_client_without_the_certificate(tmp_path):
    good = _make_certs(tmp_path, "good")
    other = _make_certs(tmp_path, "other")
    tls = ("--tls-ca-file", good["ca"], "--tls-cert", good["cert"], "--tls-key", good["key"])
    procs = Processes(tmp_path)
    port = _free_port()
    try:
        tracker_proc = procs.start("tls-tracker", "autosched.exec.rpc_tracker", "--port", str(port),
                                   *tls)  # fmt: skip
        server = procs.start("tls-server", *_server_args(port, "tls", *tls))
        security = rpc.make_security(good["ca"], good["cert"], good["key"])
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                tracker = rpc.connect_tracker("127.0.0.1", port, security=security, timeout=3)
                break
            except ConnectionError:
                if tracker_proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        with tracker:
            _wait_for_servers(tracker, {"tls": 1}, [server])
            assert tracker.request("tls").cpu().exist
        for name, sec in {
            "no certificate": None,
            "certificate of another CA": rpc.make_security(
                other["ca"], other["cert"], other["key"]
            ),
        }.items():
            with pytest.raises(ConnectionError, match="cannot connect to the RPC tracker"):
                rpc.connect_tracker("127.0.0.1", port, security=sec, timeout=3).close()
                pytest.fail(f"a client with {name} was let in")
    finally:
        procs.close()
