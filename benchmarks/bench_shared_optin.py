"""What the shared-memory opt-in (dynamic shared memory past 48 KiB, docs/gpu.md) gave a tuned
network: its log's best states against the best ones within 48 KiB, side by side.

    cd benchmarks && python bench_shared_optin.py --network resnet-50 --batch 16 \\
      --precision float16 --log W/resnet-50-NHWC-B16-cuda-float16.json

Lowers each record's state to count its shared memory, then prints, per task whose best state
is past 48 KiB, the tuner's figure for it and for the best state within 48 KiB, and the
weighted sums (``ApplyHistoryBest``'s choice: the best mean cost). With ``--dry-run`` that is
all (no GPU needed). Otherwise it builds the network from both sets of records in one process,
checks that the outputs agree, and times the two modules alternately (``--rounds`` times). The
last line is JSON. The states within 48 KiB had only part of the tune's trials, so the ratio
bounds the opt-in's gain from above as much as it measures it.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
from log_states import cnn_log_parser, cnn_network, write_json  # run from benchmarks/

import autosched as ansor
from tensorir.loops import Allocate, walk_stmts
from tensorir.lower import lower

STATIC_SHARED = 48 * 1024


def shared_bytes(state) -> int:
    """Shared memory a state's kernels allocate (its staged tiles, all pipeline copies)."""
    prog = lower(state)
    return sum(s.buffer.nbytes for s in walk_stmts(prog.body)
               if isinstance(s, Allocate) and s.buffer.scope == "shared")  # fmt: skip


def split_records(log, tasks) -> tuple[list, list]:
    """``(every record, those whose state fits 48 KiB)`` of ``log`` for ``tasks``."""
    dags = {t.workload_key: t.compute_dag for t in tasks}
    every, within = [], []
    for inp, res in ansor.load_records(log, dags=dags):
        every.append((inp, res))
        dag = dags.get(inp.task.workload_key)
        if dag is None or shared_bytes(inp.state.to_state(dag)) <= STATIC_SHARED:
            within.append((inp, res))
    return every, within


def task_rows(tasks, weights, target, every, within) -> list[dict]:
    """Per task: the best mean cost with every record and within 48 KiB (us)."""
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        best_all, best_within = ansor.ApplyHistoryBest(every), ansor.ApplyHistoryBest(within)
    for i, (t, w) in enumerate(zip(tasks, weights)):
        a = best_all.lookup(t.workload_key, target)
        b = best_within.lookup(t.workload_key, target)
        if a is None:
            continue
        rows.append({"task": i, "desc": t.desc, "weight": w, "all_us": a[1].mean_cost * 1e6,
                     "within_us": b[1].mean_cost * 1e6 if b else None})  # fmt: skip
    return rows


def build_network(mod, params, target, records, x):
    """The network built from ``records``, run once on ``x``: its output and module."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ansor.ApplyHistoryBest(records):
            lib = ansor.build(mod, target, params=params)
    module = ansor.GraphModule(lib)
    module.set_input("data", x)
    module.run()
    return module.get_output(0).numpy(), module


def main() -> None:
    p = cnn_log_parser(__doc__)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dry-run", action="store_true", help="the tuner's figures only, no GPU")
    args = p.parse_args()
    net = cnn_network(args)
    mod, params, shape, target = net["mod"], net["params"], net["shape"], net["target"]
    tasks, weights = net["tasks"], net["weights"]
    every, within = split_records(args.log, tasks)
    print(f"{len(every)} records, {len(within)} within 48 KiB of shared memory")
    rows = task_rows(tasks, weights, target, every, within)
    for r in rows:
        if r["within_us"] is not None and r["within_us"] > r["all_us"] * 1.001:
            print(f"{r['task']:3d} x{r['weight']} {r['desc'][:40]:40s} {r['all_us']:8.2f} us"
                  f"  within 48 KiB {r['within_us']:8.2f} us")  # fmt: skip
    total_all = sum(r["weight"] * r["all_us"] for r in rows)
    total_within = sum(r["weight"] * (r["within_us"] or r["all_us"]) for r in rows)
    summary = {"network": args.network, "batch": args.batch, "precision": args.precision,
               "tuner_sum_us": total_all, "tuner_sum_within_48k_us": total_within}  # fmt: skip
    print(
        f"weighted sums: {total_all:.1f} us, within 48 KiB {total_within:.1f} us "
        f"({total_within / total_all:.3f}x)"
    )
    if not args.dry_run:
        x = np.random.default_rng(0).uniform(-1, 1, shape).astype("float32")
        out_all, mod_all = build_network(mod, params, target, every, x)
        out_within, mod_within = build_network(mod, params, target, within, x)
        scale = float(np.max(np.abs(out_all)))
        np.testing.assert_allclose(out_within, out_all, rtol=0, atol=2e-2 * scale)
        times = {"all": [], "within": []}
        for _ in range(args.rounds):  # alternate, so drift hits both alike
            for name, m in (("all", mod_all), ("within", mod_within)):
                res = m.benchmark(repeat=10, min_repeat_ms=200).results
                times[name].append(float(np.median(res)) * 1e3)
        summary |= {"network_ms": min(times["all"]), "network_within_48k_ms": min(times["within"])}
        print(
            f"network: {summary['network_ms']:.3f} ms, within 48 KiB "
            f"{summary['network_within_48k_ms']:.3f} ms"
        )
    print(json.dumps(summary))
    write_json(args.out, {"summary": summary, "tasks": rows})


if __name__ == "__main__":
    main()
