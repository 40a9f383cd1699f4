"""int8 vs fp32 resnet-18 on an NVIDIA GPU, both ours, side by side in one process (issue 19).

    python benchmarks/bench_int8_gpu.py --seconds 240 --work-dir bench-int8-gpu
    python benchmarks/bench_int8_gpu.py --no-tune --work-dir bench-int8-gpu  # re-time

- fp32: the NHWC zoo network, tuned for ``--seconds`` with the library's defaults
  (``LocalRPCMeasureContext(repeat=1, min_repeat_ms=300, timeout=10)``, as the seed tutorial);
- int8: the same network quantized by ``autosched.quantize`` (global scale 8.0, first conv float),
  tuned the same way. Its int8 reductions use ``__dp4a`` where the generated loop has the form
  (``codegen/cuda.py``).
Both run as CUDA graphs through ``GraphModule``; the logs resume, so a long tune runs as several
calls. Prints both latencies, int8 / fp32 speed-up and top-1 agreement on smoothed noise.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from bench_int8_cpu import smoothed_noise

import autosched as ansor
from autosched import quantize as aq
from autosched.networks import get_network


def tune(mod, params, log: Path, seconds: float, label: str) -> float:
    tasks, weights = ansor.extract_tasks(mod, params, "cuda")
    print(f"[{label}] {len(tasks)} tasks", flush=True)
    if seconds <= 0:
        return 0.0
    t0 = time.perf_counter()
    with ansor.LocalRPCMeasureContext(repeat=1, min_repeat_ms=300, timeout=10) as ctx:
        tuner = ansor.TaskScheduler(
            tasks, weights, load_log_file=str(log) if log.exists() else None
        )
        tuner.tune(
            ansor.TuningOptions(
                num_measure_trials=0,
                runner=ctx.runner,
                max_tuning_seconds=seconds,
                measure_callbacks=[ansor.RecordToFile(str(log))],
            )  # fmt: skip
        )
    return time.perf_counter() - t0


def build(mod, params, log: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tasks the log lacks use their default schedule
        with ansor.ApplyHistoryBest(str(log) if log.exists() else []):
            lib = ansor.build(mod, "cuda", params=params)
    return ansor.GraphModule(lib)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seconds", type=float, default=240, help="tuning budget per network")
    p.add_argument("--no-tune", action="store_true")
    p.add_argument("--agree", type=int, default=20, help="inputs for the top-1 agreement")
    p.add_argument("--work-dir", default="bench-int8-gpu")
    p.add_argument("--out", help="write the figures as JSON here")
    args = p.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)

    mod, params, shape, _ = get_network("resnet-18", batch_size=1, layout="NHWC")
    with aq.qconfig(nbit_input=8, nbit_weight=8, global_scale=8.0, skip_conv_layers=[0]):
        qmod = aq.quantize(mod, params)
    seconds = 0 if args.no_tune else args.seconds
    nets = {"fp32": (mod, params), "int8": (qmod, {})}
    row = {"network": "resnet-18 NHWC B1", "tune_s": {}}
    modules = {}
    for label, (m, prm) in nets.items():
        log = work / f"resnet-18-{label}-cuda.json"
        row["tune_s"][label] = round(tune(m, prm, log, seconds, label), 1)
        modules[label] = build(m, prm, log)
    xs = smoothed_noise(args.agree, (1, shape[3], shape[1], shape[2]))
    agree = 0
    for x in xs:
        x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        tops = []
        for module in modules.values():
            module.set_input("data", x_nhwc)
            module.run()
            tops.append(int(np.argmax(module.get_output(0).numpy())))
        agree += tops[0] == tops[1]
    times = {}
    for _ in range(3):  # alternate, so that drift hits both alike
        for label, module in modules.items():
            r = module.benchmark(repeat=10, min_repeat_ms=200).results
            times.setdefault(label, []).append(float(np.median(r)) * 1e3)
    row.update({k: round(float(np.median(v)), 4) for k, v in times.items()})
    row["int8_speedup"] = round(row["fp32"] / row["int8"], 3)
    row["top1_agree"] = f"{agree}/{len(xs)}"
    print(f"\nresnet-18 NHWC B1 on the GPU: fp32 {row['fp32']:.3f} ms, int8 {row['int8']:.3f} ms, "
          f"int8 speed-up {row['int8_speedup']:.2f}x, top-1 agreement {row['top1_agree']}, "
          f"tuned {row['tune_s']} s")  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
