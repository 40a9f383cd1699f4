"""PyTorch's side of a zoo network kernel by kernel: which CUDA kernels eager PyTorch and
``torch.compile`` run, how often and for how long, to set beside our per-task times.

    python benchmarks/torch_kernel_table.py --network resnet-50 --batch 16 --precision float16

Each side runs 5 times to warm, then 20 times under ``torch.profiler`` (CUDA activity only).
``torch.compile`` runs in its default mode, without a CUDA graph, so that every kernel shows.
Kernels are summed by name and printed per run, longest first. A first line gives the total.
The network is the one ``bench_gpu.py`` times, translated by ``torch_graph.torch_function``
(channels-last, the precision's dtype).
"""

from __future__ import annotations

import argparse

import numpy as np
from gpu_precision import PRECISIONS, set_torch_tf32, torch_dtype  # run from benchmarks/


def kernel_table(events, runs: int) -> list[tuple[str, float, float]]:
    """``(name, us per run, calls per run)`` of the CUDA events, longest first.

    ``events`` are profiler events with ``name``, ``device_type.name`` and ``device_time`` (us).
    """
    by_name: dict[str, list[float]] = {}
    for e in events:
        if e.device_type.name != "CUDA":
            continue
        row = by_name.setdefault(e.name, [0.0, 0.0])
        row[0] += e.device_time
        row[1] += 1
    rows = [(name, us / runs, n / runs) for name, (us, n) in by_name.items()]
    return sorted(rows, key=lambda r: -r[1])


def profile_runs(fn, x, torch, runs: int = 20, warm: int = 5) -> list:
    """The profiler events of ``runs`` calls of ``fn(x)`` after ``warm`` calls."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        for _ in range(warm):
            fn(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(runs):
                fn(x)
            torch.cuda.synchronize()
    return list(prof.events())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--network", default="resnet-50")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--precision", choices=PRECISIONS, default="float16")
    p.add_argument("--runs", type=int, default=20)
    args = p.parse_args()
    import torch
    from torch_graph import torch_function

    from tensorir.graph import get_network

    set_torch_tf32(torch, args.precision)
    mod, params, shape, _ = get_network(args.network, batch_size=args.batch, layout="NCHW")
    dtype = torch_dtype(torch, args.precision)
    fn = torch_function(mod, params, "cuda", dtype=dtype)
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype("float32")
    x = torch.from_numpy(x).cuda()
    x = (x if dtype is None else x.to(dtype)).contiguous(memory_format=torch.channels_last)
    for label, f in (("eager", fn), ("torch.compile", torch.compile(fn))):
        rows = kernel_table(profile_runs(f, x, torch, args.runs), args.runs)
        total, calls = sum(r[1] for r in rows), sum(r[2] for r in rows)
        print(f"== {label}: {total:.1f} us of kernels a run, {calls:.0f} kernels", flush=True)
        for name, us, n in rows:
            print(f"{us:8.1f} us {n:5.1f}x {us / n:7.2f} us each  {name[:150]}")


if __name__ == "__main__":
    main()
