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
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np
from autotvm_report import (
    TUNER_NAMES,
    done,
    load_pieces,
    markdown_tables,
    merge_pieces,
    plot_curves,
    print_summary,
)

import autosched as ansor
from autosched import autotvm, networks
from autosched.autotvm.tuner import GATuner, GridSearchTuner, RandomTuner, XGBTuner
from autosched.autotvm.tuner.cost_model import LGBCostModel
from autosched.autotvm.tuner.features import config_features
from autosched.measure.data import MeasureInput as StateInput

TUNERS = {  # in TUNER_NAMES's order (the tables' rows)
    "xgb": lambda t, seed: XGBTuner(t, loss_type="rank", feature_type="itervar", seed=seed),
    "ga": lambda t, seed: GATuner(t, pop_size=50, seed=seed),
    "random": lambda t, seed: RandomTuner(t, seed=seed),
    "grid": lambda t, seed: GridSearchTuner(t, seed=seed),
}
PARTS = ("tuners", "ansor", "transfer", "models")
assert tuple(TUNERS) == TUNER_NAMES


def conv2d_tasks(network: str, target: str, limit: int | None = None):
    mod, params, _, _ = networks.get_network(network, layout="NCHW")
    tasks = autotvm.task.extract_from_program(mod, params, ops=("nn.conv2d",), target=target)
    return tasks[:limit] if limit else tasks


def task_label(index: int, task) -> str:
    """``#3 c64 56x56 k128 3x3 s2``: the task's index among resnet-18's conv2d tasks (so the
    labels of pieces run with different ``--task-ids`` agree) and its shape."""
    (_, (_, c, h, w), _), (_, (k, _, kh, kw), _) = task.args[0], task.args[1]
    return f"#{index} c{c} {h}x{w} k{k} {kh}x{kw} s{task.args[2][0]}"


def measure_option(args):
    return autotvm.measure_option(
        builder=autotvm.LocalBuilder(timeout=args.build_timeout),
        runner=autotvm.LocalRunner(number=args.number, repeat=args.repeat, timeout=args.timeout),
    )


def at_budgets(curve: list[float], budgets: list[int], complete: bool = True) -> dict:
    """Best GFLOP/s after each budget. A complete run that stopped earlier (a space smaller
    than the budget, early stopping) gives its last value; a partial one None."""
    out = {}
    for b in budgets:
        if not curve or (not complete and len(curve) < b):
            out[str(b)] = None if curve or not complete else 0.0
        else:
            out[str(b)] = curve[min(b, len(curve)) - 1] / 1e9
    return out


# --------------------------------------------------------------------------- pieces


def parse_index_list(text: str, option: str) -> list[int]:
    """``"0,3,7"`` or ``"0-3,8"`` as sorted distinct ints."""
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        lo, sep, hi = part.partition("-")
        try:
            out.update(range(int(lo), int(hi) + 1) if sep else [int(part)])
        except ValueError:
            raise SystemExit(f"{option}: cannot read {part!r}; write e.g. 0,3,7 or 0-3") from None
    return sorted(out)


def pin_cores(cores: list[int]) -> None:
    """Run this process and its children on ``cores`` with that many threads per kernel."""
    try:
        os.sched_setaffinity(0, cores)
    except (AttributeError, OSError) as exc:
        raise SystemExit(f"--cores {cores}: cannot pin this process ({exc})") from None
    os.environ["AUTOSCHED_NUM_THREADS"] = str(len(cores))
    os.environ["OMP_NUM_THREADS"] = str(len(cores))


class Piece:
    """This invocation's result dict and the JSON it is saved to after every step."""

    def __init__(self, path: str, result: dict):
        self.path, self.result = path, result

    def save(self) -> None:
        tmp = f"{self.path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.result, f, indent=1)
        os.replace(tmp, self.path)  # a kill mid-write leaves the previous JSON whole


def start_piece(args) -> Piece:
    result = {"target": args.target, "trials": args.trials, "argv": sys.argv[1:]}
    if args.resume and os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
        if old.get("target") != args.target or old.get("trials") != args.trials:
            raise SystemExit(
                f"--resume: {args.out} holds target {old.get('target')!r} trials "
                f"{old.get('trials')}, not {args.target!r} {args.trials}; use another --out"
            )
        result = {**old, "argv": sys.argv[1:]}
    return Piece(args.out, result)


# --------------------------------------------------------------------------- 1. tuners


def run_tuners(tasks, args, option, piece: Piece) -> None:
    budgets = args.trials
    out = piece.result.setdefault("tuners", {})
    for k, (index, task) in enumerate(tasks):
        label = task_label(index, task)
        by_tuner = out.setdefault(label, {})
        for name in args.tuners:
            if done(by_tuner.get(name)):
                print(f"[{name:6s} {label}] already in {piece.path}")
                continue
            n_trial = min(max(budgets), len(task.config_space))
            tuner = TUNERS[name](task, args.seed)
            t0 = time.time()

            def record(
                tuner,
                _inputs=None,
                _results=None,
                partial=True,
                name=name,
                t0=t0,
                by_tuner=by_tuner,
            ):
                by_tuner[name] = {
                    "best_gflops": at_budgets(tuner.trace, budgets, not partial),
                    "curve_gflops": [round(v / 1e9, 4) for v in tuner.trace],
                    "seconds": round(time.time() - t0, 1),
                    "best_config": str(tuner.best_config),
                    "partial": partial,
                }
                piece.save()

            prefix = f"[{name:6s} {k + 1:2d}/{len(tasks):2d}] "
            bar = autotvm.callback.progress_bar(n_trial, prefix=prefix)
            tuner.tune(n_trial, measure_option=option, callbacks=[bar, record])
            record(tuner, partial=False)


# --------------------------------------------------------------------------- 2. vs template-free


class _CurveToPiece:
    """Measure callback (after ``RecordToFile``): the template-free search's best-so-far curve
    read back from its log, in measurement order, saved into the piece after every batch."""

    def __init__(self, task, log: str, budgets: list[int], label: str, piece: Piece):
        self.task, self.log, self.budgets, self.label, self.piece = task, log, budgets, label, piece
        self.t0 = time.time()

    def callback(self, inputs=None, results=None) -> None:
        self.write(partial=True)

    def write(self, partial: bool) -> None:
        curve, best = [], 0.0
        if os.path.exists(self.log):
            for _, res in ansor.load_records(self.log):
                if res.error_no == 0:
                    best = max(best, self.task.flop / res.mean_cost)
                curve.append(best)
        self.piece.result["template_free"][self.label] = {
            "best_gflops": at_budgets(curve, self.budgets, not partial),
            "curve_gflops": [round(v / 1e9, 4) for v in curve],
            "seconds": round(time.time() - self.t0, 1),
            "partial": partial,
        }
        self.piece.save()


def run_template_free(tasks, args, piece: Piece) -> None:
    """The auto-scheduler on each task's DAG, logged to ``--log-dir``; a killed search goes on
    from its log (``PreloadMeasuredStates``) when the piece is run again."""
    out = piece.result.setdefault("template_free", {})
    for index, task in tasks:
        label = task_label(index, task)
        if done(out.get(label)):
            print(f"[ansor  {label}] already in {piece.path}")
            continue
        log = os.path.join(args.log_dir, f"ansor-task{index}.json")
        if not args.resume and os.path.exists(log):
            os.remove(log)  # an earlier run's records would count as this run's trials
        stask = ansor.SearchTask(compute_dag=task.compute_dag, target=task.target)
        policy = ansor.SketchPolicy(
            stask, ansor.LGBModel(seed=args.seed), seed=args.seed, verbose=0,
            init_search_callbacks=[ansor.PreloadMeasuredStates(log)],
        )  # fmt: skip
        runner = ansor.LocalRunner(
            number=args.number, repeat=args.repeat, timeout=args.timeout,
            num_threads=args.threads,
        )  # fmt: skip
        curve = _CurveToPiece(task, log, args.trials, label, piece)
        logged = sum(1 for _ in ansor.load_records(log)) if os.path.exists(log) else 0
        left = max(args.trials) - logged
        print(f"[ansor  {label}] {left} trials more, log {log}", flush=True)
        if left <= 0:
            curve.write(partial=False)
            continue
        options = ansor.TuningOptions(
            num_measure_trials=left, runner=runner, verbose=0,
            measure_callbacks=[ansor.RecordToFile(log), curve],
        )  # fmt: skip
        stask.tune(options, search_policy=policy)
        curve.write(partial=False)


# --------------------------------------------------------------------------- 3. transfer


def run_transfer(tasks, args, option) -> dict:
    """XGBTuner on the second task cold and warm (``load_history`` of the first task's log):
    the best GFLOP/s after each budget, and the trials each needed to reach 90% of the best
    either run found."""
    first, second = tasks[0], tasks[1]
    n_trial = max(args.trials)
    log = os.path.join(args.log_dir, "transfer-first.log")
    if os.path.exists(log):
        os.remove(log)  # a killed run's records; this part is not resumed
    XGBTuner(first, seed=args.seed).tune(
        min(n_trial, len(first.config_space)), measure_option=option,
        callbacks=[autotvm.callback.log_to_file(log)],
    )  # fmt: skip
    curves = {}
    for mode in ("cold", "warm"):
        tuner = XGBTuner(second, seed=args.seed)
        if mode == "warm":
            tuner.load_history(autotvm.record.load_from_file(log), min_seed_records=1)
        n = min(n_trial, len(second.config_space))
        bar = autotvm.callback.progress_bar(n, prefix=f"[{mode} 2nd task] ")
        tuner.tune(n, measure_option=option, callbacks=[bar])
        curves[mode] = tuner.trace
    target = 0.9 * max(max(c) for c in curves.values())
    return {
        mode: {
            "best_gflops": at_budgets(c, args.trials),
            "trials_to_90pct": next((k + 1 for k, v in enumerate(c) if v >= target), None),
            "curve_gflops": [round(v / 1e9, 4) for v in c],
        }
        for mode, c in curves.items()
    }


# --------------------------------------------------------------------------- 4. cost models


def _records_path(log_dir: str, name: str) -> str:
    return os.path.join(log_dir, f"model-records-{name}.log")


def _load_records(path: str, task, n: int, partial_ok: bool = False) -> list | None:
    """The first ``n`` records of ``path`` bound to ``task`` (states rebuilt), or None when
    the file is missing or holds fewer (a killed sampling run: measured again) unless
    ``partial_ok``."""
    if not os.path.exists(path):
        return None
    pairs = []
    for inp, res in autotvm.record.load_from_file(path):
        state = None
        if inp.record_state is not None:
            state = inp.record_state.to_state(task.compute_dag)
        config = task.config_space.get(inp.config.index)
        pairs.append((dataclasses.replace(inp, task=task, config=config, state=state), res))
    return pairs[:n] if len(pairs) >= n or (partial_ok and pairs) else None


def sample_records(named_tasks, n, option, seed, log_dir, reuse: bool, measure=True) -> dict:
    """``{name: [(input, result), ...]}`` of ``n`` random measured configurations each, kept
    as an AutoTVM log per task in ``log_dir`` and, with ``reuse``, reloaded from there when
    complete. Without ``measure``, only what the logs hold (a task without records is left
    out)."""
    data = {}
    for name, task in named_tasks:
        n_task = min(n, len(task.config_space))
        path = _records_path(log_dir, name)
        got = _load_records(path, task, n_task, partial_ok=not measure) if reuse else None
        if got is None and not measure:
            print(f"[records {name}] no records in {path}: left out")
            continue
        if got is None:
            if os.path.exists(path):
                os.remove(path)
            got = []

            def keep(_tuner, inputs, results, got=got):
                got.extend(zip(inputs, results, strict=True))

            bar = autotvm.callback.progress_bar(n_task, prefix=f"[records {name}] ")
            RandomTuner(task, seed=seed).tune(
                n_task, measure_option=option,
                callbacks=[bar, keep, autotvm.callback.log_to_file(path)],
            )  # fmt: skip
        data[name] = got
    return data


def ranking_scores(y: np.ndarray, pred: np.ndarray) -> dict:
    from sklearn.metrics import ndcg_score

    order = np.argsort(-pred, kind="stable")
    best = y.max()
    out = {f"top{k}": float(y[order[:k]].max() / best) for k in (1, 5)}
    out["ndcg"] = float(ndcg_score(y[None, :], pred[None, :]))
    return out


def _throughputs(task, pairs) -> np.ndarray:
    return np.array([task.flop / r.mean_cost if r.error_no == 0 else 0.0 for _, r in pairs])


def _predict_ansor(train, test, tasks, seed) -> dict:
    model = ansor.LGBModel(seed=seed, num_warmup_sample=0)
    inputs, results = [], []
    for k in train:
        stask = tasks[k].search_task
        for inp, res in train[k]:
            if inp.state is not None:
                inputs.append(StateInput(stask, inp.state))
                results.append(res)
    model.update(inputs, results)
    preds = {}
    for k, pairs in test.items():
        states = [inp.state for inp, _ in pairs]
        ok = [s is not None for s in states]
        p = np.full(len(pairs), -np.inf)
        p[ok] = model.predict(tasks[k].search_task, [s for s in states if s is not None])
        preds[k] = p
    return preds


def _predict_autotvm(train, test, tasks, feature, seed) -> dict:
    test_templates = {tasks[k].name for k in test}
    rows, ys, groups = [], [], []
    for k, pairs in train.items():
        if feature == "knob" and tasks[k].name not in test_templates:
            continue
        x = [config_features(tasks[k], inp.config, feature) for inp, _ in pairs]
        keep = [i for i, v in enumerate(x) if v is not None]
        if not keep:
            continue
        rows += [x[i] for i in keep]
        ys += list(_throughputs(tasks[k], pairs)[keep])
        groups.append(len(keep))
    width = {len(r) for r in rows}
    if len(width) != 1:  # knob vectors of different templates: keep the test template's
        raise ValueError(f"{feature} features of different lengths {sorted(width)}")
    model = LGBCostModel("rank", seed=seed)
    model.fit(np.stack(rows), np.asarray(ys), groups=groups)
    preds = {}
    for k, pairs in test.items():
        x = [config_features(tasks[k], inp.config, feature) for inp, _ in pairs]
        p = np.full(len(pairs), -np.inf)
        ok = [i for i, v in enumerate(x) if v is not None]
        if ok:
            p[ok] = model.predict(np.stack([x[i] for i in ok]))
        preds[k] = p
    return preds


def run_cost_models(args, option) -> dict | None:
    """Sample (this shard's share of) the records; score the models unless sharded."""
    resnet = conv2d_tasks("resnet-18", args.target, args.model_tasks)
    mobilenet = conv2d_tasks("mobilenet", args.target, args.model_tasks)
    tasks = resnet + mobilenet
    names = [f"resnet-18-{i}" for i in range(len(resnet))]
    names += [f"mobilenet-{i}" for i in range(len(mobilenet))]
    shard, n_shards = args.model_shard
    mine = [k for k in range(len(tasks)) if k % n_shards == shard]
    by_name = sample_records([(names[k], tasks[k]) for k in mine], args.model_records, option,
                             args.seed, args.log_dir, args.resume,
                             measure=not args.score_only)  # fmt: skip
    if n_shards > 1:
        print(f"model records of {len(mine)} tasks in {args.log_dir}; score them with a piece "
              "without --model-shard")  # fmt: skip
        return None
    data = {k: by_name[names[k]] for k in range(len(tasks)) if names[k] in by_name}
    half = max(1, len(resnet) // 2)
    train_ids = [k for k in list(range(half)) + list(range(len(resnet), len(tasks))) if k in data]
    test_ids = [
        k for k in range(half, len(resnet))
        if k in data and _throughputs(tasks[k], data[k]).max() > 0
    ]  # fmt: skip
    if not test_ids:
        raise SystemExit("no held-out task has a successful measurement; raise --model-records")
    train = {k: data[k] for k in train_ids}
    test = {k: data[k] for k in test_ids}
    rng = np.random.default_rng(args.seed)
    models = {
        "lgb+ansor-features": lambda: _predict_ansor(train, test, tasks, args.seed),
        "lgb+knob": lambda: _predict_autotvm(train, test, tasks, "knob", args.seed),
        "lgb+itervar": lambda: _predict_autotvm(train, test, tasks, "itervar", args.seed),
        "lgb+curve": lambda: _predict_autotvm(train, test, tasks, "curve", args.seed),
        "random": lambda: {k: rng.random(len(v)) for k, v in test.items()},
    }
    out = {
        "train_tasks": len(train),
        "test_tasks": len(test),
        "records_per_task": args.model_records,
        "records": {names[k]: len(v) for k, v in data.items()},
        "models": {},
    }
    for name, predict in models.items():
        t0 = time.time()
        preds = predict()
        per_task = [ranking_scores(_throughputs(tasks[k], test[k]), preds[k]) for k in test]
        out["models"][name] = {
            m: round(float(np.mean([s[m] for s in per_task])), 4) for m in ("top1", "top5", "ndcg")
        }
        out["models"][name]["seconds"] = round(time.time() - t0, 1)
    return out


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
