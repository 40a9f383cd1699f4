"""Auto-scheduling a whole neural network for an NVIDIA GPU.

An executed copy of the seed tutorial (TVM's "Auto-scheduling a Neural Network for NVIDIA GPU"),
written for autosched. Run it as a script: ``python docs/tutorials/tune_network_cuda.py``.
"""

# The code keeps the seed's style (% formatting, np.random), hence:
# ruff: noqa: UP031, NPY002

# Why tune at all? A schedule that is fast on one GPU and one tensor shape is rarely the
# fastest on another, so the best performance comes from searching for each device and each
# workload. This tutorial tunes a complete network for an NVIDIA GPU with the auto-scheduler.
#
# The network is too large to search as one program. It is cut into small subgraphs (a
# convolution with the bias add and ReLU that follow it, for example), and each distinct
# subgraph becomes one search task. A task scheduler then shares the time budget among the
# tasks: it estimates how much tuning each task would shorten the whole network's latency and
# gives the next round of measurements to the task where that gain is largest.
#
# Each subgraph is written down as a compute DAG from the operator library's compute
# definitions (what to compute), and the auto-scheduler builds the space of schedules (how to
# compute it: tiling, fusion, thread binding, unrolling) from that DAG alone. There are no
# hand-written schedule templates to maintain, unlike template-based tuning.

import os

import numpy as np

import autosched as auto_scheduler
from autosched import networks

# ---------------------------------------------------------------------------------------------
# Running this tutorial in CI. Unset (as you will run it), these change nothing. CI sets them to
# run the same file in a minute on a machine without an NVIDIA GPU (docs/tutorials/README.md):
#   AUTOSCHED_TUTORIAL_TARGET   another target, "llvm" or "opencl"
#   AUTOSCHED_TUTORIAL_TRIALS   measurement trials per task, instead of the 200 in all below
ci_target = os.environ.get("AUTOSCHED_TUTORIAL_TARGET")
ci_trials = os.environ.get("AUTOSCHED_TUTORIAL_TRIALS")
# ---------------------------------------------------------------------------------------------

# Define the network
# ------------------
# ``networks.get_network`` returns one of the model zoo's networks (resnet-N, resnet3d-N,
# mobilenet, squeezenet_v1.1, inception_v3) with random weights, as ``(mod, params,
# input_shape, output_shape)``. Your own model comes in through ``auto_scheduler.from_onnx``
# (PyTorch models export to ONNX).
#
# The auto-scheduler works with any layout, but convolutions in NHWC give it the most room and
# get the most of its optimisations, so convert convolutional networks to NHWC.

# The network and the compilation target
network = "resnet-18"
batch_size = 1
layout = "NHWC"
target = auto_scheduler.Target(ci_target or "cuda")
dtype = "float32"
log_file = "%s-%s-B%d-%s.json" % (network, layout, batch_size, target.kind.name)

# Extract the search tasks
# ------------------------
# Next, the network's search tasks and their weights. A task's weight is how many times its
# subgraph occurs in the network, so the network's end-to-end latency is approximately
# ``sum(latency[t] * weight[t])`` over the tasks t. That sum is what the task scheduler
# minimises.

print("Extract tasks...")
mod, params, input_shape, output_shape = networks.get_network(
    network, batch_size, layout, dtype=dtype
)
tasks, task_weights = auto_scheduler.extract_tasks(mod["main"], params, target)

for idx, task in enumerate(tasks):
    print("========== Task %d  (workload key: %s) ==========" % (idx, task.workload_key))
    print(task.compute_dag)

# Begin tuning
# ------------
# A few tuning options:
#
# * ``measure_ctx`` measures every candidate in a separate long-lived process that owns the GPU,
#   so a kernel that crashes the device cannot take the tuning process down with it.
# * ``min_repeat_ms`` is the shortest time one timed repetition may take; short kernels are run
#   back to back until it is reached. This warms the GPU up, which accurate timings need: use
#   300 ms or more.
# * ``num_measure_trials`` is the number of candidates measured in all. 200 is enough for a
#   quick demonstration; for a search that converges, use about 900 per task (resnet-18 has
#   about two dozen tasks on a GPU, so about 20000). ``max_tuning_seconds`` stops the tuning
#   when the time budget is spent, whichever comes first.
# * ``RecordToFile`` appends every measurement to the log file. The log is what the compile
#   step below reads the best schedules from, what a later run resumes from, and what you can
#   analyse afterwards.
# * See ``auto_scheduler.TuningOptions`` and ``auto_scheduler.LocalRPCMeasureContext`` for the
#   other options.


def run_tuning():
    print("Begin tuning...")
    measure_ctx = auto_scheduler.LocalRPCMeasureContext(repeat=1, min_repeat_ms=300, timeout=10)

    tuner = auto_scheduler.TaskScheduler(tasks, task_weights)
    tune_option = auto_scheduler.TuningOptions(
        # change 200 to 20000 for the best performance (CI: a few trials per task)
        num_measure_trials=int(ci_trials) * len(tasks) if ci_trials else 200,
        max_tuning_seconds=3600,
        runner=measure_ctx.runner,
        measure_callbacks=[auto_scheduler.RecordToFile(log_file)],
    )
    tuner.tune(tune_option)
    measure_ctx.close()


run_tuning()

# What tuning prints
# ------------------
# The most useful output is the task scheduler's table: for every task its best latency, its
# speed (GFLOPS) and how many trials it has had, then a last line with the estimated latency
# of the whole network (the weighted sum above), the trials measured, the time spent and the
# task that gets the next round. It looks like this (at most every 30 s, or a progress bar on
# a terminal):
#
#   |  ID  | Latency (ms) | Speed (GFLOPS) | Trials |
#   -------------------------------------------------
#   |    0 |        0.005 |           0.88 |     64 |
#   |    1 |        0.010 |          99.10 |     64 |
#   ...
#   Estimated total latency: 1.587 ms  Trials: 4992  Used time : 13296 s  Next ID: 3
#
# Some candidates fail to build or run (too many threads, too much shared memory, a wrong
# answer); the search tries invalid schedules on purpose and skips them. Their errors stay in
# the measuring process and show up only as failed trials.
#
# Stopping early
# --------------
# You can stop the tuning at any time with Ctrl-C. Every finished batch of measurements is in
# the log, and as long as it holds a valid schedule for each task the network compiles (next
# section); a task without one is compiled with a default schedule, with a warning.

# Compile and evaluate
# --------------------
# After tuning, compile the network with the best schedule of each task found in the log.

print("Compile...")
with auto_scheduler.ApplyHistoryBest(log_file):
    lib = auto_scheduler.build(mod, target=target, params=params)

# Create the graph executor
dev = auto_scheduler.device(str(target), 0)
module = auto_scheduler.GraphModule(lib["default"](dev))
data = np.random.uniform(size=input_shape).astype(dtype)
module.set_input("data", data)

# Evaluate
print("Evaluate inference time cost...")
print(module.benchmark(dev, repeat=3, min_repeat_ms=500))

# The same measurement through the runtime module's time evaluator, as older versions of the
# tutorial time it:
ftimer = module.module.time_evaluator("run", dev, repeat=3, min_repeat_ms=500)
prof_res = np.array(ftimer().results) * 1e3  # convert to milliseconds
print("Mean inference time (std dev): %.2f ms (%.2f ms)" % (np.mean(prof_res), np.std(prof_res)))

# Other tips
# ----------
# 1. The search compiles many programs and extracts features from them on the CPU, so a host
#    with many fast cores shortens the tuning.
# 2. ``python -m autosched.records --mode distill -i log.json`` shrinks a large log to the best
#    records only.
# 3. To resume a search, create the task scheduler in ``run_tuning`` with the log of the
#    previous run: ``auto_scheduler.TaskScheduler(tasks, task_weights, load_log_file=log_file)``.
# 4. The seed tutorial measures on several GPUs at once through an RPC tracker and
#    ``RPCRunner``; so does autosched: one ``python -m autosched.exec.rpc_server --device cuda``
#    per GPU under one key, and ``auto_scheduler.RPCRunner(key, host, port)`` (docs/remote.md).
