"""Fragment epilogues one element a lane against 16 bytes a lane (codegen.wide_epilogue), on a
tuned log's best states, side by side in one process.

    cd benchmarks && python bench_epilogue_words.py --network resnet-50 --batch 16 \\
      --precision float16 --log W/resnet-50-NHWC-B16-cuda-float16.json

For each tensor-core task of the network (its best logged state), builds the kernel both ways
(``WIDE_EPILOGUE`` off, then on), checks that both give the same output on random inputs, and
times each with the module's ``time_evaluator``. Prints each task, its weight, both times and
the weighted sums; the last line is JSON with the sums.
"""

from __future__ import annotations

import json

import numpy as np
from log_states import (  # run from benchmarks/
    best_states,
    cnn_log_parser,
    cnn_network,
    records_by_key,
    write_json,
)

import autosched as ansor
from codegen import wide_epilogue
from runtime import device


def time_both(state, dag, dev, target, rng) -> tuple[float, float, float] | None:
    """(one element a lane us, words us, max abs difference) for ``state``; None when its
    kernel has no wmma fragments."""
    args = [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]
    out_t = dag.output_tensors[0]
    times, outs = [], []
    for wide in (False, True):
        wide_epilogue.WIDE_EPILOGUE = wide
        func = ansor.build(state, target, device=dev)
        if "wmma" not in func.get_source():
            return None
        out = np.zeros(out_t.shape, out_t.dtype)
        func(*args, out)
        outs.append(out.astype(np.float32))
        ev = func.time_evaluator(number=50, repeat=5, min_repeat_ms=20)
        times.append(ev(*args, out).median * 1e6)
    return times[0], times[1], float(np.abs(outs[0] - outs[1]).max())


def main() -> None:
    args = cnn_log_parser(__doc__).parse_args()
    net = cnn_network(args)
    target, tasks, weights = net["target"], net["tasks"], net["weights"]
    by_key = records_by_key(args.log)
    dev, rng = device("cuda"), np.random.default_rng(0)
    rows, sums = [], [0.0, 0.0]
    print(f"{'task':<44} {'calls':>5} {'scalar us':>9} {'words us':>9} {'ratio':>6}")
    for task, weight in zip(tasks, weights, strict=True):
        best = best_states(task, by_key.get(task.workload_key, []), 1)
        timed = time_both(best[0][1], task.compute_dag, dev, target, rng) if best else None
        if timed is None:
            continue
        scalar, words, diff = timed
        sums[0] += weight * scalar
        sums[1] += weight * words
        rows.append({"task": task.desc, "weight": weight, "scalar_us": scalar,
                     "words_us": words, "max_abs_diff": diff})  # fmt: skip
        print(f"{task.desc[-44:]:<44} {weight:5d} {scalar:9.2f} {words:9.2f} "
              f"{words / scalar:6.3f}  diff {diff:.1e}", flush=True)  # fmt: skip
    result = {"scalar_sum_us": sums[0], "words_sum_us": sums[1]}
    print(json.dumps(result))
    write_json(args.out, {"rows": rows, **result})


if __name__ == "__main__":
    main()
