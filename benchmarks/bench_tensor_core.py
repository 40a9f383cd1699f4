"""A 4096^3 fp16 matmul (fp32 accumulation, fp16 output) tuned with the library's defaults (the
tensor-core sketch fires) against torch.matmul fp16 (cuBLAS) in the same process, both timed with
CUDA events (ours through the module's time_evaluator).

    python benchmarks/bench_tensor_core.py [--seconds 150] [--trials 200] [--n 4096] [--resume LOG]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

import autosched as ansor
from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.ops.dense import dense


def workload(n):
    a = te.placeholder((n, n), "float16", name="A")
    b = te.placeholder((n, n), "float16", name="B")
    c = dense(a, b, out_dtype="float32")
    return [a, b, te.compute(c.shape, lambda i, j: c[i, j].astype("float16"), name="D")]


def cuda_event_ms(fn, repeat=50):
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--seconds", type=float, default=150)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--log", default="tc_matmul.json")
    ap.add_argument("--resume", help="records of an earlier run of this tune to continue from")
    args = ap.parse_args()
    import torch

    n = args.n
    task = ansor.SearchTask(ComputeDAG(workload(n)), target="cuda")
    t0 = time.time()
    opts = ansor.TuningOptions(
        num_measure_trials=args.trials,
        max_tuning_seconds=args.seconds,
        measure_callbacks=[ansor.RecordToFile(args.log)],
        verbose=1,
    )
    policy = None
    if args.resume:  # continue a budget split over several sessions: trials count in total
        done = len(list(ansor.load_records(args.resume)))
        opts = dataclasses.replace(opts, num_measure_trials=max(1, args.trials - done))
        with open(args.resume) as src, open(args.log, "a") as dst:
            dst.write(src.read())
        preload = [ansor.PreloadMeasuredStates(args.resume)]
        policy = ansor.SketchPolicy(task, ansor.LGBModel(), init_search_callbacks=preload)
    task.tune(opts, search_policy=policy)
    tuned_s = time.time() - t0
    records = list(ansor.load_records(args.log))
    func = ansor.build(task.apply_best(args.log), "cuda")
    assert "wmma::mma_sync" in func.get_source()
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (n, n)).astype("float16")
    b = rng.uniform(-1, 1, (n, n)).astype("float16")
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    want = torch.matmul(ta, tb.T).float().cpu().numpy()
    out = np.zeros((n, n), np.float16)
    func(a, b, out)
    err = float(np.abs(out.astype(np.float32) - want).max())
    # The module's own timer (CUDA events around the launches; arguments copied before).
    ms_ours = func.time_evaluator(number=20, repeat=3)(a, b, out).median * 1e3
    ms_torch = cuda_event_ms(lambda: torch.matmul(ta, tb.T))
    flops = 2 * n**3
    res = {"n": n, "trials": len(records), "tune_s": round(tuned_s, 1),
           "ours_ms": round(ms_ours, 4), "torch_ms": round(ms_torch, 4),
           "ours_tflops": round(flops / ms_ours / 1e9, 1),
           "torch_tflops": round(flops / ms_torch / 1e9, 1),
           "fraction_of_cublas": round(ms_torch / ms_ours, 3), "max_abs_err": err}  # fmt: skip
    print(json.dumps(res))


if __name__ == "__main__":
    main()
