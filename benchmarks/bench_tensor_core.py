"""A 4096^3 fp16 matmul (fp32 accumulation, fp16 output) tuned with the library's defaults (the
tensor-core sketch fires) against torch.matmul fp16 (cuBLAS) in the same process, both timed with
CUDA events (ours through the module's time_evaluator).

    python benchmarks/bench_tensor_core.py [--seconds 150] [--trials 200] [--n 4096] [--resume LOG]
        [--pipeline 1|2|3|4] [--dtype float16|float32 [--tf32]] [--ab TILES [--ab-stages 1,2,3]]

``--dtype float32 --tf32`` tunes a float32 matmul for ``cuda -allow_tf32=1`` (TF32 tensor cores)
and times torch.matmul float32 with ``torch.backends.cuda.matmul.allow_tf32=True`` beside it (and
with it False, for scale); ``--dtype float32`` alone compares float32 with float32 (TF32 off on
both sides). Errors are against float32 torch.matmul with TF32 off.

``--pipeline 1`` tunes with single-buffered shared staging, 2 double buffered, 3 or 4 lets the
search draw 2 up to that many stages (``SearchParams.gpu_tensor_core_pipeline``; the library's
default is 3; ``cp.async`` on sm_80+). ``--ab`` tunes nothing: it times fixed block tiles
(``--ab 128x128x32,128x128x64``: block i x block j x k tile, 2x2 warps) with each number of
stages of ``--ab-stages`` (default 1,2,3,4: single-buffered, double-buffered, 3 and 4 stage
pipelines) on the same schedule, checks each against torch, and prints one JSON line per
kernel (a tile whose N copies of the staging exceed the shared-memory limit says so).
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


def workload(n, dtype="float16"):
    a = te.placeholder((n, n), dtype, name="A")
    b = te.placeholder((n, n), dtype, name="B")
    c = dense(a, b, out_dtype="float32")
    if dtype == "float32":
        return [a, b, c]
    return [a, b, te.compute(c.shape, lambda i, j: c[i, j].astype(dtype), name="D")]


def torch_ms(fn) -> float:
    """PyTorch's milliseconds per call of ``fn`` in the tensor-core benchmarks: 5 warm-up
    calls, then the mean of one window of 50 calls, timed with CUDA events."""
    from torch_timing import cuda_event_ms  # run from benchmarks/ (tests load this file alone)

    return cuda_event_ms(fn, warmup=5, number=50, repeat=1)


def fixed_state(task, block_i, block_j, k_tile, warps=(2, 2), seed=0):
    """The tensor-core sketch (double buffered) with the given block tile, warps and k tile,
    annotated with a seeded draw (unroll); not checked against the GPU's limits."""
    from autosched.search.tensor_core_default import fixed_tensor_core_state

    params = ansor.SearchParams(gpu_tensor_core_pipeline=2)
    return fixed_tensor_core_state(task, block_i, block_j, k_tile, warps, seed, params=params)


def ab_states(double, stages) -> list:
    """``(stages, state)`` of the double-buffered ``double`` given each number of ``stages``
    (1: single-buffered)."""
    from autosched.search.state_utils import with_pipeline_stages

    return [(n, double if n == 2 else with_pipeline_stages(double, n)) for n in stages]


def ab(args):
    """Fixed tiles, 1 to 4 stages of shared staging (module docstring)."""
    import torch

    from autosched.search.annotate_gpu import gpu_state_errors

    n = args.n
    task = ansor.SearchTask(ComputeDAG(workload(n)), target="cuda")
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (n, n)).astype("float16")
    b = rng.uniform(-1, 1, (n, n)).astype("float16")
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    want = torch.matmul(ta, tb.T).float().cpu().numpy()
    ms_torch = torch_ms(lambda: torch.matmul(ta, tb.T))
    for tile in args.ab.split(","):
        bi, bj, bk = (int(x) for x in tile.split("x"))
        double = fixed_state(task, bi, bj, bk)
        for depth, state in ab_states(double, args.ab_stages):
            res = {"tile": tile, "pipeline": depth}
            errors = gpu_state_errors(task, state)
            if errors:
                print(json.dumps(res | {"invalid": errors[0][:200]}))
                continue
            func = ansor.build(state, "cuda")
            out = np.zeros((n, n), np.float16)
            func(a, b, out)
            ms = func.time_evaluator(number=20, repeat=3)(a, b, out).median * 1e3
            res |= {"ours_ms": round(ms, 4), "torch_ms": round(ms_torch, 4),
                    "fraction_of_cublas": round(ms_torch / ms, 3),
                    "cp_async": "cp_async16(&" in func.get_source(),
                    "max_abs_err": float(np.abs(out.astype(np.float32) - want).max())}  # fmt: skip
            print(json.dumps(res))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--seconds", type=float, default=150)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--log", help="records (default tc_matmul.json, tc_matmul_float32[_tf32].json)")
    ap.add_argument("--resume", help="records of an earlier run of this tune to continue from")
    ap.add_argument("--dtype", choices=("float16", "float32"), default="float16")
    ap.add_argument("--tf32", action="store_true", help="float32 on TF32 tensor cores, both sides")
    ap.add_argument(
        "--pipeline",
        type=int,
        default=None,
        choices=(1, 2, 3, 4),
        help="most shared staging buffers of the tensor-core sketch (default: library's)",
    )
    ap.add_argument("--ab", help="time fixed tiles, e.g. 128x128x32,128x128x64, and tune nothing")
    ap.add_argument("--ab-stages", default="1,2,3,4", help="stages timed by --ab (1 to 4)")
    args = ap.parse_args()
    args.ab_stages = [int(x) for x in args.ab_stages.split(",")]
    if not set(args.ab_stages) <= {1, 2, 3, 4}:
        ap.error(f"--ab-stages {args.ab_stages}: each number of stages is 1, 2, 3 or 4")
    if args.tf32 and args.dtype != "float32":
        ap.error("--tf32 is for --dtype float32")
    if args.log is None:  # one log per precision: the trial counts stay apart
        suffix = "" if args.dtype == "float16" else f"_float32{'_tf32' if args.tf32 else ''}"
        args.log = f"tc_matmul{suffix}.json"
    if args.ab:
        ab(args)
        return
    import torch

    n = args.n
    target = "cuda -allow_tf32=1" if args.tf32 else "cuda"
    task = ansor.SearchTask(ComputeDAG(workload(n, args.dtype)), target=target)
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
    if args.pipeline is not None:
        params = ansor.SearchParams(gpu_tensor_core_pipeline=args.pipeline)
        callbacks = policy.init_search_callbacks if policy is not None else None
        policy = ansor.SketchPolicy(task, ansor.LGBModel(), params=params,
                                    init_search_callbacks=callbacks)  # fmt: skip
    task.tune(opts, search_policy=policy)
    tuned_s = time.time() - t0
    records = list(ansor.load_records(args.log))
    func = ansor.build(task.apply_best(args.log), target)
    src = func.get_source()
    if args.dtype == "float16" or args.tf32:
        assert "wmma::mma_sync" in src or "wgmma.mma_async" in src  # sm_90: either sketch
    if args.tf32:
        assert "precision::tf32" in src
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (n, n)).astype(args.dtype)
    b = rng.uniform(-1, 1, (n, n)).astype(args.dtype)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    torch.backends.cuda.matmul.allow_tf32 = False
    want = torch.matmul(ta.float(), tb.float().T).cpu().numpy()  # float32, TF32 off
    out = np.zeros((n, n), args.dtype)
    func(a, b, out)
    err = float(np.abs(out.astype(np.float32) - want).max())
    # The module's own timer (CUDA events around the launches; arguments copied before).
    ms_ours = func.time_evaluator(number=20, repeat=3)(a, b, out).median * 1e3
    flops = 2 * n**3
    res = {"n": n, "dtype": args.dtype, "tf32": args.tf32, "trials": len(records),
           "tune_s": round(tuned_s, 1), "ours_ms": round(ms_ours, 4),
           "ours_tflops": round(flops / ms_ours / 1e9, 1), "max_abs_err": err,
           "wgmma": "wgmma.mma_async" in src}  # fmt: skip
    # torch side by side: TF32 as asked (the compared figure), and TF32 off for scale.
    sides = [("torch", args.tf32)] + ([("torch_tf32_off", False)] if args.tf32 else [])
    for label, tf32 in sides:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ms = torch_ms(lambda: torch.matmul(ta, tb.T))
        res[f"{label}_ms"] = round(ms, 4)
        res[f"{label}_tflops"] = round(flops / ms / 1e9, 1)
        if label == "torch":
            res["fraction_of_cublas"] = round(ms / ms_ours, 3)
            got = torch.matmul(ta, tb.T).float().cpu().numpy()
            res["torch_max_abs_err"] = float(np.abs(got - want).max())
    torch.backends.cuda.matmul.allow_tf32 = False
    print(json.dumps(res))


if __name__ == "__main__":
    main()
