"""The default GPU schedule of elementwise kernels: one output per thread vs several, side by
side.

    cd benchmarks && python bench_elementwise_gpu.py --network resnet-50 --batch 16

A network's groups without a reduction (bias + relu, adds, casts) are not tuned: they run the
default GPU schedule (``autosched/network/default_schedules.py``). It gave each thread one
output; a large group now gives each thread up to 8, a block apart
(``elements_per_thread``), so that more bytes are in flight. This measures each such group
of the network both ways with the tuner's own builder and runner, in one process, and prints
the bandwidth each reaches.
"""

from __future__ import annotations

import argparse

from gpu_precision import PRECISIONS, our_module, target_for  # run from benchmarks/
from log_states import best_us, build_and_run, cell, error_text, write_json

import autosched as ansor
from autosched.network.default_schedules import default_gpu_schedule
from tensorir.dtype import itemsize


def moved_bytes(dag) -> int:
    """Bytes the group reads and writes once: every input and output tensor."""
    tensors = [*dag.input_tensors, *dag.output_tensors]
    total = 0
    for t in tensors:
        n = 1
        for d in t.shape:
            n *= int(d)
        total += n * itemsize(t.dtype)
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--network", default="resnet-50")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--precision", choices=PRECISIONS, default="float16")
    p.add_argument("--out", help="write the rows as JSON here")
    p.add_argument("--dry-run", action="store_true", help="list the groups, measure nothing")
    args = p.parse_args()

    from tensorir.graph import get_network

    mod32, params32, _, _ = get_network(args.network, batch_size=args.batch, layout="NHWC")
    mod, params = our_module(mod32, params32, args.precision)
    target = target_for(args.precision)
    tasks, weights = ansor.extract_tasks(mod, params, target, include_simple_tasks=True)
    simple = [(t, w) for t, w in zip(tasks, weights, strict=True)
              if not any(op.reduce_axes for op in t.compute_dag.compute_ops)]  # fmt: skip
    inputs, meta = [], []
    for task, weight in simple:
        dag = task.compute_dag
        one = default_gpu_schedule(dag, max_elements_per_thread=1)
        now = default_gpu_schedule(dag)
        inputs += [ansor.MeasureInput(task, one), ansor.MeasureInput(task, now)]
        meta.append((task.desc, weight, moved_bytes(dag), now.steps != one.steps))
    print(f"{len(meta)} groups without a reduction", flush=True)
    if args.dry_run:
        for desc, weight, nbytes, changed in meta:
            print(f"{desc[:40]:<40} x{weight:<3d} {nbytes / 1e6:8.2f} MB  changed={changed}")
        return
    results = build_and_run(inputs, ansor.LocalRunner(number=10, repeat=3))
    rows = []
    print(f"{'group':<40} {'calls':>5} {'MB':>7} {'1/thread us':>11} {'now us':>8} {'GB/s':>7}")
    for k, (desc, weight, nbytes, changed) in enumerate(meta):
        a, b = results[2 * k], results[2 * k + 1]
        t1, tn = best_us(a), best_us(b)
        rate = nbytes / (tn * 1e3) if tn else None
        rows.append({"group": desc, "calls": weight, "bytes": nbytes, "one_per_thread_us": t1,
                     "now_us": tn, "changed": changed,
                     "errors": [error_text(a), error_text(b)]})  # fmt: skip
        print(f"{desc[:40]:<40} {weight:5d} {nbytes / 1e6:7.2f} {cell(t1, 11)} {cell(tn, 8)} "
              f"{cell(rate, 7)}", flush=True)  # fmt: skip
    write_json(args.out, rows)


if __name__ == "__main__":
    main()
