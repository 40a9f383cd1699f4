"""A zoo transformer tuned on an NVIDIA GPU vs PyTorch's ``torch.compile``, side by side.

    python benchmarks/bench_transformer_gpu.py --network bert-base --seconds 540
    python benchmarks/bench_transformer_gpu.py --network bert-base --no-tune   # re-time
    python benchmarks/bench_transformer_gpu.py --no-tune --profile   # + per-kernel times
    python benchmarks/bench_transformer_gpu.py --precision float16 --seconds 540   # issue 28

Our side: ``get_network(name, 1, seq_len=S)`` (tensorir/graph/zoo/transformer.py, random
weights), tuned on ``cuda`` with the library's defaults and only a time budget, resuming from
the log in ``--work-dir`` (so a 20-minute tune runs as pieces of a few minutes), built with the
history best, checked against the numpy reference and timed (``GraphModule.benchmark``).
PyTorch's side: transformers' ``BertModel`` / ``GPT2Model`` of the same configuration with its
own random weights (the latency does not depend on them), eager and
``torch.compile(mode="reduce-overhead")``, timed with CUDA events in the same process.

``--precision`` sets both sides' arithmetic as ``bench_gpu.py`` does (``gpu_precision.py``):
``float32`` with TF32 off (the default), ``tf32``, ``float16`` / ``bfloat16`` (ours through
``autosched.to_mixed_precision``: dense and batch_matmul in 16 bits accumulating in float32,
softmax and layer norm in float32; PyTorch's model cast to that dtype). Each precision tunes
into its own log; the error is always against the float32 numpy reference.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

import numpy as np
from gpu_precision import (  # run from benchmarks/
    PRECISIONS,
    log_suffix,
    our_module,
    set_torch_tf32,
    target_for,
    torch_dtype,
)
from kernel_profile import kernel_profile, print_profile
from torch_timing import cuda_event_ms

import autosched as ansor
from tensorir.graph import evaluate


def torch_side(name: str, seq: int, ids: np.ndarray, precision: str = "float32") -> dict:
    """Eager and torch.compile(reduce-overhead) latencies of the transformers model.

    :func:`main` calls it before our tune: timed after one in the same process, torch.compile's
    figure moved by 1.6x between identical calls (RESULTS.md, session 9)."""
    import torch
    import transformers as tf

    set_torch_tf32(torch, precision)
    if name.startswith("bert"):
        big = name == "bert-base"
        cfg = tf.BertConfig(**({} if big else dict(num_hidden_layers=2, hidden_size=128,
                                                    num_attention_heads=2,
                                                    intermediate_size=512)))  # fmt: skip
        model = tf.BertModel(cfg, add_pooling_layer=False)
    elif name == "gpt2":
        model = tf.GPT2Model(tf.GPT2Config())
    else:
        raise KeyError(f"no PyTorch counterpart for {name}")
    model = model.cuda().eval()
    dtype = torch_dtype(torch, precision)
    if dtype is not None:
        model = model.to(dtype)
    x = torch.from_numpy(ids).cuda()
    row = {}
    with torch.no_grad():
        row["torch_eager_ms"] = cuda_event_ms(lambda: model(input_ids=x))
        t0 = time.perf_counter()
        compiled = torch.compile(model, mode="reduce-overhead")
        for _ in range(3):
            compiled(input_ids=x)
        row["torch_compile_s"] = time.perf_counter() - t0
        row["torch_compile_ms"] = cuda_event_ms(lambda: compiled(input_ids=x))
    return row


def cublas_dense_ms(shapes) -> dict:
    """torch.mm (cuBLAS, fp32, TF32 off) of each (M, N, K): the dense kernels' yardstick."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    out = {}
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda")
        w = torch.randn(n, k, device="cuda")
        ms = cuda_event_ms(lambda a=a, w=w: torch.nn.functional.linear(a, w), 100.0)
        out[f"{m}x{n}x{k}"] = {"us": ms * 1e3, "tflops": 2 * m * n * k / ms / 1e9}
    return out


# Builds of the same tuning log with the GPU partition's transformer passes
# (tensorir/graph/passes/transformer.py) changed: what each one is worth, side by side.
# "no-split-k" turns split_k_dense off (AUTOSCHED_SPLIT_K_DENSE=0; its tasks need tuning with it
# off too), "relay-partition" turns the others off (Relay's groups: the tasks before them).
_IDENTITY = {
    "combine_parallel_dense": lambda func: func,
    "fuse_layout_producers": lambda func, groups: groups,
}
VARIANTS = {
    "no-split-k": ({"AUTOSCHED_SPLIT_K_DENSE": "0"}, ()),
    "relay-partition": (
        {"AUTOSCHED_SPLIT_K_DENSE": "0"},
        ("combine_parallel_dense", "fuse_layout_producers"),
    ),
}


def build_and_time(
    mod, params, log: Path, ids, ref, variant=({}, ()), target: str = "cuda"
) -> tuple:
    """Build for ``target`` with the log's best records (``variant``: environment variables to
    set, passes to turn off), check against ``ref``, time; returns the row, the GraphModule and
    the library."""
    import os

    from tensorir.graph import passes

    environ, off = variant
    saved = {n: getattr(passes, n) for n in off}
    saved_env = {k: os.environ.get(k) for k in environ}
    try:
        os.environ.update(environ)
        for n in off:
            setattr(passes, n, _IDENTITY[n])
        with ansor.ApplyHistoryBest(str(log) if log.exists() else []):
            lib = ansor.build(mod, target, params=params)
    finally:
        for n, fn in saved.items():
            setattr(passes, n, fn)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    module = ansor.GraphModule(lib)
    module.set_input("input_ids", ids)
    module.run()
    out = module.get_output(0).numpy()
    ms = float(np.median(module.benchmark(repeat=10, min_repeat_ms=200).results)) * 1e3
    runner = module.cuda_graph
    graph = (runner.reason or f"captures={runner.captures}") if runner else None
    row = {"ours_ms": ms, "calls": len(module.plan.calls), "cuda_graph": graph,
           "max_rel_err": float(np.abs(out - ref).max() / np.abs(ref).max())}  # fmt: skip
    return row, module, lib


def our_network(name: str, seq: int, precision: str) -> dict:
    """Our side of ``precision``: ``mod`` / ``params`` to tune and build for ``target``, the
    float32 ``mod32`` / ``params32`` of the reference, the input ``shape`` and the log's
    ``log_name`` (one log per precision)."""
    mod32, params32, shape, _ = ansor.networks.get_network(name, 1, seq_len=seq)
    mod, params = our_module(mod32, params32, precision)
    return {"mod": mod, "params": params, "mod32": mod32, "params32": params32, "shape": shape,
            "target": target_for(precision),
            "log_name": f"{name}-S{seq}-B1-cuda{log_suffix(precision)}.json"}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--network", default="bert-base")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--precision", choices=PRECISIONS, default="float32")
    p.add_argument("--seconds", type=float, default=0, help="tuning budget of this run")
    p.add_argument("--no-tune", action="store_true")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument(
        "--cold-cache", action="store_true",
        help="time candidates after an L2 flush (enable_gpu_cache_flush); not the default",
    )  # fmt: skip
    p.add_argument("--work-dir", default="bench-gpu")
    p.add_argument("--out", help="write the row as JSON here")
    p.add_argument("--profile", action="store_true", help="print every kernel's time too")
    p.add_argument(
        "--simt-double-buffer",
        action="store_true",
        help="tune with SearchParams(gpu_simt_double_buffer=True) (float32 dense kernels)",
    )
    off = ", ".join(VARIANTS)
    p.add_argument("--variants", action="store_true", help=f"also time the builds {off}")
    args = p.parse_args()

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    name, seq = args.network, args.seq_len
    precision = args.precision
    ours = our_network(name, seq, precision)
    mod, params, target = ours["mod"], ours["params"], ours["target"]
    mod32, params32, shape = ours["mod32"], ours["params32"], ours["shape"]
    log = work / ours["log_name"]
    tasks, weights = ansor.extract_tasks(mod, params, target)
    print(f"[{name}] {len(tasks)} tasks, weights sum {sum(weights)}", flush=True)
    ids = np.random.default_rng(0).integers(0, 30522, shape).astype("int64")
    torch_row = {} if args.no_torch else torch_side(name, seq, ids, precision)
    tune_s = 0.0
    if args.seconds and not args.no_tune:
        tuner = ansor.TaskScheduler(
            tasks, weights, load_log_file=str(log) if log.exists() else None
        )
        t0 = time.perf_counter()
        double = args.simt_double_buffer
        search = ansor.SearchParams(gpu_simt_double_buffer=True) if double else None
        # --cold-cache: rank candidates by runs after an L2 flush (docs/gpu.md, "Warm and cold
        # timing"), three single runs each; else the library's default runner.
        runner = (
            ansor.LocalRunner(repeat=3, enable_gpu_cache_flush=True)
            if args.cold_cache
            else contextlib.nullcontext("local")
        )
        with runner as measure_with:
            tuner.tune(
                ansor.TuningOptions(
                    max_tuning_seconds=args.seconds,
                    measure_callbacks=[ansor.RecordToFile(str(log))],
                    runner=measure_with,
                ),
                search_policy_params=search,
            )
        tune_s = time.perf_counter() - t0
    ref = evaluate(mod32, {"input_ids": ids}, params32)  # float32: every precision's reference
    built, module, lib = build_and_time(mod, params, log, ids, ref, target=target)
    records = sum(1 for _ in ansor.load_records(str(log))) if log.exists() else 0
    row = {"network": name, "seq_len": seq, "precision": precision, "records": records,
           "tune_s_this_run": tune_s}  # fmt: skip
    row.update(built)
    ours_ms = row["ours_ms"]
    print(json.dumps(row), flush=True)
    if args.profile:
        plain = ansor.GraphModule(lib, use_cuda_graph=False)
        plain.set_input("input_ids", ids)
        plain.run()
        timing = plain.benchmark(repeat=10, min_repeat_ms=200).results
        row["ours_no_cuda_graph_ms"] = float(np.median(timing)) * 1e3
        rows = kernel_profile(module)
        row["profile"] = print_profile(rows)
        row["kernels"] = rows
        if not args.no_torch:
            h = 768 if name != "bert-tiny" else 128
            row["cublas"] = cublas_dense_ms([(seq, n, k) for n, k in (
                (h, h), (3 * h, h), (4 * h, h), (h, 4 * h))])  # fmt: skip
            print(json.dumps(row["cublas"]), flush=True)
    if args.variants:
        for variant, change in VARIANTS.items():
            row[variant] = build_and_time(mod, params, log, ids, ref, change, target)[0]
            print(variant, json.dumps(row[variant]), flush=True)
    if not args.no_torch:
        row.update(torch_row)
        row["speedup_vs_compile"] = row["torch_compile_ms"] / ours_ms
    print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
