"""A network on CUDA with and without CUDA graphs, in one process on one build.

Builds the network once (``--log``: tuning records to apply, else default schedules;
``--dtype float16``: ``to_mixed_precision`` first), checks one run against the graph reference,
then times ``GraphModule.benchmark`` replaying one captured CUDA graph and launching every
kernel from Python (``use_cuda_graph=False``, what ``AUTOSCHED_CUDA_GRAPH=0`` gives), and
prints one JSON row per network::

    python benchmarks/bench_cuda_graph.py --network bert-base \
        --log gpu-logs/bert-base-S128-B1-cuda.json
    python benchmarks/bench_cuda_graph.py --network resnet-18 --dtype float16
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

import autosched as ansor
from tensorir.graph import evaluate


def _inputs(name: str, shape) -> dict:
    rng = np.random.default_rng(0)
    if name.startswith("bert"):
        return {"input_ids": rng.integers(0, 30522, shape).astype("int64")}
    return {"data": rng.uniform(-1, 1, shape).astype("float32")}


def bench(name: str, log: str | None, dtype: str, repeat: int, seq_len: int) -> dict:
    kw = {"seq_len": seq_len} if name.startswith("bert") else {"layout": "NHWC"}
    mod, params, shape, _ = ansor.networks.get_network(name, 1, **kw)
    inputs = _inputs(name, shape)
    ref = evaluate(mod, inputs, params)
    ref = ref[0] if isinstance(ref, list) else ref
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # default schedules for untuned tasks: expected here
        with ansor.ApplyHistoryBest(log or []):
            if dtype == "float16":
                lib = ansor.build(ansor.to_mixed_precision(mod, "float16", params), "cuda")
            else:
                lib = ansor.build(mod, "cuda", params=params)
    row = {"network": name, "dtype": dtype, "log": log, "calls": len(lib.plan.calls),
           "build_s": round(time.perf_counter() - t0, 1)}  # fmt: skip
    for use_graph in (True, False):
        module = ansor.GraphModule(lib, use_cuda_graph=use_graph)
        for k, v in inputs.items():
            module.set_input(k, v)
        module.run()
        out = module.get_output(0).numpy().astype("float32")
        res = module.benchmark(repeat=repeat, min_repeat_ms=200)
        key = "graph" if use_graph else "plain"
        row[f"{key}_ms"] = float(np.median(res.results)) * 1e3
        row[f"{key}_rel_err"] = float(np.abs(out - ref).max() / np.abs(ref).max())
        if use_graph:
            runner = module.cuda_graph
            row["cuda_graph"] = repr(runner)
            row["graph_launches"] = len(runner._launches)
    row["plain_over_graph"] = row["plain_ms"] / row["graph_ms"]
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--network", default="resnet-18", help="comma-separated network names")
    p.add_argument("--log", help="tuning records to apply (default schedules otherwise)")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--out", help="append the rows as JSON lines here")
    args = p.parse_args()
    for name in args.network.split(","):
        row = bench(name, args.log, args.dtype, args.repeat, args.seq_len)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
