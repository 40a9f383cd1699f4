"""Threads per row of the GPU's row-wise reductions (layer norm, softmax), side by side.

    cd benchmarks && python bench_row_threads.py --precision float16 \\
      --log W/bert-base-S128-B1-cuda-float16.json

A cross-thread reduction gives each row of a layer norm or softmax one block, its threads
splitting the row. Mutation used to keep that split, like every innermost split, at most
``max_innermost_split_factor`` (64); it may now go up to the block's thread limit
(``autosched/search/mutation.py``, ``_innermost_cap``). For each such task of the network this
takes the log's best state and measures it with its row split into each thread count that
divides the row, with the tuner's own builder and runner, in one process.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench_transformer_gpu import our_network  # run from benchmarks/

import autosched as ansor
from autosched.search.state_utils import is_cross_thread_split
from tensorir import steps as st
from tensorir.schedule import replay

THREADS = (32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


def row_split(state) -> int | None:
    """The index of the split whose part a cross-thread reduction's threads take."""
    ids = [k for k, step in enumerate(state.steps)
           if isinstance(step, st.SplitStep) and is_cross_thread_split(state, k)]  # fmt: skip
    return ids[0] if ids else None


def variants(task, state):
    """``(threads, state)`` for each thread count dividing the row (the state's own first)."""
    k = row_split(state)
    if k is None:
        return []
    split = state.steps[k]
    own = split.lengths[0]
    out = [(own, state)]
    for t in THREADS:
        if t == own or split.extent % t:
            continue
        steps = list(state.steps)
        steps[k] = st.SplitStep(
            split.stage_id, split.iter_id, split.extent, (t,), split.inner_to_outer
        )
        try:
            out.append((t, replay(task.compute_dag, steps)))
        except Exception as e:  # noqa: BLE001 - a count the state cannot take is skipped
            print(f"  {task.desc[:40]}: {t} threads: {e}")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log", required=True)
    p.add_argument("--network", default="bert-base")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--precision", default="float32")
    p.add_argument("--out", help="write the rows as JSON here")
    p.add_argument("--dry-run", action="store_true", help="list the states, measure nothing")
    args = p.parse_args()

    ours = our_network(args.network, args.seq_len, args.precision)
    tasks, _ = ansor.extract_tasks(ours["mod"], ours["params"], ours["target"])
    best: dict = {}
    for inp, res in ansor.load_records(args.log):
        if res.error_no == 0 and res.costs:
            key = inp.task.workload_key
            if key not in best or min(res.costs) < best[key][0]:
                best[key] = (min(res.costs), inp.state)
    inputs, meta = [], []
    for task in tasks:
        if task.workload_key not in best:
            continue
        logged, rec = best[task.workload_key]
        state = rec.to_state(task.compute_dag) if hasattr(rec, "to_state") else rec
        for threads, s in variants(task, state):
            inputs.append(ansor.MeasureInput(task, s))
            meta.append((task.desc, threads, logged))
    print(f"{len(meta)} states of {len({m[0] for m in meta})} row-reduction tasks", flush=True)
    if args.dry_run:
        for desc, threads, logged in meta:
            print(f"{desc[-40:]:<40} {threads:5d} {logged * 1e6:8.2f}")
        return
    builds = ansor.LocalBuilder().build(inputs)
    with ansor.LocalRunner(number=5, repeat=3) as runner:
        results = runner.run(inputs, builds)
    rows = []
    print(f"{'task':<40} {'threads':>7} {'log us':>8} {'us':>8}")
    for (desc, threads, logged), r in zip(meta, results):
        us = min(r.costs) * 1e6 if r.error_no == 0 else None
        rows.append(
            {
                "task": desc,
                "threads": threads,
                "log_us": logged * 1e6,
                "us": us,
                "error": r.error_msg[:200] if r.error_no else None,
            }
        )
        shown = f"{us:8.2f}" if us is not None else f"{'err':>8}"
        print(f"{desc[-40:]:<40} {threads:7d} {logged * 1e6:8.2f} {shown}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
