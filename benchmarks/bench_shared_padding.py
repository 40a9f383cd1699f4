"""The SIMT sketch's padded shared rows on a GPU, side by side with the rows as tuned.

    python benchmarks/bench_shared_padding.py --log W/bert-base-S128-B1-cuda.json

``SearchParams.gpu_shared_padding`` (on by default) pads each row of a scalar GPU kernel's
``.shared`` copies to an odd number of 4-byte banks (docs/gpu.md, "float32 without tensor
cores"). A log tuned before it has no padded states, so this bench takes, for each task of the
network that stages through shared memory, the log's best state of each per-thread tile (the
size of its ``local`` accumulator), and measures it as tuned and with its ``.shared`` rows
padded, with the tuner's own builder and runner, in one process. It shows what the padding
is worth on the tiles the search found, and whether it changes which tile is best; what a tune
with it finds is for ``bench_transformer_gpu.py``.
"""

from __future__ import annotations

import math

from log_states import (  # run from benchmarks/
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
from autosched.search.sketch_rules_gpu import shared_row_align
from tensorir import steps as st
from tensorir.loops import Allocate, For, walk_stmts
from tensorir.lower import lower
from tensorir.schedule import replay


def with_padded_rows(dag, steps) -> tuple:
    """``steps`` with a ``storage_align`` after each compute_at of a ``.shared`` stage that has
    none (what the padded sketch records), padding its rows as the sketch would."""
    out: list = []
    state = replay(dag, [])
    for step in steps:
        out.append(step)
        state._apply(step)
        if isinstance(step, st.ComputeAtStep):
            stage = state.stages[step.stage_id]
            align = shared_row_align(stage.op.dtype)
            fresh = stage.name.endswith(".shared") and not stage.storage_align
            if fresh and align and len(stage.iters) >= 2:
                pad = st.StorageAlignStep(step.stage_id, len(stage.iters) - 2, *align)
                out.append(pad)
                state._apply(pad)
    return tuple(out)


def accumulators(state) -> int:
    """Elements of the kernel's ``local`` accumulators times its virtual threads: the outputs
    one thread computes."""
    body = lower(state).body
    local = sum(x.buffer.size for x in walk_stmts(body)
                if isinstance(x, Allocate) and x.buffer.scope == "local")  # fmt: skip
    vthreads = math.prod(x.extent for x in walk_stmts(body)
                         if isinstance(x, For) and x.kind == "vthread")  # fmt: skip
    return local * vthreads


def picks(task, records, per_task: int) -> list:
    """``(cost, state, accumulators)`` of the best measured state of each accumulator size,
    best first, at most ``per_task``, among those within 4x of the task's best."""
    ok = sorted(
        ((min(r.costs), i.state) for i, r in records if r.error_no == 0 and r.costs),
        key=lambda c: c[0],
    )
    if not ok:
        return []
    best, chosen = ok[0][0], {}
    for cost, state in ok:
        if cost > 4 * best:
            break
        full = state.to_state(task.compute_dag)
        if not any(s.name.endswith(".shared") for s in full.stages):
            continue
        size = accumulators(full)
        if size not in chosen:
            chosen[size] = (cost, full, size)
    return sorted(chosen.values(), key=lambda c: c[0])[:per_task]


def main() -> None:
    args = log_parser(__doc__, per_task=6).parse_args()
    tasks, _ = network_tasks(args)
    by_key = records_by_key(args.log)
    inputs, meta = [], []
    for task in tasks:
        for cost, state, size in picks(task, by_key.get(task.workload_key, []), args.per_task):
            padded = replay(task.compute_dag, with_padded_rows(task.compute_dag, state.steps))
            if padded.steps == state.steps:
                continue
            inputs += [ansor.MeasureInput(task, state), ansor.MeasureInput(task, padded)]
            meta.append((task.desc, size, cost))
    print(f"{len(meta)} states of {len(tasks)} tasks, each as tuned and padded", flush=True)
    if args.dry_run:
        for desc, acc, logged in meta:
            print(f"{desc[:58]:<58} {acc:4d} {logged * 1e6:8.2f}")
        return
    results = build_and_run(inputs, ansor.LocalRunner(number=3, repeat=3))
    rows = []
    print(f"{'task':<58} {'acc':>4} {'log us':>8} {'tuned us':>9} {'padded us':>10} {'ratio':>6}")
    for k, (desc, acc, logged) in enumerate(meta):
        a, b = results[2 * k], results[2 * k + 1]
        t, q = best_us(a), best_us(b)
        ratio = t / q if t and q else None
        rows.append({"task": desc, "accumulators": acc, "log_us": logged * 1e6, "tuned_us": t,
                     "padded_us": q, "speedup": ratio,
                     "errors": [error_text(a), error_text(b)]})  # fmt: skip
        print(f"{desc[:58]:<58} {acc:4d} {logged * 1e6:8.2f} {cell(t, 9)} {cell(q, 10)} "
              f"{cell(ratio, 6)}", flush=True)  # fmt: skip
    write_json(args.out, rows)


if __name__ == "__main__":
    main()
