"""resnet-18's conv2d layers on the simulated VTA: default config, tuned configs, roofline.

    python benchmarks/bench_vta.py                         # 50 and 200 trials, random + grid
    python benchmarks/bench_vta.py --trials 20 --tasks 3   # a quick look

The conv2d tasks come from the seed's flow: resnet-18 (NCHW) from the model zoo, batch norms
folded, ``vta.top.graph_pack`` between ``nn.max_pool2d`` and ``nn.global_avg_pool2d``, then
``autotvm.task.extract_from_program`` for ``env.target``. The tasks are made int8 (the dtype
does not change a schedule's cycles; ``autosched.quantize`` produces the int8 graph itself).

Per task it prints the simulated cycles of the default (fallback) configuration, of the best
configuration found after each trial budget by each tuner, and two lower bounds of the
simulated machine: GEMM-bound (one block multiply per cycle) and DMA-bound (input, weights and
output each moved once at ``dram_bytes_per_cycle``, plus one DMA latency). Then the whole
network's simulated conv2d time (each task's best cycles times its number of calls, at the
stated clock), and how long the simulator took per candidate on this machine.

Tuners: "random" (distinct random configurations) and "grid" (configurations in index order,
slow here: the first ones are the tiniest tiles, tens of thousands of instructions each) are
plain loops over the space; "xgb" and "ga" are AutoTVM's XGBTuner / GATuner, measured through
``vta.SimulatorRunner``.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from autosched import autotvm, vta
from tensorir.graph import get_network
from tensorir.graph.ir import calls
from tensorir.graph.passes.pipeline import optimize


def resnet18_tasks(env):
    """(task, number of calls) of resnet-18's packed conv2d layers, int8."""
    mod, params, _, _ = get_network("resnet-18", batch_size=env.BATCH, layout="NCHW")
    func = optimize(mod["main"], params, layout="NCHW")
    packed = vta.top.graph_pack(func, env.BATCH, env.BLOCK_OUT, env.WGT_WIDTH,
                                "nn.max_pool2d", "nn.global_avg_pool2d")  # fmt: skip
    found = autotvm.task.extract_from_program(packed, ops=("nn.conv2d",), target=env.target)
    counts = Counter()
    for call in calls(packed):
        w = vta.top.templates.workload_of_call(call)
        if w is not None:
            counts[_int8(w[1])] += 1
    tasks = []
    for t in found:
        args = _int8(t.args)
        tasks.append((autotvm.task.create(t.name, args, target=env.target), counts[args]))
    return tasks


def _int8(args):
    return tuple(("TENSOR", a[1], "int8") if isinstance(a, tuple) and a[:1] == ("TENSOR",)
                 else a for a in args)  # fmt: skip


def rooflines(wkl, env) -> tuple[int, int]:
    """(GEMM-bound, DMA-bound) cycles of a workload on the simulated machine."""
    s, t = env.spec, env.timing
    gemm = wkl.gemm_uops * t.gemm_ii
    nbytes = (
        wkl.batch_blocks * wkl.in_blocks * wkl.height * wkl.width * s.inp_elem_bytes
        + wkl.out_blocks * wkl.in_blocks * wkl.kernel_h * wkl.kernel_w * s.wgt_elem_bytes
        + wkl.batch_blocks * wkl.out_blocks * wkl.out_height * wkl.out_width * s.out_elem_bytes
    )
    return gemm, t.dma_latency + math.ceil(nbytes / t.dram_bytes_per_cycle)


def candidates(tuner: str, space_len: int, n: int, seed: int) -> list[int]:
    if tuner == "grid":
        return list(range(min(n, space_len)))
    rng = np.random.default_rng(seed)
    return [int(i) for i in rng.permutation(space_len)[:n]]


def _task_row(job):
    """(default cycles, best cycles per tuner and budget, CPU seconds per valid candidate)."""
    k, budgets, tuners, seed = job
    env = vta.get_env()
    task, _ = resnet18_tasks(env)[k]
    runner = vta.SimulatorRunner(env)
    space = task.config_space
    with env.target:
        fallback = autotvm.FallbackContext()
        fallback.silent = True
        cfg = fallback.query(env.target, task.workload)
        task.instantiate(cfg)
    default = runner.measure(task, cfg).cycles
    best_row, times = [], []
    for tuner in tuners:
        if tuner in ("xgb", "ga"):
            best_row += _autotvm_tuner(tuner, task, budgets, seed)
            continue
        order = candidates(tuner, len(space), max(budgets), seed)
        best, i = math.inf, 0
        for budget in budgets:
            while i < min(budget, len(order)):
                start = time.process_time()
                r = runner.measure(task, space.get(order[i]))
                i += 1
                if r.error_no == 0:
                    times.append(time.process_time() - start)
                    best = min(best, r.cycles)
            best_row.append(best)
    return default, best_row, times


def _autotvm_tuner(name, task, budgets, seed) -> list:
    """Best cycles of AutoTVM's XGBTuner / GATuner after each budget (one tuner, resumed)."""
    from autosched.autotvm import tuner as tuners

    tuner = (tuners.XGBTuner(task, loss_type="rank") if name == "xgb"
             else tuners.GATuner(task, pop_size=50))  # fmt: skip
    runner = vta.SimulatorRunner()
    runner.n_parallel = 8  # configurations per tuner batch
    option = autotvm.measure_option(builder=runner, runner=runner)
    out, done = [], 0
    for budget in budgets:
        tuner.tune(budget - done, measure_option=option)
        done = budget
        best = tuner.best_config
        out.append(runner.measure(task, best).cycles if best is not None else math.inf)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", default="50,200", help="comma-separated trial budgets")
    p.add_argument("--tuners", default="random,grid")
    p.add_argument("--tasks", type=int, default=0, help="only the first N tasks (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, help="tasks measured in parallel processes")
    args = p.parse_args()
    env = vta.get_env()
    budgets = [int(x) for x in args.trials.split(",")]
    tuners = args.tuners.split(",")
    tasks = resnet18_tasks(env)
    if args.tasks:
        tasks = tasks[: args.tasks]
    clock = env.timing.clock_mhz
    print(f"VTA {env.BATCH}x{env.BLOCK_IN}x{env.BLOCK_OUT} GEMM, "
          f"{env.timing.dram_bytes_per_cycle} B/cycle DMA, {clock:.0f} MHz; "
          f"{len(tasks)} conv2d tasks of resnet-18")  # fmt: skip
    cols = [f"{tn}@{b}" for tn in tuners for b in budgets]
    print(f"{'task':<34}{'calls':>6}{'space':>7}{'default':>10}"
          + "".join(f"{c:>12}" for c in cols) + f"{'GEMM-bnd':>10}{'DMA-bnd':>10}")  # fmt: skip
    jobs = [(k, budgets, tuners, args.seed) for k in range(len(tasks))]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(_task_row, jobs))
    else:
        rows = [_task_row(job) for job in jobs]
    total_default = total_best = 0
    sim_times = []
    for (task, n_calls), (default, best_row, times) in zip(tasks, rows, strict=True):
        wkl = vta.top.task_workload(task)
        gemm, dma = rooflines(wkl, env)
        total_default += default * n_calls
        total_best += min([default, *best_row]) * n_calls
        sim_times += times
        name = (f"{wkl.height}x{wkl.width} {wkl.in_blocks * 16}->{wkl.out_blocks * 16} "
                f"k{wkl.kernel_h} s{wkl.stride_h}")  # fmt: skip
        print(f"{name:<34}{n_calls:>6}{len(task.config_space):>7}{default:>10}"
              + "".join(f"{b:>12}" for b in best_row) + f"{gemm:>10}{dma:>10}")  # fmt: skip
    ms = 1e3 / (clock * 1e6)
    print(f"\nwhole network, conv2d layers on VTA: default {total_default * ms:.2f} ms, "
          f"best {total_best * ms:.2f} ms at {clock:.0f} MHz "
          f"({total_default} -> {total_best} cycles)")  # fmt: skip
    if sim_times:
        print(f"simulator CPU time per valid candidate: mean {np.mean(sim_times):.3f} s, "
              f"median {np.median(sim_times):.3f} s, max {np.max(sim_times):.3f} s "
              f"({len(sim_times)} candidates)")  # fmt: skip
    _largest_conv_timing(env)


def _largest_conv_timing(env) -> None:
    """Time of one candidate on the largest resnet-18 conv2d (56x56, 64->64, 3x3)."""
    args = (("TENSOR", (1, 4, 56, 56, 1, 16), "int8"), ("TENSOR", (4, 4, 3, 3, 16, 16), "int8"),
            (1, 1), (1, 1, 1, 1), (1, 1), "NCHW1n16c", "int32")  # fmt: skip
    task = autotvm.task.create("conv2d_packed.vta", args, target=env.target)
    runner = vta.SimulatorRunner(env)
    space = task.config_space
    wall, cpu = [], []
    for i in np.random.default_rng(1).permutation(len(space))[:20]:
        start, start_cpu = time.perf_counter(), time.process_time()
        r = runner.measure(task, space.get(int(i)))
        if r.error_no == 0:
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    print(
        f"largest conv2d (56x56 64->64 3x3), {len(wall)} random valid candidates, seconds per "
        f"candidate: CPU median {np.median(cpu):.3f}, max {np.max(cpu):.3f}; "
        f"wall median {np.median(wall):.3f}, max {np.max(wall):.3f}"
    )


if __name__ == "__main__":
    main()
