"""Per-call Python after a tune in the same process: before, after, and after ``gc.freeze()``.

    python benchmarks/bench_heap_after_tune.py --seconds 60

A tune leaves many objects alive (records, states, caches), and Python's cyclic collector walks
them on every full collection, so Python-heavy code run later in the same process slows down
(torch.compile's reduce-overhead call read 1.161 ms after our tune against 0.622 ms before it on
the H100, benchmarks/RESULTS.md). This times a stand-in for such code (a loop that builds small
dicts) before a CPU tune of resnet-18, after it, after ``gc.collect()`` and after ``gc.freeze()``,
in one process, and prints the tracked-object counts beside the times.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time

import autosched as ansor
from tensorir.graph import get_network


def python_heavy_ms(rounds: int = 200, size: int = 2000) -> float:
    """Wall milliseconds of a loop that builds ``rounds`` lists of ``size`` small dicts."""
    t = time.perf_counter()
    for _ in range(rounds):
        objs = [{"a": i, "b": (i, i + 1)} for i in range(size)]
    del objs
    return (time.perf_counter() - t) * 1e3


def report(label: str) -> float:
    ms = min(python_heavy_ms() for _ in range(5))
    print(f"{label:18} {ms:8.1f} ms   tracked objects {len(gc.get_objects()):8d}", flush=True)
    return ms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60, help="tuning budget (CPU, resnet-18)")
    args = p.parse_args()
    before = report("before the tune")
    mod, params, _, _ = get_network("resnet-18", batch_size=1, layout="NHWC")
    tasks, weights = ansor.extract_tasks(mod, params, "llvm")
    log = os.path.join(tempfile.mkdtemp(), "resnet-18.json")
    tuner = ansor.TaskScheduler(tasks, weights)
    options = ansor.TuningOptions(
        max_tuning_seconds=args.seconds, measure_callbacks=[ansor.RecordToFile(log)], verbose=0
    )
    tuner.tune(options)
    after = report("after the tune")
    gc.collect()
    report("after gc.collect")
    gc.freeze()
    frozen = report("after gc.freeze")
    print(f"after / before {after / before:.2f}; frozen / before {frozen / before:.2f}")


if __name__ == "__main__":
    main()
