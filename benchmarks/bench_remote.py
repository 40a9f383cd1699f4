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

    def start(self, n_servers: int):
        self._start("tracker", ["autosched.exec.rpc_tracker", "--port", str(self.port)])
        pin = len(self.cores) >= n_servers
        for i in range(n_servers):
            args = ["autosched.exec.rpc_server", "--tracker", f"127.0.0.1:{self.port}"]
            self._start(f"server{i}", [*args, "--key", "bench"], self.cores[i] if pin else None)
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", default="1,2,4", help="server counts to try")
    parser.add_argument("--candidates", type=int, default=24)
    parser.add_argument("--size", type=int, default=128, help="matmul size")
    parser.add_argument("--min-repeat-ms", type=float, default=100.0)
    parser.add_argument(
        "--threads", type=int, default=1, help="threads of parallel loops (servers and local)"
    )
    args = parser.parse_args(argv)
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
