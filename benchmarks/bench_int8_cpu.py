"""int8 resnet on the CPU: ours (autosched.quantize, tuned) vs our fp32 network vs onnxruntime
running the same network quantized (QDQ int8), side by side in one run.

    python benchmarks/bench_int8_cpu.py                     # resnet-18 224x224, 1000 trials each
    python benchmarks/bench_int8_cpu.py --trials 2000 --rounds 9
    python benchmarks/bench_int8_cpu.py --image-size 32 --trials 48 --rounds 1   # a smoke run

What runs:

- ours, int8: the NHWC zoo network quantized by ``autosched.quantize`` (relay's defaults:
  global_scale 8, the stem conv and the classifier float), its tasks tuned with the task
  scheduler for ``--trials`` measurements (the log in ``--work-dir`` resumes), built with the
  history best; its output is checked against the numpy evaluation of the quantized graph;
- ours, fp32: the same network unquantized, tuned with the same budget;
- onnxruntime, int8: the NCHW network (same weights) exported by
  ``tensorir.graph.onnx_export.to_onnx`` and quantized by ``onnxruntime.quantization.
  quantize_static`` (QDQ, uint8 activations x int8 weights per tensor, which ORT fuses into
  QLinearConv / its int8 GEMMs with VNNI), calibrated on the same smoothed-noise inputs;
- onnxruntime, fp32: the exported float model.

The four are timed in alternating rounds (this machine's speed drifts) and the medians
reported, plus the top-1 agreement of each int8 network with the fp32 one on ``--agree``
inputs.

Per kernel (``--tasks``): the int8 network's tasks of those indices (``extract_tasks`` order;
resnet-18: 2 is the 3x3 64-channel conv, 14 a 3x3 256-channel one, 3 the 1x1 64-channel one),
each tuned for ``--trials`` measurements with the int8 tiling for vpdpbusd
(``SearchParams.cpu_int8_dot_product_tiling``, "vnni") and without it ("plain", the search as
it was before), plus the fp32 network's task of the same layer (a direct conv of the same
shapes, else the task at the same index if it has the same input and output shapes: fp32 runs
some 3x3 layers as winograd); then the best kernel of each is re-timed in this process, in
alternating rounds, with the weights in the layout the network stores them in:

    python benchmarks/bench_int8_cpu.py --tasks 2,14,3 --trials 100 --rounds 5 --work-dir W
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from wall_timing import median_s  # run from benchmarks/

import autosched as ansor
from autosched import quantize as aq
from tensorir.graph import evaluate, get_network
from tensorir.graph import ir as gir
from tensorir.graph.onnx_export import to_onnx


def load_network(name: str, size: int, layout: str):
    """The zoo network at ``size`` x ``size`` (224: ``get_network``; other sizes: the same
    builder with a smaller input, as the tests shrink it). Weights do not depend on layout."""
    if size == 224:
        mod, params, shape, _ = get_network(name, batch_size=1, layout=layout)
        return mod, params, shape
    from tensorir.graph.zoo import NetBuilder, resnet

    if not name.startswith("resnet-"):
        raise SystemExit(f"--image-size other than 224 is only for resnet-N, not {name}")
    shape = (1, 3, size, size) if layout == "NCHW" else (1, size, size, 3)
    b = NetBuilder(layout, "float32")
    out = resnet(b, shape, int(name.split("-")[1]))
    func = gir.Function(tuple(gir.free_vars(out)), out)
    return gir.Module.from_function(func), b.params(0), shape


def smoothed_noise(n: int, shape, seed: int = 0) -> list[np.ndarray]:
    """Natural-image-like NCHW inputs (the agreement test's distribution)."""
    from numpy.lib.stride_tricks import sliding_window_view

    x = np.random.default_rng(seed).normal(0, 1, (n, *shape[1:]))
    k = np.array([1, 4, 6, 4, 1], float) / 16
    for _ in range(3):
        for ax in (2, 3):
            pad = [(0, 0)] * 4
            pad[ax] = (2, 2)
            x = np.tensordot(
                sliding_window_view(np.pad(x, pad, mode="reflect"), 5, axis=ax), k, ([-1], [0])
            )
    x = x / x.std(axis=(1, 2, 3), keepdims=True)
    return [x[i : i + 1].astype("float32") for i in range(n)]


def tune_and_build(mod, params, log: Path, trials: int, label: str):
    tasks, weights = ansor.extract_tasks(mod, params, "llvm")
    print(f"[{label}] {len(tasks)} tasks, weights sum {sum(weights)}")
    t0 = time.perf_counter()
    if trials > 0:
        tuner = ansor.TaskScheduler(
            tasks, weights, load_log_file=str(log) if log.exists() else None
        )
        tuner.tune(
            ansor.TuningOptions(
                num_measure_trials=trials, measure_callbacks=[ansor.RecordToFile(str(log))]
            )
        )
    tune_s = time.perf_counter() - t0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tasks the log lacks use their default schedule
        with ansor.ApplyHistoryBest(str(log) if log.exists() else []):
            lib = ansor.build(mod, "llvm", params=params)
    return ansor.GraphModule(lib), len(tasks), tune_s


def ort_sessions(mod_nchw, params_nchw, calib: list[np.ndarray]):
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{"data": x} for x in calib])

        def get_next(self):
            return next(self.items, None)

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    with tempfile.TemporaryDirectory() as tmp:
        fp32_path, int8_path = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(to_onnx(mod_nchw, params_nchw), fp32_path)
        quantize_static(
            str(fp32_path), str(int8_path), Reader(), quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=False,
        )  # fmt: skip
        make = lambda p: ort.InferenceSession(  # noqa: E731
            str(p), opts, providers=["CPUExecutionProvider"]
        )
        return make(fp32_path), make(int8_path), ort.__version__


def conv_shapes(dag) -> tuple | None:
    """(data shape, weight shape, output shape) of a task's convolution, to pair an int8 task
    with the fp32 one of the same layer."""
    stage = next((op for op in dag.ops if op.name == "Conv2dOutput"), None)
    if stage is None:
        return None
    return tuple(tuple(t.shape) for t in stage.input_tensors) + (stage.shape,)


def io_shapes(task) -> tuple:
    """The shapes of a task's first input and its outputs (the layer, however computed)."""
    dag = task.compute_dag
    return tuple(dag.tensors[0].shape), tuple(tuple(t.shape) for t in dag.output_tensors)


def tune_kernel(task, log: Path, trials: int, params) -> object:
    """The best state of ``task`` after ``trials`` measurements (the log resumes)."""
    done = sum('"r"' in line for line in log.read_text().splitlines()) if log.exists() else 0
    if trials > done:
        policy = ansor.SketchPolicy(task, ansor.LGBModel(), params=params, verbose=0)
        task.tune(
            ansor.TuningOptions(
                num_measure_trials=trials - done, verbose=0,
                measure_callbacks=[ansor.RecordToFile(str(log))],
            ),
            search_policy=policy,
        )  # fmt: skip
    return task.apply_best(str(log))


def kernel_timer(state):
    """A call of ``state``'s kernel as the network runs it (weights in the rewritten layout),
    on random inputs, and how many vpdpbusd its code has."""
    import re

    import runtime
    from autosched.kernel import generate_source
    from runtime.cpu import compile_assembly

    src = generate_source(state, "llvm", layout_rewrite=True)
    module = runtime.load_module(**src.as_dict(), device=runtime.device("cpu"))
    rng = np.random.default_rng(0)
    args = []
    for spec in src.params:
        info = np.iinfo(spec.dtype) if np.dtype(spec.dtype).kind in "iu" else None
        lo, hi = (0, 1) if info is None else (max(info.min, -128), min(info.max, 127))
        args.append(rng.uniform(lo, hi, spec.size).astype(spec.dtype))
    dots = len(re.findall(r"\bvpdpbusd\b", compile_assembly(src.code)))
    return (lambda: module(*args)), dots


def bench_kernels(args, qmod, mod, params, work: Path, tag: str) -> None:
    """The per-kernel comparison of ``--tasks`` (module docstring)."""
    from dataclasses import replace

    int8_tasks, _ = ansor.extract_tasks(qmod, {}, "llvm")
    fp32_tasks, _ = ansor.extract_tasks(mod, params, "llvm")
    on = ansor.SearchParams()
    off = replace(on, cpu_int8_dot_product_tiling=False)
    timers, rows = {}, []
    for i in map(int, args.tasks.split(",")):
        task = int8_tasks[i]
        shapes = conv_shapes(task.compute_dag)
        twin = next(
            (t for t in fp32_tasks if shapes and conv_shapes(t.compute_dag) == shapes), None
        )
        if twin is None and i < len(fp32_tasks) and io_shapes(fp32_tasks[i]) == io_shapes(task):
            twin = fp32_tasks[i]  # the same layer computed otherwise (fp32 winograd)
        variants = [("vnni", task, on), ("plain", task, off)]
        if twin is not None:
            variants.append(("fp32", twin, on))
        for variant, t, p in variants:
            t0 = time.perf_counter()
            state = tune_kernel(t, work / f"{tag}-task{i}-{variant}.json", args.trials, p)
            fn, dots = kernel_timer(state)
            name = f"task{i}-{variant}"
            timers[name] = fn
            own = conv_shapes(t.compute_dag) or "(no direct conv: winograd)"
            rows.append({"name": name, "shapes": own, "vpdpbusd": dots,
                         "tune_s": time.perf_counter() - t0})  # fmt: skip
            print(f"[{name}] tuned, {dots} vpdpbusd in its code", flush=True)
    samples: dict[str, list[float]] = {k: [] for k in timers}
    for _ in range(args.rounds):
        for name, fn in timers.items():
            samples[name].append(median_s(fn, args.min_s) * 1e3)
    print(f"\n{'kernel':<16} {'ms':>8} {'vpdpbusd':>9}  shapes (data, weight, out)")
    for row in rows:
        row["ms"] = float(np.median(samples[row["name"]]))
        print(f"{row['name']:<16} {row['ms']:8.3f} {row['vpdpbusd']:9d}  {row['shapes']}")
    by = {r["name"]: r["ms"] for r in rows}
    for i in map(int, args.tasks.split(",")):
        vnni, plain, fp32 = (by.get(f"task{i}-{v}") for v in ("vnni", "plain", "fp32"))
        line = f"task {i}: vnni {plain / vnni:.2f}x faster than plain int8"
        if fp32:
            line += f", {fp32 / vnni:.2f}x faster than fp32"
        print(line)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1, default=float))


def run_graph(module, x_nhwc):
    module.set_input("data", x_nhwc)
    module.run()
    return module.get_output(0).numpy()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--network", default="resnet-18")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--trials", type=int, default=1000, help="measurements per network, each")
    p.add_argument("--rounds", type=int, default=7, help="alternating timing rounds")
    p.add_argument("--min-s", type=float, default=0.5, help="seconds per timing in a round")
    p.add_argument("--agree", type=int, default=20, help="inputs for the top-1 agreement")
    p.add_argument("--work-dir", default="bench-int8-cpu")
    p.add_argument("--out", help="write the figures as JSON here")
    p.add_argument(
        "--tasks", help="compare these int8 tasks' kernels instead (indices, e.g. 2,14,3)"
    )
    args = p.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    tag = f"{args.network}-{args.image_size}"

    mod, params, shape = load_network(args.network, args.image_size, "NHWC")
    with aq.qconfig(global_scale=8.0, skip_conv_layers=[0]):
        qmod = aq.quantize(mod, params)
    if args.tasks:
        bench_kernels(args, qmod, mod, params, work, tag)
        return
    ours_int8, n_int8, tune_int8 = tune_and_build(
        qmod, {}, work / f"{tag}-int8-llvm.json", args.trials, "int8"
    )
    ours_fp32, n_fp32, tune_fp32 = tune_and_build(
        mod, params, work / f"{tag}-fp32-llvm.json", args.trials, "fp32"
    )

    mod_nchw, params_nchw, shape_nchw = load_network(args.network, args.image_size, "NCHW")
    inputs = smoothed_noise(max(args.agree, 1), shape_nchw)
    to_nhwc = lambda x: np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # noqa: E731
    x0 = to_nhwc(inputs[0])
    q_err = float(np.abs(run_graph(ours_int8, x0) - evaluate(qmod, {"data": x0})).max())
    print(f"[int8] max |ours - numpy reference of the quantized graph| = {q_err:.2e}")

    row = {
        "network": args.network, "image_size": args.image_size, "trials_each": args.trials,
        "tasks_int8": n_int8, "tasks_fp32": n_fp32, "tune_s_int8": tune_int8,
        "tune_s_fp32": tune_fp32, "int8_max_abs_err_vs_reference": q_err,
    }  # fmt: skip
    timers = {
        "ours_int8": lambda: run_graph(ours_int8, x0),
        "ours_fp32": lambda: run_graph(ours_fp32, x0),
    }
    top1 = {
        "ours_int8": [run_graph(ours_int8, to_nhwc(x)).argmax() for x in inputs],
        "ours_fp32": [run_graph(ours_fp32, to_nhwc(x)).argmax() for x in inputs],
    }
    try:
        ort_fp32, ort_int8, version = ort_sessions(mod_nchw, params_nchw, inputs[:8])
        row["ort_version"] = version
        timers["ort_int8"] = lambda: ort_int8.run(None, {"data": inputs[0]})
        timers["ort_fp32"] = lambda: ort_fp32.run(None, {"data": inputs[0]})
        top1["ort_int8"] = [ort_int8.run(None, {"data": x})[0].argmax() for x in inputs]
        top1["ort_fp32"] = [ort_fp32.run(None, {"data": x})[0].argmax() for x in inputs]
    except ImportError:
        print("onnxruntime not installed: pip install onnxruntime onnx")

    samples: dict[str, list[float]] = {k: [] for k in timers}
    for _ in range(args.rounds):
        for name, fn in timers.items():
            time.sleep(0.3)  # let the other side's spinning worker threads go to sleep
            samples[name].append(median_s(fn, args.min_s) * 1e3)
    for name, ms in samples.items():
        row[f"{name}_ms"] = float(np.median(ms))
    for name in ("ours_int8", "ort_int8"):
        if name in top1:
            ref = top1[name.replace("int8", "fp32")]
            row[f"{name}_top1_agree"] = float(np.mean(np.equal(top1[name], ref)))

    print()
    print(f"{'':<10} {'ms':>9} {'top-1 = fp32':>13}")
    for name in samples:
        agree = row.get(f"{name}_top1_agree")
        print(f"{name:<10} {row[name + '_ms']:9.2f} {'' if agree is None else f'{agree:13.0%}'}")
    print(f"ours int8 vs ours fp32: {row['ours_fp32_ms'] / row['ours_int8_ms']:.2f}x faster")
    if "ort_int8_ms" in row:
        print(f"ours int8 vs ORT int8:  {row['ort_int8_ms'] / row['ours_int8_ms']:.2f}x faster")
    if args.out:
        Path(args.out).write_text(json.dumps(row, indent=1, default=float))


if __name__ == "__main__":  # tuning measures in spawned processes
    main()
