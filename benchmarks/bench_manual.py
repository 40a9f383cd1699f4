"""Hand-written schedules vs numpy / PyTorch and vs the unscheduled lowering, side by side.

    python benchmarks/bench_manual.py            # matmul 1024^3 and conv2d 1x56x56x64 3x3 pad 1
    python benchmarks/bench_manual.py --quick    # smaller sizes, for a smoke run

Every figure is measured in this one run, interleaved in turns so that noise from a shared machine
hits all candidates alike; ratios are what to read. The 1-thread figures come from a child process
with AUTOSCHED_NUM_THREADS=1, alternated twice with the full run (best of each kept).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np
from wall_timing import median_s  # run from benchmarks/

import autosched as ansor
from autosched import manual, workloads
from tensorir.interp import eval_dag


def _kernel_timer(state, args, outs):
    func = ansor.build(state, target="llvm")
    func(*args, *outs)
    return lambda: func(*args, *outs)


def _im2col_conv(data, weight, bias, pad):
    n, h, w, ci = data.shape
    kh, kw, _, co = weight.shape
    padded = np.pad(data, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    cols = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(1, 2))
    cols = cols.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * w, kh * kw * ci)
    out = cols @ weight.reshape(kh * kw * ci, co) + bias.reshape(1, co)
    return np.maximum(out, 0).reshape(n, h, w, co)


def _torch_conv(data, weight, bias, pad):
    try:
        import torch
    except ImportError:
        return None
    x = torch.from_numpy(data).permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
    wt = torch.from_numpy(weight).permute(3, 2, 0, 1).contiguous()
    b = torch.from_numpy(bias.reshape(-1))

    def run():
        with torch.no_grad():
            return torch.relu(torch.nn.functional.conv2d(x, wt, b, padding=pad))

    return run


def measure(size: int, conv_hw: int, with_naive: bool) -> dict:
    rng = np.random.default_rng(0)
    out: dict[str, float] = {}
    mm = ansor.ComputeDAG(workloads.matmul(size, size, size))
    a, b = (rng.uniform(-1, 1, (size, size)).astype("float32") for _ in range(2))
    c = np.empty((size, size), "float32")
    hand_mm = _kernel_timer(manual.matmul_cpu(mm), [a, b], [c])
    assert np.allclose(c, a @ b, rtol=1e-3, atol=1e-3), "hand matmul is wrong"
    cands = {"matmul/hand": hand_mm, "matmul/numpy": lambda: np.matmul(a, b, out=c)}
    if with_naive:
        cands["matmul/unscheduled"] = _kernel_timer(mm, [a, b], [c])

    conv = ansor.ComputeDAG(
        workloads.conv2d_nhwc_bias_relu(1, conv_hw, conv_hw, 64, 64, 3, 3, 1, 1)
    )
    cargs = [rng.uniform(-1, 1, t.shape).astype("float32") for t in conv.input_tensors]
    cout = np.empty(conv.output_tensors[0].shape, "float32")
    hand_conv = _kernel_timer(manual.conv2d_nhwc_cpu(conv), cargs, [cout])
    ref = eval_dag(conv, cargs)[0]
    assert np.allclose(cout, ref, rtol=1e-3, atol=1e-3), "hand conv2d is wrong"
    cands["conv2d/hand"] = hand_conv
    cands["conv2d/numpy-im2col"] = lambda: _im2col_conv(*cargs, 1)
    torch_run = _torch_conv(*cargs, 1)
    if torch_run is not None:
        cands["conv2d/pytorch"] = torch_run
    if with_naive:
        cands["conv2d/unscheduled"] = _kernel_timer(conv, cargs, [cout])
    # Interleave: every candidate once per turn, three turns, keep each one's best turn.
    best = {k: float("inf") for k in cands}
    for _ in range(3):
        for name, fn in cands.items():
            best[name] = min(best[name], median_s(fn, 0.2, min_calls=3, max_calls=10))
    flops = {"matmul": 2.0 * size**3, "conv2d": mm_flops(conv)}
    for name, sec in best.items():
        out[name] = sec
        out[name + ":gflops"] = flops[name.split("/")[0]] / sec / 1e9
    return out


def mm_flops(dag) -> float:
    return float(dag.flop_count())


def _keep_best(best: dict, new: dict) -> None:
    """Merge ``new`` into ``best``: the lower time, and the matching GFLOP/s."""
    for key, sec in new.items():
        if ":" not in key and sec < best.get(key, float("inf")):
            best[key] = sec
            best[key + ":gflops"] = new[key + ":gflops"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    size, hw = (256, 28) if args.quick else (1024, 56)
    if args.child:  # single-thread measurement, hand schedules only
        print(json.dumps(measure(size, hw, with_naive=False)))
        return
    env = dict(os.environ, AUTOSCHED_NUM_THREADS="1")
    child_cmd = [sys.executable, __file__, "--child", *(["--quick"] if args.quick else [])]
    # Alternate the 1-thread child and the full run twice and keep each figure's best, so that
    # a burst of load on a shared machine does not land on one side of the ratio only.
    one: dict[str, float] = {}
    full: dict[str, float] = {}
    for _ in range(2):
        child = subprocess.run(child_cmd, env=env, capture_output=True, text=True, check=True)
        _keep_best(one, json.loads(child.stdout.strip().splitlines()[-1]))
        _keep_best(full, measure(size, hw, with_naive=not full))
    print(f"threads: {os.cpu_count()} (child process for 1 thread); sizes: matmul {size}^3, "
          f"conv2d 1x{hw}x{hw}x64 3x3x64x64 pad 1 +bias+relu")  # fmt: skip
    print(f"{'candidate':28} {'ms':>10} {'GFLOP/s':>9}")
    for name in sorted(k for k in full if ":" not in k):
        print(f"{name:28} {full[name] * 1e3:10.3f} {full[name + ':gflops']:9.1f}")
    for name in ("matmul/hand", "conv2d/hand"):
        print(f"{name + ' 1 thread':28} {one[name] * 1e3:10.3f} {one[name + ':gflops']:9.1f}")
    print()
    print(f"hand matmul GFLOP/s / numpy's:    {full['matmul/numpy'] / full['matmul/hand']:.2f}")
    for ref in ("conv2d/numpy-im2col", "conv2d/pytorch", "conv2d/unscheduled"):
        if ref in full:
            ratio = full[ref] / full["conv2d/hand"]
            print(f"hand conv2d speedup over {ref.split('/')[1]:12} {ratio:.2f}x")
    if "matmul/unscheduled" in full:
        print(f"hand matmul speedup over unscheduled: "
              f"{full['matmul/unscheduled'] / full['matmul/hand']:.1f}x")  # fmt: skip
    for op in ("matmul", "conv2d"):
        print(f"{op} 2 threads / 1 thread: {one[op + '/hand'] / full[op + '/hand']:.2f}x")


if __name__ == "__main__":
    main()
