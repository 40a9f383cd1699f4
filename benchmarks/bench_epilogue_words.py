"""Fragment epilogues one element a lane against 16 bytes a lane, on a tuned log's best states,
side by side in one process: wmma kernels (codegen.wide_epilogue's ``WIDE_EPILOGUE``) or, with
``--sketch warpgroup``, wgmma kernels (codegen.cuda_warpgroup's ``WARPGROUP_WORDS``).

    cd benchmarks && python bench_epilogue_words.py --network resnet-50 --batch 16 \\
      --precision float16 --log W/resnet-50-NHWC-B16-cuda-float16.json [--sketch warpgroup]

For each task of the network with a logged state of that sketch (its best one, which need not
be the task's best overall), builds the kernel both ways (words off, then on), checks that
both give the same output on random inputs, and times each with the module's
``time_evaluator``. Prints each task, its weight, both times and the weighted sums; the last
line is JSON with the sums.

``--retimed-log PATH`` also writes the log with, for each task whose words time beats its best
logged cost, that state's record again at the words time: the network ``ApplyHistoryBest``
builds from it picks the re-timed states (how session 26 timed resnet-50 B16 before a fresh
tune; ``bench_gpu.py --no-tune`` on a work dir holding it).
"""

from __future__ import annotations

import json
import time

import numpy as np
from log_sketches import sketch_kind
from log_states import (  # run from benchmarks/
    cnn_log_parser,
    cnn_network,
    ranked,
    records_by_key,
    write_json,
)

import autosched as ansor
from codegen import cuda_warpgroup, wide_epilogue
from runtime import device

SWITCHES = {  # sketch -> (module, switch, what its kernels' source has)
    "wmma": (wide_epilogue, "WIDE_EPILOGUE", "wmma"),
    "warpgroup": (cuda_warpgroup, "WARPGROUP_WORDS", "wgmma.mma_async"),
}


def best_of_kind(task, records, kind: str):
    """``(MeasureInput, state)`` of the task's best logged record whose sketch is ``kind``, or
    None."""
    for _, inp in ranked(records):
        state = inp.state.to_state(task.compute_dag)
        if sketch_kind(state) == kind:
            return inp, state
    return None


def best_cost(records) -> float:
    """The lowest logged cost (seconds) of ``records``; inf without a good one."""
    return next((cost for cost, _ in ranked(records)), float("inf"))


def write_retimed_log(path, log, retimed) -> None:
    """``log`` copied to ``path``, then each ``(MeasureInput, seconds)`` of ``retimed`` as a
    record of that cost (the best record wins in ``ApplyHistoryBest``)."""
    from autosched.measure import MeasureResult
    from autosched.measure.records import save_records

    with open(log) as src, open(path, "w") as dst:
        dst.write(src.read())
    results = [MeasureResult((sec,), 0, "", 0.0, time.time()) for _, sec in retimed]
    save_records(path, [inp for inp, _ in retimed], results)


def time_both(state, dag, dev, target, rng, sketch) -> tuple[float, float, float] | None:
    """(one element a lane us, words us, max abs difference) for ``state``; None when its
    kernel is not of ``sketch``."""
    module, switch, marker = SWITCHES[sketch]
    args = [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]
    out_t = dag.output_tensors[0]
    times, outs = [], []
    for wide in (False, True):
        setattr(module, switch, wide)
        func = ansor.build(state, target, device=dev)
        if marker not in func.get_source():
            return None
        out = np.zeros(out_t.shape, out_t.dtype)
        func(*args, out)
        outs.append(out.astype(np.float32))
        ev = func.time_evaluator(number=50, repeat=5, min_repeat_ms=20)
        times.append(ev(*args, out).median * 1e6)
    return times[0], times[1], float(np.abs(outs[0] - outs[1]).max())


def main() -> None:
    p = cnn_log_parser(__doc__)
    p.add_argument("--sketch", choices=sorted(SWITCHES), default="wmma")
    p.add_argument("--retimed-log", help="write the log with the faster words times added")
    args = p.parse_args()
    net = cnn_network(args)
    target, tasks, weights = net["target"], net["tasks"], net["weights"]
    by_key = records_by_key(args.log)
    dev, rng = device("cuda"), np.random.default_rng(0)
    rows, sums, retimed = [], [0.0, 0.0], []
    print(f"{'task':<44} {'calls':>5} {'scalar us':>9} {'words us':>9} {'ratio':>6}")
    for task, weight in zip(tasks, weights, strict=True):
        records = by_key.get(task.workload_key, [])
        found = best_of_kind(task, records, args.sketch)
        timed = (
            time_both(found[1], task.compute_dag, dev, target, rng, args.sketch) if found else None
        )
        if timed is None:
            continue
        scalar, words, diff = timed
        if words * 1e-6 < best_cost(records):
            retimed.append((found[0], words * 1e-6))
        sums[0] += weight * scalar
        sums[1] += weight * words
        rows.append({"task": task.desc, "weight": weight, "scalar_us": scalar,
                     "words_us": words, "max_abs_diff": diff})  # fmt: skip
        print(f"{task.desc[-44:]:<44} {weight:5d} {scalar:9.2f} {words:9.2f} "
              f"{words / scalar:6.3f}  diff {diff:.1e}", flush=True)  # fmt: skip
    result = {"scalar_sum_us": sums[0], "words_sum_us": sums[1]}
    print(json.dumps(result))
    write_json(args.out, {"rows": rows, **result})
    if args.retimed_log:
        write_retimed_log(args.retimed_log, args.log, retimed)
        print(f"{args.retimed_log}: {len(retimed)} states re-timed faster than their task's best")


if __name__ == "__main__":
    main()
