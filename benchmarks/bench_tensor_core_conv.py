"""A resnet 3x3 conv2d in fp16 (NHWC, fp32 accumulation, + bias + relu, fp16 output) tuned with
the library's defaults as an implicit GEMM on tensor cores (tensorir.ops.conv2d_gemm) against
torch's cuDNN conv2d fp16 (channels_last) in the same process, both timed with CUDA events.

    python benchmarks/bench_tensor_core_conv.py [--seconds 120] [--trials 100] [--hw 56] [--c 64]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from bench_tensor_core import torch_ms

import autosched as ansor
from tensorir.dag import ComputeDAG
from tensorir.ops import NameScope, compute_op
from tensorir.ops.conv2d_gemm import conv2d_implicit_gemm


def workload(hw, c):
    scope = NameScope()
    x = scope.placeholder((1, hw, hw, c), "float16", name="data")
    w = scope.placeholder((3, 3, c, c), "float16", name="kernel")
    b = scope.placeholder((c,), "float16", name="bias")
    with scope:
        y = conv2d_implicit_gemm(x, w, 1, 1, 1, "NHWC", "float32")
    y = compute_op("cast", [y], {"dtype": "float16"}, name_scope=scope)
    y = compute_op("nn.bias_add", [y, b], {"axis": 3}, name_scope=scope)
    return [x, w, b, compute_op("nn.relu", [y], {}, name_scope=scope)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hw", type=int, default=56)
    ap.add_argument("--c", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--log", default="tc_conv.json")
    args = ap.parse_args()
    import torch

    hw, c = args.hw, args.c
    task = ansor.SearchTask(ComputeDAG(workload(hw, c)), target="cuda")
    t0 = time.time()
    opts = ansor.TuningOptions(
        num_measure_trials=args.trials,
        max_tuning_seconds=args.seconds,
        measure_callbacks=[ansor.RecordToFile(args.log)],
        verbose=1,
    )
    task.tune(opts)
    tuned_s = time.time() - t0
    func = ansor.build(task.apply_best(args.log), "cuda")
    assert "wmma::mma_sync" in func.get_source()
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, hw, hw, c)).astype("float16")
    w = rng.uniform(-0.2, 0.2, (3, 3, c, c)).astype("float16")
    b = rng.uniform(-1, 1, (c,)).astype("float16")
    out = np.zeros((1, hw, hw, c), np.float16)
    func(x, w, b, out)
    nhwc = torch.channels_last
    tx = torch.from_numpy(x).cuda().permute(0, 3, 1, 2).contiguous(memory_format=nhwc)
    tw = torch.from_numpy(w).cuda().permute(3, 2, 0, 1).contiguous(memory_format=nhwc)
    tb = torch.from_numpy(b).cuda()

    def torch_conv():
        return torch.relu(torch.nn.functional.conv2d(tx, tw, tb, padding=1))

    want = torch_conv().permute(0, 2, 3, 1).float().cpu().numpy()
    err = float(np.abs(out.astype(np.float32) - want).max())
    ms_ours = func.time_evaluator(number=50, repeat=3)(x, w, b, out).median * 1e3
    ms_torch = torch_ms(torch_conv)
    flops = 2 * hw * hw * c * c * 9
    res = {"hw": hw, "c": c, "tune_s": round(tuned_s, 1),
           "ours_ms": round(ms_ours, 4), "torch_ms": round(ms_torch, 4),
           "ours_tflops": round(flops / ms_ours / 1e9, 2),
           "speed_vs_cudnn": round(ms_torch / ms_ours, 3), "max_abs_err": err}  # fmt: skip
    print(json.dumps(res))


if __name__ == "__main__":
    main()
