"""Networks under load: ours vs onnxruntime with 0, 1 and 2 busy processes beside (issue 17).

    python benchmarks/bench_contention.py --no-tune --work-dir bench-network-cpu   # a user's logs
    python benchmarks/bench_contention.py --trials 200 --work-dir W --out contention.json

A busy process is ``python -c "while True: pass"`` (as another single-threaded job on a laptop, a
shared notebook server or a CI box). For each network (NHWC batch 1, tuned as in
benchmarks/bench_network_cpu.py, whose helpers this uses), every round times ours and then
onnxruntime's run of the same network under each load, one load after the other, so that
machine drift hits all of them alike; the figures are the medians over rounds. Printed per load:
both medians, ORT/ours (our speed relative to onnxruntime's: 1.0 is equal, 0.5 half as fast)
and our slowdown against the quiet machine.

Timings mean nothing under ``nice``: run it at normal priority on an otherwise quiet machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_network_cpu import (
    add_tuning_arguments,
    compile_ours,
    ort_session,
    ours_ms,
    tune_network,
)
from wall_timing import median_s

import runtime.cpu

BUSY = "while True: pass"
LOADS = (0, 1, 2)


def start_busy(n: int) -> list[subprocess.Popen]:
    """``n`` single-threaded busy-loop processes, given a moment to start spinning."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(n)]
    if procs:
        time.sleep(0.3)
    return procs


def stop_busy(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def bench_network(name: str, args) -> dict:
    tuned = tune_network(name, args)
    ours = compile_ours(name, tuned["log"])
    theirs = ort_session(name, ours["x"], ours["ref"])
    times: dict[str, dict[int, list[float]]] = {"ours": {}, "ort": {}}
    for r in range(args.rounds):
        for load in LOADS:
            busy = start_busy(load)
            try:
                times["ours"].setdefault(load, []).append(ours_ms(ours["module"]))
                time.sleep(0.2)  # the other side's spinning threads go to sleep
                times["ort"].setdefault(load, []).append(median_s(theirs["run"], 0.3) * 1e3)
            finally:
                stop_busy(busy)
            time.sleep(0.2)
        print(f"[{name}] round {r + 1}/{args.rounds}: "
              + "  ".join(f"{n} busy: ours {times['ours'][n][-1]:.2f} ms, "
                          f"ORT {times['ort'][n][-1]:.2f} ms" for n in LOADS),
              flush=True)  # fmt: skip
    row = {
        "network": name,
        "tasks": len(tuned["tasks"]),
        "records_in_log": tuned["records_in_log"],
        "trials_this_run": 0 if args.no_tune else args.trials,
        "max_abs_err": ours["max_abs_err"],
        "ort_err": theirs["ort_err"],
        "ort_version": theirs["ort_version"],
        "threads": runtime.cpu.get_num_threads(),
        "launcher": runtime.cpu.parallel_launcher(),
        "loads": {},
    }
    quiet = float(np.median(times["ours"][0]))
    for load in LOADS:
        o, t = times["ours"][load], times["ort"][load]
        row["loads"][str(load)] = {
            "ours_ms": float(np.median(o)),
            "ort_ms": float(np.median(t)),
            "ort_over_ours": float(np.median(t) / np.median(o)),
            "ort_over_ours_per_round": [b / a for a, b in zip(o, t, strict=True)],
            "ours_over_quiet": float(np.median(o) / quiet),
            "ours_rounds_ms": o,
            "ort_rounds_ms": t,
        }
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--networks", default="resnet-18,mobilenet")
    add_tuning_arguments(p)
    p.add_argument("--rounds", type=int, default=5, help="rounds over the three loads")
    p.add_argument("--out", default="bench-contention.json", help="the figures as JSON")
    args = p.parse_args()
    rows = [bench_network(n, args) for n in args.networks.split(",")]
    print()
    print(f"{'network':<12} {'busy':>4} {'ours ms':>9} {'ORT ms':>9} {'ORT/ours':>9} "
          f"{'ours/quiet':>10}")  # fmt: skip
    for r in rows:
        for load, v in r["loads"].items():
            print(f"{r['network']:<12} {load:>4} {v['ours_ms']:9.2f} {v['ort_ms']:9.2f} "
                  f"{v['ort_over_ours']:9.2f} {v['ours_over_quiet']:10.2f}")  # fmt: skip
    Path(args.out).write_text(json.dumps(rows, indent=1))
    print(f"figures written to {args.out}")


if __name__ == "__main__":
    main()
