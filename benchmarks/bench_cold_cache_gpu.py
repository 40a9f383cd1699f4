"""Tuned GPU kernels timed warm (as the tuner times them) and cold (L2 flushed), side by side.

    cd benchmarks && python bench_cold_cache_gpu.py --precision float16 \\
      --log W/bert-base-S128-B1-cuda-float16.json

The runner times a candidate by running it over and over on the same inputs, so a dense's
weights sit in the GPU's L2 (50 MB on an H100) from the second run on. Inside the network
each kernel reads its weights from device memory: bert-base float16 streams 170 MB of them
per inference. Session 16 saw the tuner's estimate fall while the network got slower
(benchmarks/RESULTS.md). For each task this takes the log's ``--per-task`` best states and
times each warm (``LocalRunner``'s defaults) and cold (``enable_gpu_cache_flush``: one run
per repeat after writing twice the L2), and prints whether the warm ranking picks the state
that is best cold, and the weighted sum both ways: what the network would gain if the search
ranked candidates cold.
"""

from __future__ import annotations

import json

from log_states import (  # run from benchmarks/
    best_states,
    best_us,
    build_and_run,
    cell,
    error_text,
    log_parser,
    network_tasks,
    records_by_key,
    write_json,
)

import autosched as ansor


def weighted_sums(rows) -> dict:
    """Per task, the cold time of the state the warm ranking picks and of the best cold one,
    each times the task's weight, summed (microseconds)."""
    by_task: dict = {}
    for r in rows:
        if r["warm_us"] is not None and r["cold_us"] is not None:
            by_task.setdefault(r["task"], []).append(r)
    warm_pick = cold_pick = 0.0
    for states in by_task.values():
        weight = states[0]["weight"]
        warm_pick += weight * min(states, key=lambda r: r["warm_us"])["cold_us"]
        cold_pick += weight * min(r["cold_us"] for r in states)
    return {"tasks": len(by_task), "warm_pick_cold_us": warm_pick, "cold_pick_cold_us": cold_pick}


def main() -> None:
    args = log_parser(__doc__, per_task=4).parse_args()
    tasks, weights = network_tasks(args)
    by_key = records_by_key(args.log)
    inputs, meta = [], []
    for task, weight in zip(tasks, weights, strict=True):
        for cost, state in best_states(task, by_key.get(task.workload_key, []), args.per_task):
            inputs.append(ansor.MeasureInput(task, state))
            meta.append((task.desc, weight, cost))
    print(f"{len(meta)} states of {len({m[0] for m in meta})} tasks", flush=True)
    if args.dry_run:
        for desc, weight, logged in meta:
            print(f"{desc[-48:]:<48} x{weight:<3d} {logged * 1e6:8.2f}")
        return
    warm = build_and_run(inputs, ansor.LocalRunner(number=3, repeat=3, min_repeat_ms=100))
    cold = build_and_run(inputs, ansor.LocalRunner(repeat=10, enable_gpu_cache_flush=True))
    rows = []
    print(f"{'task':<48} {'calls':>5} {'log us':>8} {'warm us':>8} {'cold us':>8}")
    for (desc, weight, logged), w, c in zip(meta, warm, cold, strict=True):
        wu = best_us(w)
        cu = sorted(c.costs)[len(c.costs) // 2] * 1e6 if c.error_no == 0 else None  # median
        rows.append({"task": desc, "weight": weight, "log_us": logged * 1e6, "warm_us": wu,
                     "cold_us": cu, "errors": [error_text(w), error_text(c)]})  # fmt: skip
        print(f"{desc[-48:]:<48} {weight:5d} {logged * 1e6:8.2f} {cell(wu, 8)} {cell(cu, 8)}",
              flush=True)  # fmt: skip
    sums = weighted_sums(rows)
    print(json.dumps(sums))
    write_json(args.out, {"rows": rows, "sums": sums})


if __name__ == "__main__":
    main()
