"""A tuned GPU network rebuilt from its log in a fresh process, as a user does, timed repeatedly.

    python benchmarks/bench_rebuild_gpu.py --log W/resnet-18-NHWC-B1-cuda-float16.json \\
        --network resnet-18 --precision float16
    python benchmarks/bench_rebuild_gpu.py --log L --torch-first resnet-18   # torch runs first

Builds ``--network`` with ``ApplyHistoryBest(--log)`` (nothing else in the process unless
``--torch-first`` asks for it), then times ``GraphModule.benchmark`` (median of 10 repeats of
at least 200 ms) ``--times`` times, reading the GPU's clocks, power and throttle reasons with
``nvidia-smi`` at each; then runs cuBLAS at full power for ``--burn`` seconds and times three
more; then times each kernel alone (``kernel_profile.py``). The question it answers: does the
network a user rebuilds run as fast as the one timed at the end of the tune
(benchmarks/RESULTS.md, session 13)? ``--torch-first context`` creates torch's CUDA context
first; ``--torch-first resnet-18`` also runs torchvision's resnet-18 in float16 20 times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
from gpu_precision import PRECISIONS, our_module, target_for  # run from benchmarks/
from kernel_profile import kernel_profile

import autosched as ansor
from tensorir.graph import get_network

_QUERY = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"


def gpu_clocks() -> str:
    """One ``nvidia-smi`` line for the GPU this process runs on (the first of
    ``CUDA_VISIBLE_DEVICES``): SM and memory clocks, power, temperature, throttle reasons."""
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    try:
        done = subprocess.run(
            ["nvidia-smi", f"--query-gpu={_QUERY}", "--format=csv,noheader", "-i", gpu],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        return done.stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        return f"nvidia-smi: {err}"


def run_torch_first(what: str) -> None:
    """Before our build: torch's CUDA context, or also an eager torchvision resnet-18."""
    import torch

    torch.zeros(1, device="cuda")
    if what == "resnet-18":
        import torchvision

        model = torchvision.models.resnet18().cuda().half().eval()
        x = torch.randn(1, 3, 224, 224, device="cuda").half()
        with torch.no_grad():
            for _ in range(20):
                model(x)
    torch.cuda.synchronize()


def burn(seconds: float) -> None:
    """float16 matmuls back to back for ``seconds``: the GPU at full power."""
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.matmul(a, a)
    torch.cuda.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log", required=True, help="the tuning log to build from")
    p.add_argument("--network", default="resnet-18")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--precision", choices=PRECISIONS, default="float16")
    p.add_argument("--times", type=int, default=6, help="timings before the burn")
    p.add_argument("--burn", type=float, default=8.0, help="seconds of cuBLAS (0: none)")
    p.add_argument("--torch-first", choices=("none", "context", "resnet-18"), default="none")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args()
    if not Path(args.log).exists():
        raise SystemExit(f"bench_rebuild_gpu: no log at {args.log}")

    if args.torch_first != "none":
        run_torch_first(args.torch_first)
    mod32, params32, shape, _ = get_network(args.network, batch_size=args.batch, layout="NHWC")
    mod, params = our_module(mod32, params32, args.precision)
    t0 = time.perf_counter()
    with ansor.ApplyHistoryBest(args.log):
        lib = ansor.build(mod, target_for(args.precision), params=params)
    module = ansor.GraphModule(lib)
    module.set_input("data", np.random.default_rng(0).uniform(-1, 1, shape).astype("float32"))
    module.run()
    row = {"network": args.network, "precision": args.precision, "torch_first": args.torch_first,
           "build_s": time.perf_counter() - t0, "timings": []}  # fmt: skip

    def time_once(note: str) -> None:
        ms = float(np.median(module.benchmark(repeat=10, min_repeat_ms=200).results)) * 1e3
        entry = {"s": round(time.perf_counter() - t0, 1), "ms": ms, "gpu": gpu_clocks(),
                 "note": note}  # fmt: skip
        row["timings"].append(entry)
        print(json.dumps(entry), flush=True)

    for _ in range(args.times):
        time_once("")
    if args.burn > 0:
        burn(args.burn)
        row["gpu_after_burn"] = gpu_clocks()
        for _ in range(3):
            time_once("after the burn")
    kernels = kernel_profile(module)
    row["kernel_sum_us"] = sum(k["us"] for k in kernels)
    row["kernels"] = [(k["name"], round(k["us"], 2)) for k in kernels]
    print(f"{args.network} {args.precision}: median "
          f"{np.median([t['ms'] for t in row['timings']]):.4f} ms over "
          f"{len(row['timings'])} timings; kernels alone {row['kernel_sum_us']:.1f} us",
          flush=True)  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
