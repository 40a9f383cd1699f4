"""AutoTVM template tuning: the four tuners, template vs template-free search, cost models.

    python benchmarks/bench_autotvm.py                         # the full run (hours on a CPU)
    python benchmarks/bench_autotvm.py --task-ids 1 --trials 4,8 --model-tasks 3 \\
        --model-records 6 --out /tmp/autotvm.json              # a smoke run (a few minutes)

Four parts, all on the conv2d tasks of resnet-18 (NCHW, ``extract_from_program``) for one
target (``--target``, default llvm):

1. **Tuners.** XGBTuner (LightGBM, itervar features, rank loss), GATuner, RandomTuner and
   GridSearchTuner tune the same tasks with the same measurement; the best GFLOP/s after each
   budget of ``--trials`` and the whole best-so-far curve per tuner and task.
2. **Template vs template-free.** The auto-scheduler (``SearchTask.tune``) on the same
   ComputeDAG with the largest budget; its best GFLOP/s after each budget (in measurement
   order).
3. **Transfer learning.** XGBTuner on a second task (with two tasks or more), cold and warm
   started with ``load_history`` of the first task's records: best GFLOP/s after each budget
   and the trials each needed to reach 90% of the best found.
4. **Cost-model quality** (the figure TenSet reports). Random configurations of resnet-18 and
   mobilenet conv2d tasks are measured (``--model-records`` each); the models train on the
   records of the mobilenet tasks and the first half of the resnet-18 ones and rank the
   configurations of the held-out resnet-18 tasks. Per held-out task: the top-1 and top-5
   score (best measured throughput among the k configurations ranked highest, over the best
   measured) and NDCG (``sklearn.metrics.ndcg_score``, throughput as relevance), averaged.
   Models: LightGBM on the auto-scheduler's features (``LGBModel``, pack-sum), LightGBM on
   the AutoTVM knob / itervar / curve features (``LGBCostModel``, rank loss), random scores.
   Knob features only compare within one template, so that model trains on the records of
   the held-out tasks' template only (conv2d_nchw.x86 on llvm).

Pieces: running the benchmark in parallel, resumably
-----------------------------------------------------
One invocation can run ONE piece of the benchmark and write its own JSON (``--out``):
a subset of the tasks (``--task-ids 0,3,7``: indices into resnet-18's conv2d tasks, the
order ``--list-tasks`` prints), of the tuners (``--tuners xgb,ga``) and of the parts
(``--skip tuners,ansor,transfer,models``). ``--model-shard I/N`` makes a piece measure
only every N-th cost-model task (from the I-th) and stop before scoring; a last piece with
the default ``0/1`` and ``--resume`` then loads all those records from ``--log-dir`` and
scores the models.

Nothing finished is lost: the JSON is rewritten (atomically) after every measured batch, a
tuner or task still running is marked ``"partial": true`` with its curve so far, and with
``--resume`` a piece re-run with the same command skips what its JSON already holds
complete: a killed tuner run restarts from scratch, a killed template-free search goes on
from its log in ``--log-dir`` (``PreloadMeasuredStates``; its ``seconds`` then count the last
run only), and the cost-model records are kept as AutoTVM logs there and reloaded.
``--summarize a.json b.json ...`` merges pieces, prints the summary and the markdown tables
of RESULTS.md, and writes the merged JSON to ``--out``.

``--cores 0-3`` pins a piece (``os.sched_setaffinity``; its build and measurement processes
inherit it) and sets ``AUTOSCHED_NUM_THREADS`` and ``OMP_NUM_THREADS`` to that count, so
the builder runs that many builds at once and every kernel is timed with that many threads.
Four pieces side by side on a 16-core machine, four cores each, measure comparably: every
tuner gets the same share of the machine (keep the pieces on disjoint cores, and compare
figures only between pieces with the same core count). benchmarks/run_autotvm_pieces.sh
launches such batches.

The script needs numpy, llvmlite, lightgbm and scikit-learn (the models part); not onnx,
onnxruntime, dask or pandas.

The parts live beside this script: ``autotvm_bench_setup.py`` (tasks, budgets, pieces),
``autotvm_tuning_parts.py`` (parts 1-3), ``autotvm_cost_models.py`` (part 4) and
``autotvm_report.py`` (merging and the tables).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from autotvm_bench_setup import (  # noqa: F401  (re-exported: tests/benchmarks use them here)
    Piece,
    at_budgets,
    conv2d_tasks,
    measure_option,
    parse_index_list,
    pin_cores,
    start_piece,
    task_label,
)
from autotvm_cost_models import run_cost_models
from autotvm_report import (  # noqa: F401  (done: re-exported for tests/benchmarks)
    done,
    load_pieces,
    markdown_tables,
    merge_pieces,
    plot_curves,
    print_summary,
)
from autotvm_tuning_parts import TUNERS, run_template_free, run_transfer, run_tuners

from autosched import autotvm  # noqa: F401  (tests patch bench.autotvm.callback)

PARTS = ("tuners", "ansor", "transfer", "models")


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="llvm")
    p.add_argument("--tasks", type=int, default=None, help="first N resnet-18 conv2d tasks")
    p.add_argument(
        "--task-ids",
        default=None,
        help="resnet-18 conv2d tasks by index (0,3,7 or 0-3); see --list-tasks",
    )
    p.add_argument("--list-tasks", action="store_true", help="print the tasks and exit")
    p.add_argument("--trials", default="50,100,200", help="budgets, comma separated")
    p.add_argument("--tuners", default="xgb,ga,random,grid")
    p.add_argument("--skip", default="", help="parts to skip: " + ",".join(PARTS))
    p.add_argument("--model-tasks", type=int, default=None, help="tasks per network (models)")
    p.add_argument("--model-records", type=int, default=200)
    p.add_argument(
        "--score-only",
        action="store_true",
        help="score the cost models on the records --log-dir holds (with --resume), measuring "
        "nothing; a task with fewer than --model-records records takes part with what it has",
    )
    p.add_argument(
        "--model-shard",
        default="0/1",
        help="I/N: measure only every N-th model task from the I-th, do not score "
        "(then score with a --resume piece without --model-shard)",
    )
    p.add_argument("--number", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--timeout", type=float, default=10)
    p.add_argument("--build-timeout", type=float, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--cores",
        default=None,
        help="pin to these CPUs (0-3 or 0,1,2,3); that many threads per kernel",
    )
    p.add_argument("--out", default="bench_autotvm.json")
    p.add_argument(
        "--log-dir", default=None, help="records kept between runs (default: next to --out)"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep what --out already holds complete and run only the rest",
    )
    p.add_argument(
        "--summarize",
        nargs="+",
        metavar="PIECE_JSON",
        help="merge these pieces' JSONs into --out and print the tables; run nothing",
    )
    p.add_argument(
        "--plot",
        default=None,
        help="with --summarize: the best-so-far curves to this image (matplotlib)",
    )
    p.add_argument("--markdown", default=None, help="also write the markdown tables to this file")
    return p  # fmt: skip


def parse_args(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    try:
        args.trials = sorted({int(x) for x in args.trials.split(",") if x.strip()})
    except ValueError:
        p.error(f"--trials {args.trials!r}: write budgets as comma-separated ints, e.g. 50,100")
    if not args.trials or args.trials[0] < 1:
        p.error(f"--trials {args.trials}: budgets must be positive")
    args.tuners = [t for t in args.tuners.split(",") if t]
    unknown = set(args.tuners) - set(TUNERS)
    if unknown:
        p.error(f"unknown tuners {sorted(unknown)}; choose from {list(TUNERS)}")
    args.skip = set(args.skip.split(",")) - {""}
    if args.skip - set(PARTS):
        p.error(f"--skip: unknown parts {sorted(args.skip - set(PARTS))}; choose from {PARTS}")
    shard, _, n = args.model_shard.partition("/")
    if not (shard.isdigit() and n.isdigit() and int(shard) < int(n)):
        p.error(f"--model-shard {args.model_shard!r}: write I/N with 0 <= I < N, e.g. 1/4")
    args.model_shard = (int(shard), int(n))
    if args.task_ids is not None and args.tasks is not None:
        p.error("give --tasks (the first N) or --task-ids, not both")
    args.cores = parse_index_list(args.cores, "--cores") if args.cores else None
    args.threads = len(args.cores) if args.cores else None
    if args.log_dir is None:
        args.log_dir = os.path.join(os.path.dirname(os.path.abspath(args.out)), "logs")
    return args


def select_tasks(args) -> list:
    """``[(index, task), ...]`` of resnet-18's conv2d tasks this piece runs."""
    tasks = conv2d_tasks("resnet-18", args.target)
    if args.task_ids is None:
        return list(enumerate(tasks))[: args.tasks or None]
    ids = parse_index_list(args.task_ids, "--task-ids")
    if ids[-1] >= len(tasks):
        raise SystemExit(
            f"--task-ids {args.task_ids}: resnet-18 has {len(tasks)} conv2d tasks "
            f"(0-{len(tasks) - 1}); see --list-tasks"
        )
    return [(i, tasks[i]) for i in ids]


def summarize(args) -> int:
    result = merge_pieces(load_pieces(args.summarize))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print_summary(result)
    table = markdown_tables(result)
    print("\n" + table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    if args.plot:
        plot_curves(result, args.plot)
    written = [args.out] + [f for f in (args.markdown, args.plot) if f]
    print("\nwrote " + ", ".join(written))
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.summarize:
        return summarize(args)
    if args.cores:
        pin_cores(args.cores)  # before any build or measurement process starts
    if args.list_tasks:
        for index, task in select_tasks(args):
            print(f"{task_label(index, task):28s} {task.flop / 1e6:8.1f} MFLOP  "
                  f"{len(task.config_space)} configurations")  # fmt: skip
        return 0
    os.makedirs(args.log_dir, exist_ok=True)
    option = measure_option(args)
    piece = start_piece(args)
    piece.save()
    tasks = select_tasks(args)
    if "tuners" not in args.skip:
        run_tuners(tasks, args, option, piece)
    if "ansor" not in args.skip:
        run_template_free(tasks, args, piece)
    if "transfer" not in args.skip and len(tasks) >= 2 and "transfer" not in piece.result:
        picked = [t for _, t in tasks]
        piece.result["transfer"] = run_transfer(picked[1:] if len(picked) > 2 else picked,
                                                args, option)  # fmt: skip
        piece.save()
    if "models" not in args.skip and "cost_models" not in piece.result:
        scores = run_cost_models(args, option)
        if scores is not None:
            piece.result["cost_models"] = scores
            piece.save()
    print_summary(piece.result)
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
