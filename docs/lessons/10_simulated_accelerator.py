"""Lesson 10: a convolution on a simulated accelerator (VTA).

VTA, the Versatile Tensor Accelerator, is an int8 GEMM engine: each cycle it multiplies
BATCH x BLOCK_IN inputs by BLOCK_OUT x BLOCK_IN weights into int32 accumulators (one GEMM
micro-op). It has no caches: a program moves every tile between DRAM and its on-chip buffers
itself, with three modules (load, compute, store) running in parallel and synchronised by
dependence tokens. autosched carries a numpy simulator of it whose "measurement" is an exact
cycle count, so everything this lesson prints, cycles included, is deterministic. See
docs/vta.md.
"""

import os
from collections import Counter

import numpy as np

from autosched import autotvm, vta
from autosched.autotvm.tuner import RandomTuner, XGBTuner
from autosched.vta import top
from autosched.vta.top import tile_config
from codegen.vta import TileConfig, footprint, packed_state
from runtime.vta import encode, to_dict
from tensorir.lower import infer_bound
from tensorir.state_printer import state_str

env = vta.get_env()  # TVM's vta_config.json fields; the defaults are the Pynq board's
print(f"== the environment: target {env.target}")
shape = f"{env.BATCH}x{env.BLOCK_IN} by {env.BLOCK_IN}x{env.BLOCK_OUT}"
print(f"BATCH={env.BATCH} BLOCK_IN={env.BLOCK_IN} BLOCK_OUT={env.BLOCK_OUT}: a GEMM micro-op "
      f"is a {shape} int8 product")  # fmt: skip
for name in ("inp", "wgt", "acc", "uop"):
    print(f"{name} buffer: {env.spec.depth(name)} entries")

# A 3x3 convolution, 32 -> 32 channels, in VTA's packed layouts: the input NCHW1n16c
# (N//BATCH, C//BLOCK_IN, H, W, BATCH, BLOCK_IN), the weights OIHW16o16i.
# AUTOSCHED_LESSON_QUICK=1 (the test suite): an 8x8 image instead of 14x14.
size = 8 if os.environ.get("AUTOSCHED_LESSON_QUICK") else 14
channels = 32
rng = np.random.default_rng(0)
data = rng.integers(-128, 128, (1, channels // 16, size, size, 1, 16), dtype=np.int8)
kernel = rng.integers(-128, 128, (channels // 16, channels // 16, 3, 3, 16, 16), dtype=np.int8)
# out = clip(acc >> 9, -127, 127) as int8: the requantisation runs on VTA's ALU.
workload = top.conv2d_workload(data.shape, kernel.shape, strides=1, padding=1, shift=9)
expected = top.conv2d_packed_reference(data, kernel, (1, 1), (1, 1), 9, -127, 127)
print(f"== the workload: {channels}x{size}x{size} int8 input, {channels} 3x3 filters, padding 1,"
      f" int32 accumulators requantised to int8")  # fmt: skip
print(f"{workload.gemm_uops} block products: no schedule takes fewer GEMM cycles than that")

# A configuration is the template's knobs: inner tile sizes of the batch, output height and
# width (in pixels) and input / output channels (in blocks of 16), and virtual threads: with
# two, each thread owns half of every buffer, so the load module fills one half while the
# compute module works on the other.
configs = {
    "row": TileConfig(tile_b=1, tile_h=1, tile_w=size, tile_ci=1, tile_co=2),
    "image": TileConfig(1, size, size, 1, 2),
    "image/2": TileConfig(1, size, size, 1, 2, oc_threading=2),
}
# How a configuration becomes a program: the knobs schedule the convolution as a State (the
# steps of lessons 3-4), with VTA's on-chip buffers as storage scopes (local.inp_buffer ...)
# and its units as pragmas (dma_copy, gemm, alu); tensorir lowers that to loops, and
# codegen/vta/lower.py turns each marked loop nest into instructions (docs/vta.md).
print("== the schedule of 'row' (extents after bound inference; loops of extent 1 shown only "
      "where a pragma marks them)")  # fmt: skip
print(state_str(infer_bound(packed_state(workload, configs["row"], env.spec))), end="")
runs = {}
for name, config in configs.items():
    kernel_program = top.build(workload, config, env)  # schedule, lowering, then the ISA
    program = kernel_program.program
    print(f"== {name}: {config}")
    print(f"per thread the tiles need {footprint(workload, config)}")
    ops = Counter(
        f"{i.opcode} {getattr(i, 'memory_type', getattr(i, 'alu_opcode', ''))}".strip()
        for i in program.insns
    )
    print(f"{len(program.insns)} instructions ({dict(sorted(ops.items()))}),"
          f" {len(program.uops)} micro-ops")  # fmt: skip
    if name == "row":
        print("the first instructions (fields that are not zero or False):")
        for insn in program.insns[:8]:
            fields = {k: v for k, v in to_dict(insn).items() if v and k != "opcode"}
            print(f"  {insn.opcode:6s} {fields}")
        gemm = next(i for i in program.insns if i.opcode == "GEMM" and not i.reset)
        print(f"the first GEMM as the hardware reads it, one 128-bit word: {encode(gemm):#034x}")
    out, stats = kernel_program.run(data, kernel)  # on the simulator
    print(f"run on the simulator: bit-exact against the int8 numpy reference: "
          f"{np.array_equal(out, expected)}")  # fmt: skip
    runs[name] = stats

print("== the counters (bytes moved, micro-ops run) and cycles of the three configurations")
print(f"{'':18s}" + "".join(f"{name:>10s}" for name in runs))
for counter in next(iter(runs.values())).counters():
    print(f"{counter:18s}" + "".join(f"{getattr(s, counter):10d}" for s in runs.values()))
for module in ("load", "compute", "store"):
    print(f"{module + ' busy':18s}" + "".join(f"{s.busy[module]:10d}" for s in runs.values()))
print(f"{'GEMM utilisation':18s}"
      + "".join(f"{workload.gemm_uops / s.cycles:10.0%}" for s in runs.values()))  # fmt: skip
print(f"{'microseconds':18s}"
      + "".join(f"{s.cycles / env.timing.clock_mhz:10.2f}" for s in runs.values()))  # fmt: skip
print("(row loads the weights again for every row; image loads each block of them once;")
print(" image/2 splits the output channels between two virtual threads, so loading the next")
print(" input-channel block of one overlaps computing the other's, at the price of loading the")
print(" input once per thread)")

# The same knobs are an AutoTVM template, "conv2d_packed.vta" (lesson 9): the simulator is the
# runner (vta.SimulatorRunner, in this process), and a configuration's cost is its simulated
# time, so tuning is deterministic too. Invalid configurations (a tile that does not divide its
# axis, or a thread count that does not divide its tile) are instantiation errors.
args = (
    ("TENSOR", data.shape, "int8"), ("TENSOR", kernel.shape, "int8"),
    (1, 1), (1, 1), (1, 1), "NCHW1n16c", "int32",
)  # fmt: skip
task = autotvm.task.create("conv2d_packed.vta", args, target=env.target)
print(f"== the AutoTVM task {task.name}: {len(task.config_space)} configurations")
runner = vta.SimulatorRunner(check_correctness=True)  # also compares with the reference
measure_option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=1), runner=runner)
for tuner in (RandomTuner(task, seed=0), XGBTuner(task, plan_size=8, feature_type="knob")):
    tuner.tune(24, measure_option=measure_option)
    best = tile_config(tuner.best_config)
    seconds = tuner.best_measure_pair[1].costs[0]
    print(f"{type(tuner).__name__}, 24 trials: best {seconds * 1e6:.2f} us = "
          f"{round(seconds * env.timing.clock_mhz * 1e6)} cycles with {best}")  # fmt: skip
    names = [name for name, config in configs.items() if config == best]
    print(f"  that is {names[0]} above" if names else "  (not one of the three above)")
measure_option["builder"].close()
