"""AutoTVM template tuning: the four tuners, template vs template-free search, cost models.

    python benchmarks/bench_autotvm.py                         # the full run (hours on a CPU)
    python benchmarks/bench_autotvm.py --tasks 1 --trials 4,8 --model-tasks 3 \\
        --model-records 6 --out /tmp/autotvm.json              # a smoke run (a few minutes)

Three parts, all on the conv2d tasks of resnet-18 (NCHW, ``extract_from_program``) for one
target (``--target``, default llvm):

1. **Tuners.** XGBTuner (LightGBM, itervar features, rank loss), GATuner, RandomTuner and
   GridSearchTuner tune the same tasks with the same measurement; the best GFLOP/s after each
   budget of ``--trials`` and the whole best-so-far curve per tuner and task.
2. **Template vs template-free.** The auto-scheduler (``SearchTask.tune``) on the same
   ComputeDAG with the largest budget; its best GFLOP/s after each budget (in measurement
   order).
3. **Transfer learning.** XGBTuner on a second task (with ``--tasks`` >= 2), cold and warm
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

Figures go to ``--out`` (JSON: every curve and score) and a summary table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

import autosched as ansor
from autosched import autotvm, networks
from autosched.autotvm.tuner import GATuner, GridSearchTuner, RandomTuner, XGBTuner
from autosched.autotvm.tuner.cost_model import LGBCostModel
from autosched.autotvm.tuner.features import config_features
from autosched.measure.data import MeasureInput as StateInput

TUNERS = {
    "xgb": lambda t, seed: XGBTuner(t, loss_type="rank", feature_type="itervar", seed=seed),
    "ga": lambda t, seed: GATuner(t, pop_size=50, seed=seed),
    "random": lambda t, seed: RandomTuner(t, seed=seed),
    "grid": lambda t, seed: GridSearchTuner(t, seed=seed),
}


def conv2d_tasks(network: str, target: str, limit: int | None):
    mod, params, _, _ = networks.get_network(network, layout="NCHW")
    tasks = autotvm.task.extract_from_program(mod, params, ops=("nn.conv2d",), target=target)
    return tasks[:limit] if limit else tasks


def measure_option(args):
    return autotvm.measure_option(
        builder=autotvm.LocalBuilder(timeout=args.build_timeout),
        runner=autotvm.LocalRunner(number=args.number, repeat=args.repeat, timeout=args.timeout),
    )


def at_budgets(curve: list[float], budgets: list[int]) -> dict:
    """Best GFLOP/s after each budget (the last value when the run stopped earlier)."""
    return {str(b): (curve[min(b, len(curve)) - 1] / 1e9 if curve else 0.0) for b in budgets}


# --------------------------------------------------------------------------- 1. tuners


def run_tuners(tasks, args, option) -> dict:
    budgets = args.trials
    out = {}
    for k, task in enumerate(tasks):
        label = f"T{k + 1} {task.args[0][1]}x{task.args[1][1]} s{task.args[2][0]}"
        out[label] = {}
        for name in args.tuners:
            n_trial = min(max(budgets), len(task.config_space))
            tuner = TUNERS[name](task, args.seed)
            prefix = f"[{name:6s} {k + 1:2d}/{len(tasks):2d}] "
            t0 = time.time()
            bar = autotvm.callback.progress_bar(n_trial, prefix=prefix)
            tuner.tune(n_trial, measure_option=option, callbacks=[bar])
            out[label][name] = {
                "best_gflops": at_budgets(tuner.trace, budgets),
                "curve_gflops": [round(v / 1e9, 4) for v in tuner.trace],
                "seconds": round(time.time() - t0, 1),
                "best_config": str(tuner.best_config),
            }
    return out


# --------------------------------------------------------------------------- 2. vs template-free


def run_template_free(tasks, args) -> dict:
    budgets = args.trials
    out = {}
    for k, task in enumerate(tasks):
        label = f"T{k + 1} {task.args[0][1]}x{task.args[1][1]} s{task.args[2][0]}"
        stask = ansor.SearchTask(compute_dag=task.compute_dag, target=task.target)
        log = os.path.join(tempfile.mkdtemp(prefix="bench_autotvm_"), "ansor.json")
        runner = ansor.LocalRunner(number=args.number, repeat=args.repeat, timeout=args.timeout)
        t0 = time.time()
        stask.tune(ansor.TuningOptions(num_measure_trials=max(budgets), runner=runner,
                                       measure_callbacks=[ansor.RecordToFile(log)],
                                       verbose=0))  # fmt: skip
        curve, best = [], 0.0
        for _, res in ansor.load_records(log):
            if res.error_no == 0:
                best = max(best, task.flop / res.mean_cost)
            curve.append(best)
        out[label] = {
            "best_gflops": at_budgets(curve, budgets),
            "curve_gflops": [round(v / 1e9, 4) for v in curve],
            "seconds": round(time.time() - t0, 1),
        }
    return out


# --------------------------------------------------------------------------- 3. transfer


def run_transfer(tasks, args, option) -> dict:
    """XGBTuner on the second task cold and warm (``load_history`` of the first task's log):
    the best GFLOP/s after each budget, and the trials each needed to reach 90% of the best
    either run found."""
    first, second = tasks[0], tasks[1]
    n_trial = max(args.trials)
    log = os.path.join(tempfile.mkdtemp(prefix="bench_autotvm_"), "first.log")
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


def sample_records(tasks, n, option, seed) -> dict:
    """``{task index: (inputs, results)}`` of ``n`` random measured configurations each."""
    data = {}
    for k, task in enumerate(tasks):
        got: list = []

        def keep(_tuner, inputs, results, got=got):
            got.extend(zip(inputs, results, strict=True))

        RandomTuner(task, seed=seed).tune(min(n, len(task.config_space)), measure_option=option,
                                          callbacks=[keep])  # fmt: skip
        data[k] = got
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


def run_cost_models(args, option) -> dict:
    resnet = conv2d_tasks("resnet-18", args.target, args.model_tasks)
    mobilenet = conv2d_tasks("mobilenet", args.target, args.model_tasks)
    tasks = resnet + mobilenet
    data = sample_records(tasks, args.model_records, option, args.seed)
    half = max(1, len(resnet) // 2)
    train_ids = list(range(half)) + list(range(len(resnet), len(tasks)))
    test_ids = [k for k in range(half, len(resnet)) if _throughputs(tasks[k], data[k]).max() > 0]
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
    out = {"train_tasks": len(train), "test_tasks": len(test), "models": {}}
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="llvm")
    p.add_argument("--tasks", type=int, default=None, help="first N resnet-18 conv2d tasks")
    p.add_argument("--trials", default="50,100,200", help="budgets, comma separated")
    p.add_argument("--tuners", default="xgb,ga,random,grid")
    p.add_argument("--skip", default="", help="parts to skip: tuners,ansor,transfer,models")
    p.add_argument("--model-tasks", type=int, default=None, help="tasks per network (models)")
    p.add_argument("--model-records", type=int, default=200)
    p.add_argument("--number", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--timeout", type=float, default=10)
    p.add_argument("--build-timeout", type=float, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench_autotvm.json")
    args = p.parse_args(argv)
    args.trials = sorted(int(x) for x in args.trials.split(","))
    args.tuners = [t for t in args.tuners.split(",") if t]
    unknown = set(args.tuners) - set(TUNERS)
    if unknown:
        p.error(f"unknown tuners {sorted(unknown)}; choose from {list(TUNERS)}")
    skip = set(args.skip.split(",")) - {""}
    option = measure_option(args)
    result = {"target": args.target, "trials": args.trials, "argv": sys.argv[1:]}
    tasks = conv2d_tasks("resnet-18", args.target, args.tasks)
    if "tuners" not in skip:
        result["tuners"] = run_tuners(tasks, args, option)
    if "ansor" not in skip:
        result["template_free"] = run_template_free(tasks, args)
    if "transfer" not in skip and len(tasks) >= 2:
        result["transfer"] = run_transfer(tasks[1:] if len(tasks) > 2 else tasks, args, option)
    if "models" not in skip:
        result["cost_models"] = run_cost_models(args, option)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print_summary(result)
    print(f"\nwrote {args.out}")
    return 0


def print_summary(result) -> None:
    budgets = [str(b) for b in result["trials"]]
    if "tuners" in result:
        print("\nbest GFLOP/s after " + "/".join(budgets) + " trials")
        for label, by_tuner in result["tuners"].items():
            for name, r in by_tuner.items():
                figs = " / ".join(f"{r['best_gflops'][b]:7.2f}" for b in budgets)
                print(f"  {label:32s} {name:8s} {figs}   ({r['seconds']} s)")
    if "template_free" in result:
        print("\ntemplate-free search (auto-scheduler), best GFLOP/s after " + "/".join(budgets))
        for label, r in result["template_free"].items():
            figs = " / ".join(f"{r['best_gflops'][b]:7.2f}" for b in budgets)
            print(f"  {label:32s} {'ansor':8s} {figs}   ({r['seconds']} s)")
    if "transfer" in result:
        print("\ntransfer learning (XGBTuner on a second task, cold vs load_history of the first)")
        for mode, r in result["transfer"].items():
            figs = " / ".join(f"{r['best_gflops'][b]:7.2f}" for b in budgets)
            reached = r["trials_to_90pct"] or "not reached"
            print(f"  {mode:6s} {figs}   trials to 90% of the best: {reached}")
    if "cost_models" in result:
        cm = result["cost_models"]
        print(f"\ncost models: trained on {cm['train_tasks']} tasks, tested on "
              f"{cm['test_tasks']} held-out resnet-18 tasks")  # fmt: skip
        print(f"  {'model':22s} {'top-1':>6s} {'top-5':>6s} {'NDCG':>6s}")
        for name, m in cm["models"].items():
            print(f"  {name:22s} {m['top1']:6.3f} {m['top5']:6.3f} {m['ndcg']:6.3f}")


if __name__ == "__main__":
    sys.exit(main())
