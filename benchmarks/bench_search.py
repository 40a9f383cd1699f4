"""Search speed: trials per minute and where tuning time goes (issue 29).

    python benchmarks/bench_search.py                          # one CPU task + resnet-18, CPU
    python benchmarks/bench_search.py --cases network --seconds 600 --target cuda   # the GPU
    python benchmarks/bench_search.py --cases task --task-seconds 60 --json out.json
    python benchmarks/bench_search.py --cases states      # per-state CPU ms: sample, features

Two cases, library defaults with only a time budget set (nothing resumed: a fresh log in
``--work-dir`` each run):

* ``task``: one resnet-18 task (the 3x3 conv2d at 56x56x64, ``--task``) tuned alone with
  ``SearchTask.tune`` and the LightGBM model for ``--task-seconds``;
* ``network``: every task of resnet-18 (batch 1, NHWC) under the ``TaskScheduler`` for
  ``--seconds``, on ``--target`` (``llvm`` or ``cuda``).

For each: the trials measured, trials per minute, the best result (GFLOP/s of the task, the
estimated network latency), the one-line time breakdown of the run's
:class:`~autosched.measure.timing.TimeLedger` (sample, evolve, features, predict, train, lower,
codegen, compile, wait, run, records, other) and the share of the wall time outside building
and running candidates. ``--json`` writes them. On a shared machine read the proportions,
not the absolute seconds.

The next round's search overlaps this round's measurement by default (``full`` on a GPU,
``build`` on the CPU, docs/networks.md); ``AUTOSCHED_OVERLAP=off`` gives the sequential
baseline, e.g. on the H100 (one after the other, same machine)::

    AUTOSCHED_OVERLAP=off python benchmarks/bench_search.py --cases network --target cuda
    python benchmarks/bench_search.py --cases network --target cuda   # (add --seconds 600)

On a machine without a GPU, ``--device-s 0.4`` replaces the runner with a simulated device
(each candidate sleeps 0.4 s, about a candidate's run on the H100, and gets a made-up cost), so
the overlap is seen without the host's cores timing the kernels.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from pathlib import Path

import autosched as ansor
from autosched.measure.timing import MEASURE_PHASES
from tensorir.graph import get_network


def _summary(case: str, target: str, ledger, wall: float, trials: int, best: str) -> dict:
    line = ledger.line(wall=wall, trials=trials)
    print(f"[{case} / {target}] {best}\n  {line}", flush=True)
    outside = 1.0 - sum(ledger.seconds[k] for k in MEASURE_PHASES) / wall
    return {
        "case": case, "target": target, "wall_s": round(wall, 1), "trials": trials,
        "trials_per_min": round(60.0 * trials / wall, 1), "best": best,
        "seconds": {k: round(v, 2) for k, v in ledger.seconds.items()},
        "overlap_s": round(ledger.overlap, 2),  # measurement hidden behind the search
        "outside_build_run": round(outside, 3), "line": line,
        "rounds": [{k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
                   for row in ledger.rounds],
    }  # fmt: skip


class SimulatedDevice:
    """A runner that times nothing (``--device-s``): each built candidate keeps a "device"
    busy for ``seconds`` (a sleep: the host's cores stay free, as with a GPU) and gets a
    made-up cost from a hash of its steps. It isolates the overlap of search and measurement
    from the host's load on a CPU-only machine; its costs are not kernel timings."""

    measures_remotely = True  # like a device: searching beside it cannot disturb it

    def __init__(self, seconds: float):
        self.seconds = float(seconds)

    def run(self, inputs, build_results):
        from autosched.measure.data import (
            MeasureErrorNo,
            MeasureResult,
            failed_result,
            steps_json_of,
        )

        out = []
        for inp, built in zip(inputs, build_results, strict=True):
            if built.error_no != MeasureErrorNo.NO_ERROR:
                out.append(failed_result(built.error_no, built.error_msg, built.time_cost))
                continue
            time.sleep(self.seconds)
            text = json.dumps(steps_json_of(inp.state)).encode()
            cost = 1e-3 * (1.0 + int(hashlib.sha256(text).hexdigest()[:6], 16) / 16**6)
            all_cost = built.time_cost + self.seconds
            out.append(MeasureResult((cost,), 0, "", all_cost, time.time()))
        return out

    def close(self) -> None:
        pass


def _runner(args):
    return SimulatedDevice(args.device_s) if args.device_s else "local"


def _network_tasks(target: str):
    mod, params, _, _ = get_network("resnet-18", batch_size=1, layout="NHWC")
    return ansor.extract_tasks(mod, params, target)


def bench_task(args, work: Path) -> dict:
    """One task alone (SearchTask.tune, LightGBM model) for ``args.task_seconds``."""
    tasks, _ = _network_tasks(args.target)
    task = tasks[args.task]
    log = work / "task.json"
    options = ansor.TuningOptions(
        max_tuning_seconds=args.task_seconds, verbose=args.verbose, runner=_runner(args),
        measure_callbacks=[ansor.RecordToFile(str(log))],
    )  # fmt: skip
    policy = ansor.SketchPolicy(task, ansor.LGBModel(), seed=0, verbose=args.verbose)
    t0 = time.perf_counter()
    task.tune(options, policy)
    wall = time.perf_counter() - t0
    flop = task.compute_dag.flop_count()
    best = f"{task.desc}: best {flop / policy.best_cost / 1e9:.2f} GFLOP/s"
    return _summary("task", args.target, policy.ledger, wall, policy.num_trials, best)


def bench_network(args, work: Path) -> dict:
    """resnet-18's tasks under the task scheduler for ``args.seconds``."""
    tasks, weights = _network_tasks(args.target)
    log = work / "network.json"
    options = ansor.TuningOptions(
        max_tuning_seconds=args.seconds, verbose=args.verbose, runner=_runner(args),
        num_measure_trials=args.trials or 0,
        measure_callbacks=[ansor.RecordToFile(str(log))],
    )  # fmt: skip
    tuner = ansor.TaskScheduler(tasks, weights)
    t0 = time.perf_counter()
    tuner.tune(options)
    wall = time.perf_counter() - t0
    ms, covered = tuner.partial_latency_ms()
    est = "-" if ms is None else f"{ms:.3f} ms"
    best = (f"resnet-18: {len(tasks)} tasks, {covered} measured, estimated latency {est} "
            f"(overlap {tuner.overlap}, search ahead {tuner.speculation})")  # fmt: skip
    return _summary("network", args.target, tuner.ledger, wall, tuner.ct, best)


def bench_states(args, work: Path) -> dict:
    """CPU milliseconds per state (this process's time, so a busy machine skews it less than
    wall time) of the two costs the tuning process pays per candidate it considers: sampling
    a state from the sketches (bound inference included) and lowering it for its features.
    Fixed seeds and tasks: run it on two checkouts to compare them."""
    from autosched.cost_model.features import state_features

    del work
    tasks, _ = _network_tasks(args.target)
    tasks = sorted(tasks, key=lambda t: t.workload_key)[: args.state_tasks]
    sample_s = feature_s = 0.0
    sampled = featured = 0
    for task in tasks:
        policy = ansor.SketchPolicy(task, seed=0, verbose=0)
        _ = policy.sketches  # generated once per task: not a per-state cost
        t0 = time.process_time()
        states = policy.sample_initial_population()
        sample_s += time.process_time() - t0
        sampled += len(states)
        states = states[:40]
        t0 = time.process_time()
        for state in states:
            state_features(task, state)
        feature_s += time.process_time() - t0
        featured += len(states)
    out = {
        "case": "states", "target": args.target, "tasks": len(tasks),
        "sample_ms": round(1e3 * sample_s / sampled, 3), "sampled": sampled,
        "features_ms": round(1e3 * feature_s / featured, 3), "featured": featured,
    }  # fmt: skip
    print(f"[states / {args.target}] {len(tasks)} resnet-18 tasks: sampling "
          f"{out['sample_ms']:.2f} ms a state ({sampled}), lowering and features "
          f"{out['features_ms']:.2f} ms a state ({featured}), CPU time", flush=True)  # fmt: skip
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--cases",
        default="task,network",
        help="task, network, states (per-state costs), comma-separated",
    )
    parser.add_argument("--target", default="llvm", help="llvm (default) or cuda")
    parser.add_argument("--seconds", type=float, default=120.0, help="network budget (s)")
    parser.add_argument("--task-seconds", type=float, default=60.0, help="task budget (s)")
    parser.add_argument("--task", type=int, default=2, help="index of the resnet-18 task")
    parser.add_argument("--work-dir", default=None, help="logs (default: a temporary folder)")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--verbose", type=int, default=0)
    parser.add_argument("--state-tasks", type=int, default=10, help="states: tasks sampled")
    parser.add_argument(
        "--trials", type=int, default=None,
        help="network: also stop after this many trials (compare wall times at equal trials)",
    )  # fmt: skip
    parser.add_argument(
        "--device-s", type=float, default=0.0,
        help="simulate a device: each candidate runs for this many seconds of sleep, with a "
        "made-up cost (the overlap of search and measurement without host load)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - {"task", "network", "states"})
    if unknown:
        parser.error(f"--cases: unknown {unknown}; use task, network, states (comma-separated)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in ("task.json", "network.json"):  # fresh logs: nothing is resumed
            (work / name).unlink(missing_ok=True)
        runs = {"task": bench_task, "network": bench_network, "states": bench_states}
        results = [runs[c](args, work) for c in cases]
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
