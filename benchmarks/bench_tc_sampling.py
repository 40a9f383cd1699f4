"""Tensor-core sampling on real networks: valid draws per GEMM shape (issue 28).

    python benchmarks/bench_tc_sampling.py --networks resnet-18:1,resnet-18:16 --draws 20

Runs without a GPU. Extracts the tasks of each network as a user would (float16 through
``to_mixed_precision`` for ``cuda -arch=sm_90``; float32 for ``cuda -arch=sm_90
-allow_tf32=1``), keeps one task per GEMM shape on which the tensor-core sketch fires, and
counts how many of ``--draws`` seeded draws (``sample_state_gpu``: tile sizes, pipeline depth,
binding, the GPU validity check) give a valid state. Prints a markdown table; tasks with a
dense, matmul or conv that the rule does not take are listed below it. Only public modules are
imported, so ``PYTHONPATH=<another checkout>`` measures that checkout the same way.
"""

from __future__ import annotations

import argparse
import random
import time
import warnings

NETWORK_KW = {"bert-base": {"seq_len": 128}}
PRECISIONS = {"fp16": "cuda -arch=sm_90", "tf32": "cuda -arch=sm_90 -allow_tf32=1"}


def _tensor_core_sketch(task):
    from autosched.search.sketch import generate_sketches

    for s in generate_sketches(task):
        if any(p == "tensor_core" for st in s.stages for _, p in st.pragmas):
            return s
    return None


def _gemm_key(task):
    """(kind, GEMM shape with K last) of the stage the tensor-core rule tiles."""
    from autosched.search.sketch_rules_tensor_core import tensor_core_gemm

    for op in task.compute_dag.ops:
        if tensor_core_gemm(op, ("float16", "bfloat16", "float32")) is not None:
            kind = "conv" if op.name == "conv2d_gemm" else "gemm"
            return kind, (*op.shape, op.reduce_axes[0].extent)
    return None


def valid_draws(task, sketch, draws: int, seed: int = 0) -> int:
    from autosched.search.annotate_gpu import gpu_context, sample_state_gpu
    from autosched.search.params import SearchParams

    ctx, rng = gpu_context(task, SearchParams()), random.Random(seed)
    return sum(sample_state_gpu(ctx, sketch, rng, task) is not None for _ in range(draws))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--networks", default="resnet-18:1,resnet-18:16,resnet-50:1,"
                        "resnet-50:16,bert-base:1", help="name:batch, comma-separated")  # fmt: skip
    parser.add_argument("--precisions", default="fp16,tf32")
    parser.add_argument("--draws", type=int, default=20)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # no cuda device here: the hardware defaults
    import autosched as ansor

    # One SM and 48 KiB of shared memory per block, as tests/autosched's GPU_HW.
    hw = ansor.HardwareParams(num_cores=1, max_shared_memory_per_block=49152)
    print("| network | precision | kind | GEMM (M, N, K; batch first) | valid draws | task |")
    print("| --- | --- | --- | --- | ---: | --- |")
    skipped = []
    for spec in args.networks.split(","):
        name, batch = spec.split(":")
        mod, params, _, _ = ansor.networks.get_network(
            name, int(batch), "NHWC", **NETWORK_KW.get(name, {})
        )
        for prec in args.precisions.split(","):
            if prec == "fp16":
                net, weights = ansor.to_mixed_precision(mod, "float16", params), None
            else:
                net, weights = mod, params
            t0 = time.perf_counter()
            tasks, _ = ansor.extract_tasks(net, weights, PRECISIONS[prec], hardware_params=hw)
            seen = set()
            for task in tasks:
                key, sketch = _gemm_key(task), _tensor_core_sketch(task)
                if key is None or sketch is None:
                    if any(w in task.desc for w in ("dense", "matmul", "conv")):
                        skipped.append(f"{name} b{batch} {prec}: {task.desc}")
                    continue
                if key in seen:
                    continue
                seen.add(key)
                ok = valid_draws(task, sketch, args.draws)
                print(f"| {name} b{batch} | {prec} | {key[0]} | {key[1]} | {ok}/{args.draws} "
                      f"| {task.desc[:40]} |", flush=True)  # fmt: skip
            print(f"<!-- {name} b{batch} {prec}: {time.perf_counter() - t0:.1f} s -->")
    for line in skipped:
        print(f"- no tensor-core sketch: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
