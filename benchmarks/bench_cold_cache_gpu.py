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

import argparse
import json
from pathlib import Path

from bench_transformer_gpu import our_network  # run from benchmarks/

import autosched as ansor


def best_states(task, records, per_task: int) -> list:
    """``(logged cost, state)`` of the task's best ``per_task`` distinct states, best first."""
    ok = sorted(
        ((min(r.costs), i.state) for i, r in records if r.error_no == 0 and r.costs),
        key=lambda c: c[0],
    )
    out, seen = [], set()
    for cost, state in ok:
        key = repr(state.steps)
        if key in seen:
            continue
        seen.add(key)
        out.append((cost, state.to_state(task.compute_dag)))
        if len(out) == per_task:
            break
    return out


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
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log", required=True)
    p.add_argument("--network", default="bert-base")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--precision", default="float32")
    p.add_argument("--per-task", type=int, default=4)
    p.add_argument("--out", help="write the rows as JSON here")
    p.add_argument("--dry-run", action="store_true", help="list the states, measure nothing")
    args = p.parse_args()

    ours = our_network(args.network, args.seq_len, args.precision)
    tasks, weights = ansor.extract_tasks(ours["mod"], ours["params"], ours["target"])
    by_key: dict = {}
    for inp, res in ansor.load_records(args.log):
        by_key.setdefault(inp.task.workload_key, []).append((inp, res))
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
    builds = ansor.LocalBuilder().build(inputs)
    with ansor.LocalRunner(number=3, repeat=3, min_repeat_ms=100) as runner:
        warm = runner.run(inputs, builds)
    with ansor.LocalRunner(repeat=10, enable_gpu_cache_flush=True) as runner:
        cold = runner.run(inputs, builds)
    rows = []
    print(f"{'task':<48} {'calls':>5} {'log us':>8} {'warm us':>8} {'cold us':>8}")
    for (desc, weight, logged), w, c in zip(meta, warm, cold, strict=True):
        wu = min(w.costs) * 1e6 if w.error_no == 0 else None
        cu = sorted(c.costs)[len(c.costs) // 2] * 1e6 if c.error_no == 0 else None
        errors = [w.error_msg[:200] if w.error_no else None,
                  c.error_msg[:200] if c.error_no else None]  # fmt: skip
        rows.append({"task": desc, "weight": weight, "log_us": logged * 1e6, "warm_us": wu,
                     "cold_us": cu, "errors": errors})  # fmt: skip
        fmt = lambda x: f"{x:8.2f}" if x is not None else f"{'err':>8}"  # noqa: E731
        print(f"{desc[-48:]:<48} {weight:5d} {logged * 1e6:8.2f} {fmt(wu)} {fmt(cu)}", flush=True)
    sums = weighted_sums(rows)
    print(json.dumps(sums))
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "sums": sums}, indent=1))


if __name__ == "__main__":
    main()
