"""Remote measurement throughput: RPCRunner with 1, 2, 4 CPU servers on this machine vs LocalRunner.

    python benchmarks/bench_remote.py                          # 1, 2, 4 servers, 24 candidates
    python benchmarks/bench_remote.py --servers 1,2 --candidates 12 --min-repeat-ms 50

One operator (a matmul), a fixed set of candidates sampled by the sketch policy and built once
on this machine; each runner measures the same set. Reported:

- measured trials per minute of each runner (``min_repeat_ms`` makes it measurement-bound;
  the target is 2 servers >= 1.7x one server);
- the remote overhead per candidate: RPC with one server minus LocalRunner, both with
  ``number=1, repeat=1, min_repeat_ms=0``. It includes the server's own build of each
  candidate (servers build from the state, never run code they receive: docs/remote.md):
  about 180 ms for this matmul on a loaded 2-core machine, where loading a sent object file
  took about 25 ms.

``--tune TARGETS`` (``llvm``, ``opencl`` or both, comma-separated) instead tunes one small
matmul through ``RPCRunner`` with one server of the target's device on this machine (a
cold PoCL kernel cache) and breaks each trial's measurement down: the timing ledger's build
phases and run, and the records' ``build_s`` / ``run_s`` of each candidate:

    python benchmarks/bench_remote.py --tune llvm,opencl --trials 24

Servers are started with ``python -m autosched.exec.rpc_server`` against a tracker started
with ``python -m autosched.exec.rpc_tracker``, each pinned to its own core when there are
enough cores (``taskset``), and stopped at the end. Parallel loops run ``--threads`` threads
(default 1) in every runner.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import autosched as ansor
from autosched import rpc, workloads
from autosched.measure import MeasureErrorNo
from autosched.measure.data import MeasureInput

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A tracker and ``n`` servers of key ``bench`` on 127.0.0.1, all stopped on exit."""

    def __init__(self, logdir: Path):
        self.logdir, self.procs, self.port = logdir, [], _free_port()
        self.cores = sorted(os.sched_getaffinity(0))

    def _start(self, name, args, core=None):
        cmd = [sys.executable, "-m", *args]
        if core is not None and shutil.which("taskset"):
            cmd = ["taskset", "-c", str(core), *cmd]
        log = open(self.logdir / f"{name}.log", "w")  # noqa: SIM115 - closed in close()
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
        proc.log = log
        self.procs.append(proc)
        return proc

    def start(self, n_servers: int, device: str = "cpu", pin: bool = True):
        self._start("tracker", ["autosched.exec.rpc_tracker", "--port", str(self.port)])
        pin = pin and len(self.cores) >= n_servers
        for i in range(n_servers):
            args = ["autosched.exec.rpc_server", "--tracker", f"127.0.0.1:{self.port}"]
            args += ["--key", "bench", "--device", device]
            self._start(f"server{i}", args, self.cores[i] if pin else None)
        deadline = time.monotonic() + 120
        while True:
            with (
                contextlib.suppress(ConnectionError),
                rpc.connect_tracker("127.0.0.1", self.port, timeout=2) as tracker,
            ):
                have = sum("bench" in keys for keys in tracker.servers().values())
                if have >= n_servers:
                    return pin
            if time.monotonic() > deadline:
                raise RuntimeError(f"servers did not register; see the logs in {self.logdir}")
            time.sleep(0.5)

    def close(self):
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.log.close()
        self.procs = []


def candidates(size: int, count: int):
    task = ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(size, size, size)), target="llvm")
    policy = ansor.SketchPolicy(task, ansor.RandomModel(0), seed=0, verbose=0)
    states = policy.sample_initial_population()[:count]
    inputs = [MeasureInput(task, s) for s in states]
    with ansor.LocalBuilder() as builder:
        built = builder.build(inputs)
    ok = [(i, b) for i, b in zip(inputs, built) if b.error_no == MeasureErrorNo.NO_ERROR]
    return [i for i, _ in ok], [b for _, b in ok]


def time_runner(runner, inputs, built) -> tuple[float, int]:
    runner.run(inputs[:1], built[:1])  # warm-up: worker start, references, connections
    start = time.perf_counter()
    results = runner.run(inputs, built)
    secs = time.perf_counter() - start
    return secs, sum(r.error_no == MeasureErrorNo.NO_ERROR for r in results)


def tune_breakdown(target: str, trials: int, size: int) -> dict:
    """Tune a ``size``^3 matmul for ``trials`` trials through one server of ``target``'s
    device; the per-trial seconds of the measurement and where they go."""
    import math

    dag = ansor.ComputeDAG(workloads.matmul(size, size, size))
    task = ansor.SearchTask(dag, target=target)
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="bench-remote-")))
    # A cold PoCL kernel cache, as for the new kernels of a real tune (a second run of the
    # same seed would otherwise find every candidate compiled).
    os.environ["POCL_CACHE_DIR"] = str(cluster.logdir / "pocl-cache")
    try:
        cluster.start(1, "opencl" if target.startswith("opencl") else "cpu", pin=False)
        runner = rpc.RPCRunner("bench", "127.0.0.1", cluster.port, number=1, repeat=1,
                               min_repeat_ms=0, timeout=60)  # fmt: skip
        log = Path(cluster.logdir) / "tune.json"
        options = ansor.TuningOptions(
            num_measure_trials=trials, num_measures_per_round=8, verbose=0, runner=runner,
            measure_callbacks=[ansor.RecordToFile(str(log))],
        )  # fmt: skip
        policy = ansor.SketchPolicy(task, ansor.RandomModel(0), seed=0, verbose=0)
        with runner:
            task.tune(options, policy)
    finally:
        cluster.close()
    from autosched.measure.records import load_records
    from autosched.measure.timing import BUILD_PHASES

    results = [r for _, r in load_records(log)]
    n = len(results)
    sec = policy.ledger.seconds
    build = sum(sec[k] for k in BUILD_PHASES)
    row = {
        "target": target, "trials": n,
        "ok": sum(r.error_no == MeasureErrorNo.NO_ERROR for r in results),
        "measure_s_per_trial": (build + sec["run"]) / n,
        # The ledger's lower + codegen + compile + wait: the builder pool's wall time when
        # candidates are built here, the servers' builds when only they build.
        "build_phases_s_per_trial": build / n,
        "run_s_per_trial": sec["run"] / n,
        # The records' split of each candidate: build_s is the builder's (here) or the
        # server's build, run_s the rest of the request (transfer, server build when it was
        # built here too, load, check, timing).
        "record_build_s": sum(r.build_s for r in results if not math.isnan(r.build_s)) / n,
        "record_run_s": sum(r.run_s for r in results if not math.isnan(r.run_s)) / n,
        "line": policy.ledger.line(),
    }  # fmt: skip
    # What the server reported (a build of autosched that reports it): its build, its run
    # (load, check, timing) and the rest of each request (transfer, queueing).
    got = getattr(runner, "server_seconds", {})
    if got:
        row["server_s_per_trial"] = {
            "build": got["build"] / n, "run": got["run"] / n,
            "transfer": (got["request"] - got["build"] - got["run"]) / n,
        }  # fmt: skip
    print(f"[{target}] {n} trials ({row['ok']} ok): measuring {row['measure_s_per_trial']:.3f} "
          f"s/trial = build phases {row['build_phases_s_per_trial']:.3f} + run "
          f"{row['run_s_per_trial']:.3f}; per record: build_s {row['record_build_s']:.3f}, "
          f"run_s {row['record_run_s']:.3f}\n  {row['line']}", flush=True)  # fmt: skip
    if "server_s_per_trial" in row:
        print("  server, s/trial: " + ", ".join(
            f"{k} {v:.3f}" for k, v in row["server_s_per_trial"].items()), flush=True)  # fmt: skip
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", default="1,2,4", help="server counts to try")
    parser.add_argument("--candidates", type=int, default=24)
    parser.add_argument("--size", type=int, default=128, help="matmul size")
    parser.add_argument("--min-repeat-ms", type=float, default=100.0)
    parser.add_argument(
        "--threads", type=int, default=1, help="threads of parallel loops (servers and local)"
    )
    parser.add_argument("--tune", default="", help="targets to tune through one server "
                        "(llvm, opencl), with the per-trial breakdown")  # fmt: skip
    parser.add_argument("--trials", type=int, default=24, help="--tune: trials per target")
    args = parser.parse_args(argv)
    if args.tune:
        for target in args.tune.split(","):
            tune_breakdown(target, args.trials, 64)
        return 0
    # The same for every runner: LocalRunner's worker and the servers inherit it.
    os.environ["AUTOSCHED_NUM_THREADS"] = str(args.threads)
    inputs, built = candidates(args.size, args.candidates)
    n = len(inputs)
    print(f"matmul {args.size}^3, {n} built candidates, min_repeat_ms={args.min_repeat_ms:g}")
    kw = dict(number=1, repeat=1, min_repeat_ms=args.min_repeat_ms, timeout=30)
    rows = []
    with ansor.LocalRunner(**kw) as local:
        secs, ok = time_runner(local, inputs, built)
    rows.append(("LocalRunner", secs, ok))
    with ansor.LocalRunner(number=1, repeat=1, min_repeat_ms=0, timeout=30) as local:
        local_fast, _ = time_runner(local, inputs, built)
    remote_fast = None
    for count in [int(c) for c in args.servers.split(",")]:
        cluster = Cluster(Path(tempfile.mkdtemp(prefix="bench-remote-")))
        try:
            pinned = cluster.start(count)
            runner = rpc.RPCRunner("bench", "127.0.0.1", cluster.port, n_parallel=count, **kw)
            with runner:
                secs, ok = time_runner(runner, inputs, built)
            rows.append((f"RPCRunner, {count} server(s){' pinned' if pinned else ''}", secs, ok))
            if count == 1:
                fast = rpc.RPCRunner("bench", "127.0.0.1", cluster.port, number=1, repeat=1,
                                     min_repeat_ms=0, timeout=30)  # fmt: skip
                with fast:
                    remote_fast, _ = time_runner(fast, inputs, built)
        finally:
            cluster.close()
    print(f"{'runner':<34} {'seconds':>8} {'ok':>4} {'trials/min':>11} {'vs 1 server':>12}")
    one = next((s for name, s, _ in rows if name.startswith("RPCRunner, 1 ")), None)
    for name, secs, ok in rows:
        speedup = f"{one / secs:.2f}x" if one and name.startswith("RPCRunner") else ""
        print(f"{name:<34} {secs:8.2f} {ok:4d} {n / secs * 60:11.1f} {speedup:>12}")
    if remote_fast is not None:
        overhead = (remote_fast - local_fast) / n * 1e3
        print(
            f"remote overhead per candidate (min_repeat_ms=0): {overhead:.1f} ms "
            f"(RPC {remote_fast / n * 1e3:.1f} ms, local {local_fast / n * 1e3:.1f} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
