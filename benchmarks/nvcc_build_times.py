"""How long nvcc takes on the GPU candidates the search samples for resnet-18 (issue 16).

    python benchmarks/nvcc_build_times.py                          # 4 candidates per task
    python benchmarks/nvcc_build_times.py --per-task 8 --jobs 16   # on the 16-core tuning host
    python benchmarks/nvcc_build_times.py --tasks winograd --save-dir /tmp/cu

No GPU is needed, only nvcc: the tasks are extracted for "cuda" with the H100 limits of
``autosched.hardware.GPU_DEFAULTS``, candidates are drawn as the search's initial population
draws them (``generate_sketches`` + ``sample_init_population``, seeded), their CUDA is generated
by ``autosched.kernel.generate_source`` and compiled with ``runtime.cuda.compile_cubin`` (the
measurement builder's own call: ``nvcc --cubin -arch=... -O3``), ``--jobs`` at a time.

The table has one row per candidate: task, candidate, source lines, unrolled statements (the
statements plus expression nodes the loop IR emits once its unrolled loops are expanded, which
is what nvcc has to unroll too: ``#pragma unroll`` loops), the largest
``auto_unroll_max_step``, and nvcc's wall and CPU seconds (``timeout`` past ``--timeout``,
``size`` when the kernel size limit refused the kernel before nvcc). The summaries give the
median, p95 and max seconds and the share of candidates over 5 s and over 15 s (the tuning
builders' timeout); compare CPU seconds between runs on a machine other processes share.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import autosched as ansor
from autosched import networks
from autosched.hardware import GPU_DEFAULTS, HardwareParams
from autosched.kernel import KernelSizeError, generate_source, lower_for
from autosched.search.annotate import sample_init_population
from autosched.search.sketch import generate_sketches
from tensorir.passes.unroll import expanded_sizes

BUILD_TIMEOUT_S = 15.0  # the tuning builders' default timeout on the GPU


def _max_unroll_step(state) -> int:
    steps = re.findall(r"auto_unroll_max_step\$(\d+)", str(state.steps))
    return max((int(v) for v in steps), default=0)


def candidates(network: str, per_task: int, seed: int, which: str):
    """(task index, task name, candidate index, state) of the sampled candidates."""
    mod, params, _, _ = networks.get_network(network, batch_size=1, layout="NHWC")
    hw = HardwareParams(**GPU_DEFAULTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks, _ = ansor.extract_tasks(mod, params, "cuda", hardware_params=hw)
    for i, task in enumerate(tasks):
        name = task.desc
        if which == "winograd" and "winograd" not in name:
            continue
        if which not in ("all", "winograd") and str(i) not in which.split(","):
            continue
        states = sample_init_population(task, generate_sketches(task), per_task, seed + i)
        for k, state in enumerate(states):
            yield i, name, k, state


def compile_seconds(code: str, arch: str, timeout: float) -> tuple[float, float] | None:
    """(wall, CPU) seconds of nvcc on ``code``, None past ``timeout``.

    The command is :func:`runtime.cuda.compile_cubin`'s (``nvcc --cubin -arch=ARCH -O3``); the
    CPU seconds (nvcc and the cicc / ptxas it waits for) do not grow when other processes
    share the cores, so they compare runs on a busy machine."""
    with tempfile.TemporaryDirectory(prefix="nvcc_build_times_") as tmp:
        src, out = os.path.join(tmp, "kernel.cu"), os.path.join(tmp, "kernel.cubin")
        Path(src).write_text(code)
        cmd = ["nvcc", "--cubin", f"-arch={arch}", "-O3", "-o", out, src]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if wall >= timeout:
            return None
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed: {proc.stderr.read().decode()[-2000:]}")
        return wall, usage.ru_utime + usage.ru_stime


def measure(args) -> list[dict]:
    rows = []
    for i, name, k, state in candidates(args.network, args.per_task, args.seed, args.tasks):
        row = {"task": f"{i}:{name}", "cand": k, "lines": 0, "unrolled": 0, "code": None}
        row["cpu"] = None
        row["unroll_step"] = _max_unroll_step(state)
        try:
            program = lower_for(state, "cuda", name=f"t{i}_c{k}", max_kernel_size=10**9)
            row["unrolled"] = sum(expanded_sizes(program.body).values())
            code = generate_source(
                state, "cuda", name=f"t{i}_c{k}", max_kernel_size=args.max_kernel_size
            ).code
        except KernelSizeError:
            row["seconds"] = "size"
        else:
            row["code"], row["lines"] = code, code.count("\n") + 1
            if args.save_dir:
                Path(args.save_dir).mkdir(parents=True, exist_ok=True)
                (Path(args.save_dir) / f"t{i}_c{k}.cu").write_text(code)
        rows.append(row)
    todo = [r for r in rows if r["code"] is not None]
    with ThreadPoolExecutor(args.jobs) as pool:  # nvcc runs in its own processes
        times = pool.map(lambda r: compile_seconds(r["code"], args.arch, args.timeout), todo)
        for row, sec in zip(todo, times, strict=True):
            row["seconds"] = "timeout" if sec is None else sec[0]
            row["cpu"] = None if sec is None else sec[1]
    return rows


def summary(rows: list[dict], timeout: float, key: str = "seconds") -> str:
    """Median / p95 / max nvcc seconds (``key``: "seconds" wall, "cpu") and the shares over
    5 s and 15 s (a timeout counts as ``timeout`` seconds; kernels refused for size are left
    out)."""
    secs = sorted(
        timeout if r["seconds"] == "timeout" else r[key] for r in rows if r["seconds"] != "size"
    )
    if not secs:
        return "no candidate compiled"
    n = len(secs)
    p95 = secs[min(n - 1, round(0.95 * (n - 1)))]
    over5 = sum(s > 5 for s in secs) / n
    over15 = sum(s > BUILD_TIMEOUT_S for s in secs) / n
    refused = sum(r["seconds"] == "size" for r in rows)
    return (
        f"{n} compiled ({refused} refused for size): median {statistics.median(secs):.2f} s, "
        f"p95 {p95:.2f} s, max {secs[-1]:.2f} s, over 5 s {over5:.1%}, over 15 s {over15:.1%}"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--network", default="resnet-18")
    p.add_argument("--tasks", default="all", help="'all', 'winograd' or task indices '2,4'")
    p.add_argument("--per-task", type=int, default=4, help="candidates sampled per task")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--jobs", type=int, default=2, help="nvcc processes at once")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds before nvcc is stopped")
    p.add_argument("--max-kernel-size", type=int, help="kernel size limit (default: the builder's)")
    p.add_argument("--save-dir", help="write each candidate's .cu file here")
    args = p.parse_args(argv)
    rows = measure(args)
    head = f"{'task':44} {'cand':>4} {'lines':>6} {'unrolled':>9} {'unroll':>6} {'nvcc s':>8}"
    print(head + f" {'cpu s':>7}")
    for r in rows:
        sec = r["seconds"]
        text = sec if isinstance(sec, str) else f"{sec:.2f}"
        cpu = "" if r["cpu"] is None else f"{r['cpu']:.2f}"
        print(
            f"{r['task'][:44]:44} {r['cand']:>4} {r['lines']:>6} {r['unrolled']:>9} "
            f"{r['unroll_step']:>6} {text:>8} {cpu:>7}"
        )
    print("wall:", summary(rows, args.timeout))
    print("cpu: ", summary(rows, args.timeout, "cpu"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
