"""GPU sketch sampling: seconds, tile draws and rejections per resnet-18 task on target cuda.

    python benchmarks/bench_gpu_sampling.py --tasks 0,3,22 --workers 0

Runs without a GPU (the cuda hardware parameters default to an H100's). For each task,
``SketchPolicy(task, seed=0).sample_initial_population()`` (population 512) is timed (wall and
this process's CPU seconds: with ``--workers 0`` all the work is in this process), and calls of
``init_fill_tile_size_gpu`` (tile draws) and ``gpu_state_errors`` (lowered and verified
samples, and those the verifier rejected) are counted (issue 29).
"""

from __future__ import annotations

import argparse
import collections
import os
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="all", help="indices of resnet-18's tasks, or all")
    parser.add_argument(
        "--workers", type=int, default=None,
        help="sampling worker processes (AUTOSCHED_FEATURE_WORKERS; 0: in process)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.workers is not None:
        os.environ["AUTOSCHED_FEATURE_WORKERS"] = str(args.workers)
    import autosched as ansor
    from autosched.search import annotate_gpu as ag
    from autosched.search.policy import SketchPolicy
    from tensorir.graph import get_network

    mod, params, _, _ = get_network("resnet-18", batch_size=1, layout="NHWC")
    tasks, _ = ansor.extract_tasks(mod, params, "cuda")
    count = collections.Counter()
    fill, errors = ag.init_fill_tile_size_gpu, ag.gpu_state_errors

    def counted_fill(*a, **k):
        count["draws"] += 1
        return fill(*a, **k)

    def counted_errors(task, state):
        count["lowered"] += 1
        found = errors(task, state)
        count["rejected"] += bool(found)
        return found

    ag.init_fill_tile_size_gpu, ag.gpu_state_errors = counted_fill, counted_errors
    which = range(len(tasks)) if args.tasks == "all" else [int(x) for x in args.tasks.split(",")]
    wall = cpu = 0.0
    for i in which:
        before = dict(count)
        policy = SketchPolicy(tasks[i], seed=0, verbose=0)
        policy.sketches  # noqa: B018 - generated outside the timing
        t0, c0 = time.perf_counter(), time.process_time()
        states = policy.sample_initial_population()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        wall, cpu = wall + dt, cpu + dc
        d = {k: count[k] - before.get(k, 0) for k in ("draws", "lowered", "rejected")}
        print(f"{i:2d} {tasks[i].desc[:42]:42s} states {len(states):4d}  {dt:6.2f} s wall "
              f"{dc:6.2f} s cpu  tile draws {d['draws']:5d}  lowered {d['lowered']:5d}  "
              f"rejected after lowering {d['rejected']:5d}", flush=True)  # fmt: skip
    print(f"total {wall:.1f} s wall, {cpu:.1f} s cpu of this process")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
