"""Auto-scheduled kernels and resnet-18 on an NVIDIA GPU vs PyTorch (cuBLAS / cuDNN), side by side.

    python benchmarks/bench_gpu.py --trials 64                     # the six operators
    python benchmarks/bench_gpu.py --ops none --network resnet-18,mobilenet --network-seconds 600
    python benchmarks/bench_gpu.py --no-tune                       # re-time from the logs
    python benchmarks/bench_gpu.py --ops none --network resnet-18 --network-seconds 300 \
        --precision float16                                        # issue 28's precisions

Every tuning run appends to the logs in ``--work-dir`` and resumes from them, so a long tune
runs as several calls of a few minutes each (also on another machine: copy the folder).
``--network-seconds`` is this run's budget; ``--total-seconds`` is one budget over all runs on
the log (a ledger beside it, ``tune_ledger.py``), and the network is then built from the records
of those seconds only, so a call stopped at its time limit neither loses nor adds tuning time.
PyTorch runs fp32 with TF32 off (``allow_tf32 = False`` for matmul and cuDNN) and NHWC
(channels_last) convolutions; kernels of both sides are timed with CUDA events after warm-up.
resnet-18 is compared with PyTorch eager, with PyTorch replaying a captured CUDA graph and with
``torch.compile(mode="reduce-overhead")``.

``--precision`` sets both sides' arithmetic for the networks: ``float16`` / ``bfloat16`` are
ours through ``autosched.to_mixed_precision`` (16-bit convolutions and dense accumulating in
float32) against PyTorch with 16-bit weights and input (``model.half()``, what PyTorch users run
for speed); ``tf32`` is float32 with TF32 allowed on both sides (ours: target
``cuda -allow_tf32=1``; PyTorch: ``allow_tf32 = True`` for matmul and cuDNN, its default for
convolutions). Each precision tunes into its own log.
"""

from __future__ import annotations

import argparse
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
from torch_timing import cuda_event_ms, cuda_graph
from tune_ledger import TuneLedger, records_within

import autosched as ansor
from autosched import workloads
from autosched.measure import MeasureErrorNo
from tensorir.interp import eval_dag

# name -> (tensors of our DAG, PyTorch version taking the same numpy arrays moved to the GPU)
OPS = {
    "matmul": lambda: workloads.matmul(1024, 1024, 1024),
    "dense": lambda: workloads.dense_bias(1, 512, 1000),
    "conv2d_56": lambda: workloads.conv2d_nhwc(1, 56, 56, 64, 64, 3, 3, 1, 1),
    "conv2d_14s2": lambda: workloads.conv2d_nhwc(1, 14, 14, 256, 512, 3, 3, 2, 1),
    "conv2d_7": lambda: workloads.conv2d_nhwc(1, 7, 7, 512, 512, 3, 3, 1, 1),
    "depthwise": lambda: workloads.depthwise_conv2d_nhwc(1, 112, 112, 32),
}


def _torch_op(name, torch, args):
    """A zero-argument PyTorch callable computing op ``name`` on ``args`` (on the GPU)."""
    F = torch.nn.functional
    t = [torch.from_numpy(a).cuda() for a in args]
    if name == "matmul":
        return lambda: torch.matmul(t[0], t[1])
    if name == "dense":
        return lambda: F.linear(t[0], t[1], t[2])
    if name.startswith("conv2d") or name == "depthwise":
        stride = 2 if name == "conv2d_14s2" else 1
        x = t[0].permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
        if name == "depthwise":  # our kernel is HWC1 (workloads.depthwise_conv2d_nhwc)
            w = t[1].permute(2, 3, 0, 1).contiguous(memory_format=torch.channels_last)
            return lambda: F.conv2d(x, w, None, 1, 1, 1, x.shape[1])
        w = t[1].permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)  # HWIO->OIHW
        return lambda: F.conv2d(x, w, None, stride, 1)
    raise KeyError(name)


def _count_records(log: Path) -> int:
    return sum(1 for _ in ansor.load_records(str(log))) if log.exists() else 0


def bench_op(name: str, args, work: Path, torch) -> dict:
    dag = ansor.ComputeDAG(OPS[name]())
    task = ansor.SearchTask(dag, target="cuda", desc=name)
    log = work / f"{name}.json"
    tune_s = 0.0
    if args.trials > 0 and not args.no_tune:
        done = _count_records(log)
        todo = max(0, args.trials - done)
        if todo:
            policy = ansor.SketchPolicy(
                task, ansor.LGBModel(), seed=0, verbose=1,
                init_search_callbacks=[ansor.PreloadMeasuredStates(str(log))] if done else None,
            )  # fmt: skip
            with ansor.LocalRPCMeasureContext(min_repeat_ms=args.min_repeat_ms) as ctx:
                options = ansor.TuningOptions(
                    num_measure_trials=todo, runner=ctx.runner,
                    measure_callbacks=[ansor.RecordToFile(str(log))],
                )  # fmt: skip
                t0 = time.perf_counter()
                task.tune(options, policy)
                tune_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]
    out = np.full(dag.output_tensors[0].shape, np.nan, "float32")
    func = ansor.build(task.apply_best(str(log)), "cuda")
    func(*inputs, out)
    err = float(np.max(np.abs(out - eval_dag(dag, inputs)[0])))
    ours_ms = func.time_evaluator(number=1, repeat=5, min_repeat_ms=args.min_repeat_ms)(
        *inputs, out
    ).median * 1e3  # fmt: skip
    torch_ms = cuda_event_ms(_torch_op(name, torch, inputs), args.min_repeat_ms)
    n_records = _count_records(log)
    row = {
        "op": name,
        "ours_ms": ours_ms,
        "torch_ms": torch_ms,
        "max_abs_err": err,
        "gflops": dag.flop_count() / ours_ms / 1e6,
        "records": n_records,
        "tune_s": tune_s,
    }
    print(json.dumps(row), flush=True)
    return row


def _timeouts(log: Path) -> tuple[int, int]:
    """(build timeouts, records) in ``log``."""
    if not log.exists():
        return 0, 0
    codes = [res.error_no for _, res in ansor.load_records(str(log))]
    return sum(c == MeasureErrorNo.BUILD_TIMEOUT for c in codes), len(codes)


def torch_network(name: str, precision: str, x: np.ndarray, args, torch) -> dict:
    """PyTorch's side of a network: eager, a captured CUDA graph and ``torch.compile``
    (reduce-overhead), timed before our tune so that nothing of ours runs beside it (after a
    tune in the same process torch.compile's figure moved from 0.25 to 0.40 ms between
    identical calls: RESULTS.md, session 9). ``compiled_again`` re-times the compiled model
    later (None with ``--no-torch-compile``)."""
    from torch_graph import torch_function

    from tensorir.graph import get_network

    mod_nchw, params_nchw, _, _ = get_network(name, x.shape[0], layout="NCHW")
    dtype = torch_dtype(torch, precision)
    fn = torch_function(mod_nchw, params_nchw, "cuda", dtype=dtype)
    xt = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2))).cuda()
    if dtype is not None:
        xt = xt.to(dtype)
    with torch.no_grad():
        out = fn(xt).float().cpu().numpy()
        eager_ms = cuda_event_ms(lambda: fn(xt))
        static_x = xt.clone()  # the graph reads it: alive while the graph replays
        graph_ms = cuda_event_ms(cuda_graph(fn, static_x).replay)
        compile_ms, again = None, None
        if not args.no_torch_compile:
            compiled = torch.compile(fn, mode="reduce-overhead")
            for _ in range(3):  # compile, record the CUDA graph, warm
                compiled(static_x)
            compile_ms = cuda_event_ms(lambda: compiled(static_x))

            def again():
                with torch.no_grad():
                    return cuda_event_ms(lambda: compiled(static_x))

    return {"out": out, "eager_ms": eager_ms, "graph_ms": graph_ms, "compile_ms": compile_ms,
            "compiled_again": again}  # fmt: skip


def bench_network(name: str, args, work: Path, torch) -> dict:
    """Tune ``name`` (NHWC, ``--batch``) as the seed tutorial does, then time it against PyTorch.

    Only the time budget (``--network-seconds``) and the trial cap are given; the round size and
    the search effort are the library's automatic defaults unless ``--per-round`` /
    ``--population`` / ``--generations`` are passed. The measuring context takes the seed's
    values (``repeat=1, min_repeat_ms=300, timeout=10``).
    """
    from tensorir.graph import evaluate, get_network

    precision, target = args.precision, target_for(args.precision)
    mod32, params32, shape, _ = get_network(name, batch_size=args.batch, layout="NHWC")
    mod, params = our_module(mod32, params32, precision)
    log = work / f"{name}-NHWC-B{args.batch}-cuda{log_suffix(precision)}.json"
    tasks, weights = ansor.extract_tasks(mod, params, target)
    print(f"[{name}] {len(tasks)} tasks, weights sum {sum(weights)}", flush=True)
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype("float32")
    torch_side = torch_network(name, precision, x, args, torch)
    tune_s, before = 0.0, _timeouts(log)
    seconds, ledger = args.network_seconds, None
    if args.total_seconds:  # one budget over several runs (tune_ledger.py)
        ledger = TuneLedger(f"{log}.ledger.json")
        seconds = ledger.remaining(args.total_seconds)
        print(f"[{name}] {ledger.spent():.0f} of {args.total_seconds:g} s tuned by earlier "
              f"runs; this run tunes {seconds:.0f} s", flush=True)  # fmt: skip
    wants_tuning = args.network_trials > 0 or bool(seconds)
    if wants_tuning and not args.no_tune and (ledger is None or seconds >= 1):
        # --cold-cache: three single runs after an L2 flush per candidate (docs/gpu.md)
        with ansor.LocalRPCMeasureContext(
            repeat=3 if args.cold_cache else 1, min_repeat_ms=args.min_repeat_ms, timeout=10,
            enable_gpu_cache_flush=args.cold_cache,
        ) as ctx:  # fmt: skip
            tuner = ansor.TaskScheduler(
                tasks, weights, load_log_file=str(log) if log.exists() else None
            )
            options = ansor.TuningOptions(
                num_measure_trials=args.network_trials, runner=ctx.runner,
                num_measures_per_round=args.per_round,
                measure_callbacks=[ansor.RecordToFile(str(log))]
                + ([ledger.start_run()] if ledger else []),
                max_tuning_seconds=seconds,
            )  # fmt: skip
            explicit = {}
            if args.population is not None:
                explicit["evolutionary_search_population"] = args.population
            if args.generations is not None:
                explicit["evolutionary_search_num_iters"] = args.generations
            t0 = time.perf_counter()
            tuner.tune(
                options, search_policy_params=ansor.SearchParams(**explicit) if explicit else None
            )
            tune_s = time.perf_counter() - t0
    after = _timeouts(log)

    def build_and_time(records):
        with ansor.ApplyHistoryBest(records):
            lib = ansor.build(mod, target, params=params)
        module = ansor.GraphModule(lib)
        module.set_input("data", x)
        module.run()
        out = module.get_output(0).numpy()
        ms = float(np.median(module.benchmark(repeat=10, min_repeat_ms=200).results)) * 1e3
        return out, ms, module

    records = str(log) if log.exists() else []
    if ledger is not None and log.exists():  # only what the total budget measured
        first = work / f"{log.stem}-first{args.total_seconds:g}s.json"
        first.write_text(
            "".join(x + "\n" for x in records_within(log, ledger.runs(), args.total_seconds))
        )
        records = str(first)
    out, ours_ms, module = build_and_time(records)
    profile = None
    if args.profile:  # each kernel alone, beside the network's time (kernel_profile.py)
        from kernel_profile import kernel_profile, print_profile

        kernels = kernel_profile(module)
        profile = {"kernel_sum_us": sum(r["us"] for r in kernels),
                   "by_name": print_profile(kernels),
                   "kernels": [(r["name"], round(r["us"], 2)) for r in kernels]}  # fmt: skip
    ref = evaluate(mod32, {"data": x}, params32)  # float32 numpy: both sides are compared to it
    low = precision != "float32"
    default_ms = None
    if args.also_default:  # the untuned build (default GPU schedules), timed in this process
        default_out, default_ms, _ = build_and_time([])
        np.testing.assert_allclose(default_out, ref, rtol=3e-2 if low else 1e-3, atol=1e-4)

    compile_after = torch_side["compiled_again"]() if torch_side["compiled_again"] else None
    torch_out = torch_side["out"]
    scale = float(np.max(np.abs(ref)))
    row = {"network": name, "batch": args.batch, "precision": precision, "ours_ms": ours_ms,
           "untuned_ms": default_ms, "torch_eager_ms": torch_side["eager_ms"],
           "torch_graph_ms": torch_side["graph_ms"], "torch_compile_ms": torch_side["compile_ms"],
           "torch_compile_ms_after_tune": compile_after,
           "max_abs_err": float(np.max(np.abs(out - ref))),
           "max_rel_err": float(np.max(np.abs(out - ref))) / scale,
           "torch_max_rel_err": float(np.max(np.abs(torch_out - ref))) / scale,
           "torch_max_abs_err": float(np.max(np.abs(torch_out - ref))),
           "records": after[1], "build_timeouts": after[0],
           "records_this_run": after[1] - before[1],
           "build_timeouts_this_run": after[0] - before[0],
           "tune_s_this_run": tune_s,
           "tuned_s_total": ledger.spent() if ledger else None, "profile": profile}  # fmt: skip
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated from {list(OPS)} or none")
    p.add_argument("--trials", type=int, default=64, help="records per operator log to reach")
    p.add_argument(
        "--network-trials", type=int, default=0,
        help="network trial cap this run (0: none, with --network-seconds)",
    )  # fmt: skip
    p.add_argument(
        "--network-seconds", type=float,
        help="network tuning budget this run (no round starts after it)",
    )  # fmt: skip
    p.add_argument(
        "--total-seconds", type=float,
        help="network tuning budget over all runs on this log (a ledger beside it keeps what "
        "earlier runs tuned); the network is built from the records of those seconds only",
    )  # fmt: skip
    p.add_argument(
        "--network", nargs="?", const="resnet-18", default="",
        help="also build and time these networks (comma-separated; default resnet-18)",
    )  # fmt: skip
    p.add_argument("--batch", type=int, default=1, help="networks' batch size (default 1)")
    p.add_argument("--per-round", type=int, help="measurements per round (default: automatic)")
    p.add_argument("--population", type=int, help="search population (default: automatic)")
    p.add_argument("--generations", type=int, help="evolution generations (default: automatic)")
    p.add_argument("--min-repeat-ms", type=float, default=300, help="as the seed: 300")
    p.add_argument("--also-default", action="store_true", help="also time the untuned network")
    p.add_argument("--no-tune", action="store_true")
    p.add_argument("--profile", action="store_true", help="networks: also time each kernel alone")
    p.add_argument("--precision", choices=PRECISIONS, default="float32",
                   help="networks: both sides' arithmetic (module docstring)")  # fmt: skip
    p.add_argument("--no-torch-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--cold-cache", action="store_true",
                   help="networks: time candidates after an L2 flush")  # fmt: skip
    p.add_argument("--work-dir", default="bench-gpu")
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args()
    import torch

    set_torch_tf32(torch, args.precision)
    torch.backends.cudnn.benchmark = True
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    ops = [] if args.ops == "none" else [o for o in args.ops.split(",") if o]
    rows = [bench_op(name, args, work, torch) for name in ops]
    networks = [n for n in args.network.split(",") if n]
    if not networks and (args.network_trials or args.network_seconds or args.total_seconds):
        networks = ["resnet-18"]
    rows += [bench_network(n, args, work, torch) for n in networks]
    tf32 = "on" if args.precision == "tf32" else "off"
    print(f"\n{torch.cuda.get_device_name()}; PyTorch {torch.__version__}, TF32 {tf32}")
    print(f"{'op':12} {'ours ms':>9} {'torch ms':>9} {'torch/ours':>10} {'records':>8}")
    for r in rows:
        if "op" in r:
            print(f"{r['op']:12} {r['ours_ms']:9.4f} {r['torch_ms']:9.4f} "
                  f"{r['torch_ms'] / r['ours_ms']:10.2f} {r['records']:8d}")  # fmt: skip
        else:
            compiled = r["torch_compile_ms"]
            compiled = "-" if compiled is None else f"{compiled:.3f} ms"
            print(f"{r['network']} B{r['batch']} {r['precision']}: ours {r['ours_ms']:.3f} ms, "
                  f"PyTorch eager {r['torch_eager_ms']:.3f} ms, PyTorch CUDA graph "
                  f"{r['torch_graph_ms']:.3f} ms, torch.compile {compiled} "
                  f"({r['records']} records, {r['build_timeouts']} build timeouts)")  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
