"""Parts 1 to 3 of ``bench_autotvm.py``: the four AutoTVM tuners on the same tasks, the
template-free auto-scheduler on the same DAGs, and XGBTuner's transfer learning (cold vs warm
started); each saves its curves into the piece as it goes."""

from __future__ import annotations

import os
import time

from autotvm_bench_setup import Piece, at_budgets, task_label
from autotvm_report import TUNER_NAMES, done

import autosched as ansor
from autosched import autotvm
from autosched.autotvm.tuner import GATuner, GridSearchTuner, RandomTuner, XGBTuner

TUNERS = {  # in TUNER_NAMES's order (the tables' rows)
    "xgb": lambda t, seed: XGBTuner(t, loss_type="rank", feature_type="itervar", seed=seed),
    "ga": lambda t, seed: GATuner(t, pop_size=50, seed=seed),
    "random": lambda t, seed: RandomTuner(t, seed=seed),
    "grid": lambda t, seed: GridSearchTuner(t, seed=seed),
}
assert tuple(TUNERS) == TUNER_NAMES


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
