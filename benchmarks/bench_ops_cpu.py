"""Auto-scheduled operators on the CPU vs numpy and TVM MetaSchedule, side by side.

    python benchmarks/bench_ops_cpu.py                         # 200 trials per operator
    python benchmarks/bench_ops_cpu.py --trials 32 --ops matmul,softmax     # a quick look
    python benchmarks/bench_ops_cpu.py --tvm-python /path/to/tvm-venv/bin/python
    python benchmarks/bench_ops_cpu.py --tvm-results tvm.json  # TVM figures of an earlier run

For every operator: tune with ``task.tune`` (default policy: LightGBM cost model, TVM's search
parameters), re-time the best kernel in this process, time numpy's version of the operator,
and print the tuning wall time with its split into search / build / run / train. With
``--tvm-python`` the same operators are tuned by benchmarks/tvm_baseline.py under that Python
(TVM's own virtualenv), after ours, for the same number of trials.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from wall_timing import median_s  # run from benchmarks/

import autosched as ansor
from autosched import workloads
from tensorir.interp import eval_dag

HERE = Path(__file__).resolve().parent


def _im2col_conv(data, kernel, stride, pad):
    n, h, w, ci = data.shape
    kh, kw, _, co = kernel.shape
    padded = np.pad(data, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(1, 2))
    win = win[:, ::stride, ::stride]
    oh, ow = win.shape[1], win.shape[2]
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, kh * kw * ci)
    return (cols @ kernel.reshape(kh * kw * ci, co)).reshape(n, oh, ow, co)


def _depthwise(data, kernel):
    padded = np.pad(data, ((0, 0), (1, 1), (1, 1), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
    return np.einsum("nhwcij,ijc->nhwc", win, kernel[..., 0], optimize=True)


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# name -> (tensors, numpy version of the operator or None)
OPS = {
    "matmul": (lambda: workloads.matmul(512, 512, 512), lambda a, b: a @ b),
    "dense": (lambda: workloads.dense_bias(1, 512, 1000), lambda d, w, b: d @ w.T + b),
    "conv2d": (
        lambda: workloads.conv2d_nhwc_bias_relu(1, 56, 56, 64, 64, 3, 3, 1, 1),
        lambda d, k, b: np.maximum(_im2col_conv(d, k, 1, 1) + b, 0),
    ),
    "conv2d_s2": (
        lambda: workloads.conv2d_nhwc(1, 14, 14, 256, 512, 3, 3, 2, 1),
        lambda d, k: _im2col_conv(d, k, 2, 1),
    ),
    "depthwise": (lambda: workloads.depthwise_conv2d_nhwc(1, 112, 112, 32), _depthwise),
    "softmax": (lambda: workloads.softmax(1, 1000), _softmax),
}


def tune_ours(name: str, trials: int, work_dir: Path, seed: int) -> dict:
    make, reference = OPS[name]
    dag = ansor.ComputeDAG(make())
    task = ansor.SearchTask(dag, target="llvm", desc=name)
    log = work_dir / f"{name}.json"
    log.unlink(missing_ok=True)
    policy = ansor.SketchPolicy(task, ansor.LGBModel(), seed=seed, verbose=1)
    options = ansor.TuningOptions(
        num_measure_trials=trials, measure_callbacks=[ansor.RecordToFile(log)]
    )
    t0 = time.perf_counter()
    task.tune(options, policy)
    tune_s = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]
    out = np.full(dag.output_tensors[0].shape, np.nan, "float32")
    func = ansor.build(task.apply_best(log), "llvm")
    func(*args, out)
    np.testing.assert_allclose(out, eval_dag(dag, args)[0], rtol=1e-3, atol=1e-3)
    sec = func.time_evaluator(number=10, repeat=10, min_repeat_ms=50)(*args, out).median
    numpy_sec = median_s(lambda: reference(*args), 0.3, max_calls=200) if reference else None
    split = policy.time_split
    return {
        "op": name, "ms": sec * 1e3, "gflops": dag.flop_count() / sec / 1e9,
        "flop": dag.flop_count(), "numpy_ms": numpy_sec * 1e3 if numpy_sec else None,
        "tune_seconds": tune_s, "trials": policy.num_trials, "search_s": split.search,
        "build_s": split.build, "run_s": split.run, "train_s": split.train,
    }  # fmt: skip


def tune_tvm(python: str, ops: list[str], trials: int, work_dir: Path) -> dict:
    out = work_dir / "tvm.json"
    cmd = [python, str(HERE / "tvm_baseline.py"), "--ops", ",".join(ops), "--trials",
           str(trials), "--work-dir", str(work_dir / "tvm-ms"), "--out", str(out)]  # fmt: skip
    print("running:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=False, stdout=sys.stderr)
    return _load_tvm(out)


def _load_tvm(path) -> dict:
    return {r["op"]: r for r in json.loads(Path(path).read_text()) if "error" not in r}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated, from {list(OPS)}")
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work-dir", default="bench-ops-cpu", help="logs go here")
    p.add_argument("--tvm-python", help="a Python with apache-tvm: also tune with MetaSchedule")
    p.add_argument("--tvm-results", help="JSON written by tvm_baseline.py --out (earlier run)")
    p.add_argument("--out", help="write our figures (and TVM's) to this JSON file")
    args = p.parse_args()
    ops = [o for o in args.ops.split(",") if o]
    unknown = [o for o in ops if o not in OPS]
    if unknown:
        p.error(f"unknown operators {unknown}; choose from {list(OPS)}")
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    ours = [tune_ours(op, args.trials, work, args.seed) for op in ops]
    tvm = {}
    if args.tvm_results:
        tvm = _load_tvm(args.tvm_results)
    elif args.tvm_python:
        tvm = tune_tvm(args.tvm_python, ops, args.trials, work)

    print(f"\n{os.cpu_count()} cores, {args.trials} trials per operator")
    cols = [("op", 10), ("ms", 9), ("GFLOP/s", 8), ("numpy ms", 9), ("TVM ms", 9),
            ("TVM/ours", 8), ("tune s", 7), ("TVM s", 7), ("search", 7), ("build", 6),
            ("run", 6), ("train", 6)]  # fmt: skip
    print(" ".join(f"{c:{'' if c == 'op' else '>'}{w}}" for c, w in cols))
    for r in ours:
        t = tvm.get(r["op"], {})
        tvm_ms = t.get("ms")
        numpy_ms = f"{r['numpy_ms']:9.3f}" if r["numpy_ms"] else f"{'-':>9}"
        ratio = f"{tvm_ms / r['ms']:8.2f}" if tvm_ms else f"{'-':>8}"
        tvm_ms_s = f"{tvm_ms:9.3f}" if tvm_ms else f"{'-':>9}"
        tvm_s = f"{t['tune_seconds']:7.0f}" if t else f"{'-':>7}"
        print(f"{r['op']:10} {r['ms']:9.3f} {r['gflops']:8.1f} {numpy_ms} {tvm_ms_s} {ratio} "
              f"{r['tune_seconds']:7.0f} {tvm_s} {r['search_s']:7.0f} {r['build_s']:6.0f} "
              f"{r['run_s']:6.0f} {r['train_s']:6.1f}")  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps({"ours": ours, "tvm": tvm}, indent=1))


if __name__ == "__main__":
    main()
