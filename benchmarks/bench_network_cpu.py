"""Tuned networks on the CPU vs onnxruntime (and PyTorch if installed), side by side.

    python benchmarks/bench_network_cpu.py                            # resnet-18 and mobilenet
    python benchmarks/bench_network_cpu.py --networks resnet-18 --trials 2000
    python benchmarks/bench_network_cpu.py --no-tune                  # reuse the logs

For each network: extract the tasks of the NHWC network, tune them with the gradient task
scheduler for ``--trials`` measurements (resuming from the log in ``--work-dir`` if there is
one, so the budget adds up over runs), compile with the history best, check the output against
the numpy reference and time it; then export the same network in NCHW (same weights: the zoo
draws them layout-independently) to ONNX and time it under onnxruntime in this process.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from wall_timing import median_s  # run from benchmarks/

import autosched as ansor
from tensorir.graph import evaluate, get_network
from tensorir.graph.onnx_export import to_onnx


def tune_network(name: str, args) -> dict:
    """Tune the NHWC network ``name`` for ``args.trials`` (resuming from ``args.work_dir``'s
    log); returns ``log`` (its path), ``tasks``, ``tune_s`` and ``records_in_log``."""
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    log = work / f"{name}-NHWC-B1-llvm.json"
    mod, params, _, _ = get_network(name, batch_size=1, layout="NHWC")
    tasks, weights = ansor.extract_tasks(mod, params, "llvm")
    print(f"[{name}] {len(tasks)} tasks, weights sum {sum(weights)}")
    tune_s = 0.0
    if not args.no_tune and args.trials > 0:
        tuner = ansor.TaskScheduler(
            tasks, weights, load_log_file=str(log) if log.exists() else None
        )
        # In a network each kernel starts with cold caches (the previous one evicted its data),
        # so tune for that, as TVM's CPU network tutorial does.
        runner = (
            ansor.LocalRunner(repeat=args.flush_repeat, enable_cpu_cache_flush=True)
            if args.cache_flush
            else ansor.LocalRunner()
        )
        options = ansor.TuningOptions(
            num_measure_trials=args.trials,
            num_measures_per_round=args.per_round,
            runner=runner,
            measure_callbacks=[ansor.RecordToFile(str(log))],
        )
        search = ansor.SearchParams(
            evolutionary_search_population=args.population,
            evolutionary_search_num_iters=args.generations,
        )
        t0 = time.perf_counter()
        tuner.tune(options, search_policy_params=search)
        tune_s = time.perf_counter() - t0
    n_records = len(log.read_text().splitlines()) if log.exists() else 0
    return {"log": log, "tasks": tasks, "tune_s": tune_s, "records_in_log": n_records}


def compile_ours(name: str, log: Path) -> dict:
    """Build the NHWC network with the log's best records and check it on a random input;
    returns ``module`` (a GraphModule with the input set), ``x``, ``ref`` and ``max_abs_err``."""
    mod, params, input_shape, _ = get_network(name, batch_size=1, layout="NHWC")
    with ansor.ApplyHistoryBest(str(log) if log.exists() else []) as ctx:
        lib = ansor.build(mod, "llvm", params=params)
    print(f"[{name}] {ctx.summary()}")
    module = ansor.GraphModule(lib)
    x = np.random.default_rng(0).uniform(-1, 1, input_shape).astype("float32")
    module.set_input("data", x)
    module.run()
    out = module.get_output(0).numpy()
    ref = evaluate(mod, {"data": x}, params)
    return {"module": module, "x": x, "ref": ref, "max_abs_err": float(np.max(np.abs(out - ref)))}


def ours_ms(module) -> float:
    """Median ms of a GraphModule's run (3 repeats of at least 100 ms)."""
    return float(np.median(module.benchmark(repeat=3, min_repeat_ms=100).results)) * 1e3


def ort_session(name: str, x: np.ndarray, ref: np.ndarray) -> dict:
    """The same network (NCHW, same weights) under onnxruntime: ``run`` (a no-argument
    callable), ``ort_err`` against ``ref`` and ``ort_version``. Raises ImportError without it."""
    import onnxruntime as ort

    mod_nchw, params_nchw, _, _ = get_network(name, batch_size=1, layout="NCHW")
    model = to_onnx(mod_nchw, params_nchw)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    x_nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    o = sess.run(None, {"data": x_nchw})[0]
    return {
        "run": lambda: sess.run(None, {"data": x_nchw}),
        "ort_err": float(np.max(np.abs(o - ref))),
        "ort_version": ort.__version__,
    }


def bench_one(name: str, args) -> dict:
    tuned = tune_network(name, args)
    ours = compile_ours(name, tuned["log"])
    module = ours["module"]
    row = {"network": name, "ours_ms": ours_ms(module), "max_abs_err": ours["max_abs_err"],
           "tasks": len(tuned["tasks"]), "trials_this_run": args.trials if not args.no_tune else 0,
           "records_in_log": tuned["records_in_log"], "tune_s": tuned["tune_s"]}  # fmt: skip
    try:
        theirs_session = ort_session(name, ours["x"], ours["ref"])
        row["ort_err"] = theirs_session["ort_err"]
        # This machine's speed drifts by 10-20% over minutes, so time the two side by side in
        # alternating rounds and report the medians (and the median of the per-round ratios).
        ours_t, theirs = [], []
        for _ in range(args.rounds):
            # The pause lets the other side's spinning worker threads (ORT's pool, ours) go to
            # sleep, so that neither times its runs against the other's spinning.
            time.sleep(0.5)
            ours_t.append(ours_ms(module))
            time.sleep(0.5)
            theirs.append(median_s(theirs_session["run"], 0.3) * 1e3)
        row["ours_ms"] = float(np.median(ours_t))
        row["ort_ms"] = float(np.median(theirs))
        row["ort_over_ours_per_round"] = [t / o for o, t in zip(ours_t, theirs, strict=True)]
        row["ratio_median"] = float(np.median(row["ort_over_ours_per_round"]))
        row["ort_version"] = theirs_session["ort_version"]
    except ImportError:
        print("onnxruntime not installed: pip install onnxruntime")
    try:
        import torch  # noqa: F401

        print("PyTorch is installed but no torch model of the zoo exists yet; skipped")
    except ImportError:
        pass
    return row


def add_tuning_arguments(p: argparse.ArgumentParser) -> None:
    """The tuning options this script and bench_contention.py share."""
    p.add_argument("--trials", type=int, default=1000, help="measurements per network this run")
    p.add_argument("--per-round", type=int, default=16)
    p.add_argument("--population", type=int, default=512)
    p.add_argument("--generations", type=int, default=2)
    p.add_argument("--no-tune", action="store_true", help="only compile from the logs and time")
    p.add_argument(
        "--cache-flush",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="time candidates with cold caches (LocalRunner enable_cpu_cache_flush)",
    )
    p.add_argument("--flush-repeat", type=int, default=10, help="cold runs per candidate")
    p.add_argument("--work-dir", default="bench-network-cpu")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--networks", default="resnet-18,mobilenet")
    add_tuning_arguments(p)
    p.add_argument("--rounds", type=int, default=9, help="alternating timing rounds vs ORT")
    p.add_argument("--out", help="write the figures as JSON here")
    args = p.parse_args()
    rows = [bench_one(n, args) for n in args.networks.split(",")]
    print()
    print(f"{'network':<12} {'ours ms':>9} {'ORT ms':>9} {'ORT/ours':>9} {'tasks':>6} "
          f"{'trials':>7} {'records':>8} {'tune s':>8}")  # fmt: skip
    for r in rows:
        ort_ms = r.get("ort_ms", float("nan"))
        print(f"{r['network']:<12} {r['ours_ms']:9.2f} {ort_ms:9.2f} {ort_ms / r['ours_ms']:9.2f} "
              f"{r['tasks']:6d} {r['trials_this_run']:7d} {r['records_in_log']:8d} "
              f"{r['tune_s']:8.0f}")  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":  # tuning measures in spawned processes
    main()
