"""A TF32 network's error against float32 with its tensor-core weights stored as they are
(warpgroups truncate them) and rounded to TF32 on the host (the default since session 27:
autosched/network/tf32_weights.py), the same records built both ways in one process::

    cd benchmarks && python bench_tf32_weights.py --network resnet-18 \\
        --log ../W/resnet-18-NHWC-B1-cuda-tf32.json

Prints, for each build, the max error relative to the largest output on each seed's random
input (against the float32 numpy reference, as ``bench_gpu.py`` reports it) and its time.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import autosched as ansor
from autosched.network import tf32_weights
from tensorir.graph import evaluate, get_network


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """The largest absolute error over the largest reference magnitude."""
    return float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))


def build_and_check(mod, params, log: str, inputs, refs, rounded: bool) -> dict:
    """Build ``mod`` for ``cuda -allow_tf32=1`` from ``log`` with the weights rounded or not;
    its error on each input and its median time (ms)."""
    saved = tf32_weights.TF32_ROUND_WEIGHTS
    tf32_weights.TF32_ROUND_WEIGHTS = rounded
    try:
        with ansor.ApplyHistoryBest(log):
            lib = ansor.build(mod, "cuda -allow_tf32=1", params=params)
    finally:
        tf32_weights.TF32_ROUND_WEIGHTS = saved
    module = ansor.GraphModule(lib)
    errors = []
    for x, ref in zip(inputs, refs, strict=True):
        module.set_input("data", x)
        module.run()
        errors.append(relative_error(module.get_output(0).numpy(), ref))
    ms = float(np.median(module.benchmark(repeat=5, min_repeat_ms=100).results)) * 1e3
    return {"max_rel_err": errors, "ms": ms}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--network", default="resnet-18")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--log", required=True, help="TF32 tuning records to build the network from")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = p.parse_args()
    mod, params, shape, _ = get_network(args.network, batch_size=args.batch, layout="NHWC")
    inputs = [np.random.default_rng(s).uniform(-1, 1, shape).astype("float32")
              for s in args.seeds]  # fmt: skip
    refs = [evaluate(mod, {"data": x}, params) for x in inputs]
    rows = {}
    for name, rounded in (("as they are", False), ("rounded", True)):
        rows[name] = build_and_check(mod, params, args.log, inputs, refs, rounded)
        errs = ", ".join(f"{e:.2e}" for e in rows[name]["max_rel_err"])
        print(f"{args.network} TF32, weights {name:11s}: max relative error {errs} "
              f"(seeds {args.seeds}), {rows[name]['ms']:.4f} ms")  # fmt: skip
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
