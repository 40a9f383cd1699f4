"""The main job until tuning exists: hand-scheduled kernels on every available backend."""

from __future__ import annotations

import time

import numpy as np

from codegen.target import Target
from tensorir.dag import ComputeDAG
from tensorir.interp import eval_dag

from .. import manual, workloads
from ..build_module import build
from ..suppressed import suppressed


def available_backends() -> list[str]:
    """Targets whose device can run code here ("llvm" always; "opencl"/"cuda" if present)."""
    from runtime import device

    out = ["llvm"]
    for kind in ("opencl", "cuda"):
        try:
            if device(kind, 0).exists:
                out.append(kind)
        except Exception:  # noqa: BLE001 - a missing driver just means the backend is absent
            suppressed(f"{kind} device probe", expected=Exception)
    return out


def _cases(target: str, size: int):
    mm = ComputeDAG(workloads.matmul(size, size, size))
    conv = ComputeDAG(workloads.conv2d_nhwc_bias_relu(1, 56, 56, 64, 64, 3, 3, 1, 1))
    if not Target(target).is_gpu:
        yield f"matmul {size}^3", mm, manual.matmul_cpu(mm)
        yield "conv2d 1x56x56x64 3x3 (+bias+relu)", conv, manual.conv2d_nhwc_cpu(conv)
    else:
        yield f"matmul {size}^3", mm, manual.matmul_gpu(mm)
        yield "conv2d 1x56x56x64 3x3 (+bias+relu)", conv, manual.conv2d_nhwc_gpu(conv)


def run_demo(size: int = 512, targets: list[str] | None = None, seed: int = 0) -> list[dict]:
    """Build, check against the reference interpreter and time each hand-written schedule."""
    rng = np.random.default_rng(seed)
    rows = []
    targets = targets or available_backends()
    print(f"backends: {', '.join(targets)}")
    print(f"{'target':8} {'operator':38} {'ms':>9} {'GFLOP/s':>9} {'max err':>9} {'build s':>8}")
    for target in targets:
        for label, dag, state in _cases(target, size):
            args = [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]
            ref = eval_dag(dag, args)
            outs = [np.empty(t.shape, t.dtype) for t in dag.output_tensors]
            t0 = time.perf_counter()
            func = build(state, target)
            build_s = time.perf_counter() - t0
            func(*args, *outs)
            err = max(float(np.max(np.abs(o - r))) for o, r in zip(outs, ref, strict=True))
            timer = func.time_evaluator(number=3, repeat=3, min_repeat_ms=50)
            sec = timer(*args, *outs).median
            gflops = dag.flop_count() / sec / 1e9
            print(f"{target:8} {label:38} {sec * 1e3:9.3f} {gflops:9.1f} {err:9.1e} {build_s:8.2f}")
            rows.append(dict(target=target, op=label, ms=sec * 1e3, gflops=gflops, err=err))
    return rows
