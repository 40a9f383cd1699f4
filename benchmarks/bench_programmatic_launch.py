"""One network build on CUDA, its graph with plain and with programmatic kernel edges.

Builds the network once from a tuning log (as ``bench_gpu.py`` does: NHWC, ``--precision``),
then times ``GraphModule.benchmark`` with the captured CUDA graph's kernel-to-kernel edges
plain (``AUTOSCHED_PROGRAMMATIC_LAUNCH=0``) and programmatic (the default on sm_90), the graph
captured again before each, interleaved ``--rounds`` times, and checks that both give the same
output bit for bit (docs/gpu.md, "Programmatic dependent launch")::

    cd benchmarks && python bench_programmatic_launch.py --network resnet-50 --batch 1 \\
        --precision float16 --log ../W/resnet-50-NHWC-B1-cuda-float16.json

Prints one line per edge kind (its timings and median) and the ratio; needs an sm_90 GPU for
programmatic edges (elsewhere both kinds are plain, and it says so).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from gpu_precision import PRECISIONS, our_module, target_for  # run from benchmarks/

import autosched as ansor
from runtime.cuda_graph import PROGRAMMATIC_ENV
from tensorir.graph import get_network


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--network", default="resnet-18")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--precision", choices=PRECISIONS, default="float16")
    p.add_argument("--log", required=True, help="tuning records to build the network from")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()

    mod32, params32, shape, _ = get_network(args.network, batch_size=args.batch, layout="NHWC")
    mod, params = our_module(mod32, params32, args.precision)
    with ansor.ApplyHistoryBest(args.log):
        lib = ansor.build(mod, target_for(args.precision), params=params)
    module = ansor.GraphModule(lib)
    module.set_input("data", np.random.default_rng(0).uniform(-1, 1, shape).astype("float32"))
    graph = module._cuda_graph
    if graph is None:
        raise SystemExit("bench_programmatic_launch: this build has no CUDA graph (a CUDA device?)")
    times, outputs = {"plain": [], "programmatic": []}, {}
    for _ in range(args.rounds):
        for kind in times:
            os.environ[PROGRAMMATIC_ENV] = "1" if kind == "programmatic" else "0"
            graph.programmatic_reason = None  # decide again under the new setting
            graph.invalidate()
            module.run()
            outputs[kind] = module.get_output(0).numpy()
            result = module.benchmark(repeat=10, min_repeat_ms=200)
            times[kind].append(float(np.median(result.results)) * 1e3)
        print(repr(graph), flush=True)
    name = f"{args.network} B{args.batch} {args.precision}"
    for kind, ms in times.items():
        print(
            f"{name} {kind:12s}: {' '.join(f'{t:.4f}' for t in ms)}  median {np.median(ms):.4f} ms"
        )
    ratio = np.median(times["plain"]) / np.median(times["programmatic"])
    same = np.array_equal(outputs["plain"], outputs["programmatic"])
    print(f"plain / programmatic: {ratio:.3f}x; outputs bitwise equal: {same}")


if __name__ == "__main__":
    main()
