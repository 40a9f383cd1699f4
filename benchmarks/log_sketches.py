"""Which sketch each task's best record in a CNN's tuning log comes from: warpgroup (``wgmma``,
sm_90), warp-level tensor cores (wmma / ``mma``) or scalar (SIMT), with the record's cost and
the task's weight, and what share of the network's weighted kernel time each kind holds. No GPU
is needed; on a machine without one, ``--arch`` names the log's GPU (an sm_90 network pads its
conv GEMMs' rows for warpgroups, so its tasks differ from a plain ``cuda`` network's).

    python benchmarks/log_sketches.py --log LOG --network resnet-50 --batch 16 --arch sm_90
"""

from __future__ import annotations

from collections import Counter

from log_states import (  # benchmarks/
    best_states,
    cnn_log_parser,
    cnn_network,
    records_by_key,
    write_json,
)

from autosched.search.sketch_rules_warpgroup import is_warpgroup_state
from autosched.search.state_utils import has_tensor_core_pragma

KINDS = ("warpgroup", "wmma", "simt")


def sketch_kind(state) -> str:
    """``"warpgroup"``, ``"wmma"`` (any other state with a tensor-core stage) or ``"simt"``."""
    if is_warpgroup_state(state):
        return "warpgroup"
    if any(has_tensor_core_pragma(stage) for stage in state.stages):
        return "wmma"
    return "simt"


def best_rows(tasks, weights, by_key) -> list[dict]:
    """One row per task: its description, weight, best logged cost (us) and that state's
    kind; ``None`` cost and kind for a task without a good record."""
    rows = []
    for task, weight in zip(tasks, weights, strict=True):
        row = {"task": task.desc, "weight": weight, "best_us": None, "kind": None}
        for cost, state in best_states(task, by_key.get(task.workload_key, ()), 1):
            row["best_us"], row["kind"] = cost * 1e6, sketch_kind(state)
        rows.append(row)
    return rows


def weighted_shares(rows) -> dict:
    """Weighted kernel time (us: weight x best cost) per kind, and the tasks of each kind."""
    time, count = Counter(), Counter()
    for row in rows:
        if row["kind"] is not None:
            time[row["kind"]] += row["weight"] * row["best_us"]
            count[row["kind"]] += 1
    return {k: {"tasks": count[k], "weighted_us": time[k]} for k in KINDS}


def main() -> None:
    p = cnn_log_parser(__doc__)
    p.add_argument("--arch", help="the log's GPU, e.g. sm_90 (default: this machine's)")
    args = p.parse_args()
    net = cnn_network(args, arch=args.arch)
    rows = best_rows(net["tasks"], net["weights"], records_by_key(args.log))
    for row in rows:
        us = f"{row['best_us']:9.1f}" if row["best_us"] is not None else f"{'-':>9}"
        print(f"{row['task'][:48]:48s} x{row['weight']:<3d} {us} us  {row['kind'] or 'no record'}")
    shares = weighted_shares(rows)
    total = sum(s["weighted_us"] for s in shares.values())
    for kind, s in shares.items():
        share = s["weighted_us"] / total if total else 0.0
        print(f"{kind:10s} {s['tasks']:3d} tasks  {s['weighted_us']:8.1f} us  {share:6.1%}")
    write_json(args.out, {"rows": rows, "shares": shares})


if __name__ == "__main__":
    main()
