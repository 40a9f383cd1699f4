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

from log_states import (  # run from benchmarks/
    best_states,
    best_us,
    build_and_run,
    error_text,
    log_parser,
    network_tasks,
    records_by_key,
    write_json,
)

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
    args = log_parser(__doc__).parse_args()
    tasks, _ = network_tasks(args)
    by_key = records_by_key(args.log)
    inputs, meta = [], []
    for task in tasks:
        for logged, state in best_states(task, by_key.get(task.workload_key, []), 1):
            for threads, s in variants(task, state):
                inputs.append(ansor.MeasureInput(task, s))
                meta.append((task.desc, threads, logged))
    print(f"{len(meta)} states of {len({m[0] for m in meta})} row-reduction tasks", flush=True)
    if args.dry_run:
        for desc, threads, logged in meta:
            print(f"{desc[-40:]:<40} {threads:5d} {logged * 1e6:8.2f}")
        return
    results = build_and_run(inputs, ansor.LocalRunner(number=5, repeat=3))
    rows = []
    print(f"{'task':<40} {'threads':>7} {'log us':>8} {'us':>8}")
    for (desc, threads, logged), r in zip(meta, results, strict=True):
        us = best_us(r)
        rows.append({"task": desc, "threads": threads, "log_us": logged * 1e6, "us": us,
                     "error": error_text(r)})  # fmt: skip
        shown = f"{us:8.2f}" if us is not None else f"{'err':>8}"
        print(f"{desc[-40:]:<40} {threads:7d} {logged * 1e6:8.2f} {shown}", flush=True)
    write_json(args.out, rows)


if __name__ == "__main__":
    main()
