"""Auto-scheduling a whole neural network for a Mali GPU (OpenCL).

An executed copy of the seed tutorial (TVM's "Auto-scheduling a Neural Network for mali GPU"),
written for autosched. Run it as a script: ``python docs/tutorials/tune_network_mali.py``.

The seed tunes a board (an RK3399 with a Mali GPU) over RPC. autosched does that too
(``autosched.rpc``, docs/remote.md: a tracker, a server per board, ``RPCRunner``); so that this
script runs on any machine, it measures on the OpenCL device of this one.
"""

# The code keeps the seed's style (% formatting, np.random), hence:
# ruff: noqa: UP031, NPY002

# The best schedule of a network depends on the device and on the shapes, so tuning for the
# device you deploy on pays off. This tutorial tunes a whole network for a Mali GPU, programmed
# through OpenCL.
#
# As in the NVIDIA tutorial, the network is cut into small subgraphs, each distinct subgraph is
# one search task, and a task scheduler spends the time budget where it shortens the network's
# latency most. Each task is a compute DAG from the operator library's compute definitions;
# the auto-scheduler derives the space of schedules from it, with no schedule templates.

import os

import numpy as np

import autosched as auto_scheduler
from autosched import networks

# ---------------------------------------------------------------------------------------------
# Running this tutorial in CI. Unset (as you will run it), these change nothing. CI sets them to
# run the same file in a minute on a machine without a Mali GPU (docs/tutorials/README.md):
#   AUTOSCHED_TUTORIAL_TARGET   another target, "llvm" or "opencl"
#   AUTOSCHED_TUTORIAL_TRIALS   measurement trials per task, instead of the 200 in all below
ci_target = os.environ.get("AUTOSCHED_TUTORIAL_TARGET")
ci_trials = os.environ.get("AUTOSCHED_TUTORIAL_TRIALS")
# ---------------------------------------------------------------------------------------------

# Define the network
# ------------------
# ``networks.get_network`` returns a model-zoo network with random weights (resnet-N,
# resnet3d-N, mobilenet, squeezenet_v1.1, inception_v3); ``auto_scheduler.from_onnx`` imports
# your own model. Convolutional networks tune best in the NHWC layout, which the
# auto-scheduler optimises most.

# The network and the compilation target. The seed compiles the host side for the board's
# 64-bit ARM CPU (``host="llvm -mtriple=aarch64-linux-gnu"``) and cross-compiles it with the
# Android NDK; here the kernels run on this machine's OpenCL device.
network = "mobilenet"
batch_size = 1
layout = "NHWC"
if ci_target:
    target = auto_scheduler.Target(ci_target)
else:
    target = auto_scheduler.Target("opencl -device=mali", host="llvm -mtriple=aarch64-linux-gnu")
dtype = "float32"
log_file = "%s-%s-B%d-%s.json" % (network, layout, batch_size, target.kind.name)

# Connecting to the board
# -----------------------
# The seed starts an RPC tracker, registers the board with it under a device key ("rk3399")
# and asks the tracker for the board in every step below. The same commands work here
# (``python -m autosched.exec.rpc_tracker`` / ``rpc_server --key rk3399``, docs/remote.md);
# this script uses the local OpenCL device so that it runs without a board.

# Extract the search tasks
# ------------------------
# The tasks and their weights: a task's weight is how many times its subgraph occurs in the
# network, and the task scheduler minimises ``sum(latency[t] * weight[t])``, an estimate of the
# network's end-to-end latency.

print("Extract tasks...")
mod, params, input_shape, output_shape = networks.get_network(
    network, batch_size, layout, dtype=dtype
)

# The device's limits
# -------------------
# Candidates that need more threads or more local memory than the GPU has are rejected before
# they are measured, so the search must know the device's limits. Read them from the device
# (the seed asks the remote board; here it is the local OpenCL device) and hand them to the
# tasks as ``HardwareParams``.
if target.kind.name == "opencl":
    dev = auto_scheduler.device("opencl", 0)
    max_shared_memory_per_block = dev.max_shared_memory_per_block
    # OpenCL has no separate limit on local (private) memory: INT32_MAX turns that check off.
    max_local_memory_per_block = 2147483647  # INT32_MAX
    max_threads_per_block = dev.max_threads_per_block
    max_vthread_extent = int(dev.warp_size / 4) if int(dev.warp_size / 4) > 1 else dev.warp_size
    warp_size = dev.warp_size
    hardware_params = auto_scheduler.HardwareParams(
        -1,
        16,
        64,
        max_shared_memory_per_block,
        max_local_memory_per_block,
        max_threads_per_block,
        max_vthread_extent,
        warp_size,
    )
else:
    hardware_params = None  # a CPU target (CI): the host's own parameters

tasks, task_weights = auto_scheduler.extract_tasks(
    mod["main"], params, target, hardware_params=hardware_params
)

for idx, task in enumerate(tasks):
    print("========== Task %d  (workload key: %s) ==========" % (idx, task.workload_key))
    print(task.compute_dag)

# Tune and evaluate
# -----------------
# * ``num_measure_trials`` is the number of candidates measured in all. Use a small number
#   (200) for a quick demonstration and about 800 per task for a search that converges
#   (mobilenet has about twenty tasks, so about 16000). ``max_tuning_seconds`` stops the tuning
#   when its time budget is spent, whichever comes first.
# * ``RecordToFile`` appends every measurement to the log, which the compile step reads the
#   best schedules from and a later run can resume from.
# * See ``auto_scheduler.TuningOptions`` and ``auto_scheduler.LocalRunner`` for the other
#   options.
#
# The seed's ``builder=LocalBuilder(build_func="ndk")`` and ``runner=RPCRunner(device_key,
# host="127.0.0.1", port=9190, repeat=3, timeout=50)`` measure on the board; with a tracker and
# a server running, ``auto_scheduler.RPCRunner`` takes the same arguments (docs/remote.md). Here
# a LocalRunner measures on this machine (OpenCL kernels are compiled in the runner, for the
# device that runs them).

print("Begin tuning...")
tuner = auto_scheduler.TaskScheduler(tasks, task_weights)
tune_option = auto_scheduler.TuningOptions(
    # change 200 to 16000 for the best performance (CI: a few trials per task)
    num_measure_trials=int(ci_trials) * len(tasks) if ci_trials else 200,
    max_tuning_seconds=3600,
    runner=auto_scheduler.LocalRunner(repeat=3, timeout=50),
    measure_callbacks=[auto_scheduler.RecordToFile(log_file)],
)
tuner.tune(tune_option)

# Compile the whole network with the best schedules in the log.
print("Compile...")
with auto_scheduler.ApplyHistoryBest(log_file):
    lib = auto_scheduler.build(mod, target, params=params)

# Create the graph executor. The seed exports the library with the NDK, uploads it to the
# board and loads it there (``remote.upload`` / ``remote.load_module`` of ``autosched.rpc``,
# docs/remote.md); here the network runs where it was compiled.
dev = auto_scheduler.device(str(target), 0)
module = auto_scheduler.GraphModule(lib["default"](dev))
data = np.random.uniform(size=input_shape).astype(dtype)
module.set_input("data", data)

# Evaluate
print("Evaluate inference time cost...")
print(module.benchmark(dev, repeat=3, min_repeat_ms=500))

# What tuning prints
# ------------------
# The task scheduler's table lists every task's best latency, its speed and its trials, then
# the estimated latency of the whole network, the trials measured, the time spent and the next
# task to tune. Candidates that fail (too many threads, a wrong answer) are part of the search
# and only show up as failed trials.
#
# Stopping early
# --------------
# Ctrl-C stops the tuning; every finished batch is in the log, and the network compiles from
# it (a task without a valid record gets a default schedule, with a warning).
#
# Other tips
# ----------
# 1. The search compiles many programs and extracts their features on the CPU, so a host with
#    many fast cores shortens the tuning.
# 2. ``python -m autosched.records --mode distill -i log.json`` keeps only the best records of
#    a large log.
# 3. Resume a search by creating the task scheduler with the previous log:
#    ``auto_scheduler.TaskScheduler(tasks, task_weights, load_log_file=log_file)``.
# 4. With several boards, the seed measures on all of them at once through the RPC tracker;
#    so does ``RPCRunner`` with one ``rpc_server`` per board under the same key.
