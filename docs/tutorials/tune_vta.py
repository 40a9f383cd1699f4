"""Tuning a convolutional network on VTA (seed 004), on the simulated VTA.

AutoTVM templates with tunable knobs (tile factors, virtual threads) implement VTA's operators.
Here we tune every packed convolution of resnet-18 on the simulated accelerator (docs/vta.md):
its "measurement" is the simulator's exact cycle count at 100 MHz. The tuning writes a log of
the best knobs of every operator; compiling the network then reads it.

    python docs/tutorials/tune_vta.py

With ``TVM_TRACKER_HOST`` / ``TVM_TRACKER_PORT`` set (the seed's variables), it measures on the
simulator servers of key "sim" registered with that tracker (docs/vta.md, "Tuning on simulator
servers"); without them, in this process. CI runs it with ``AUTOSCHED_TUTORIAL_TRIALS=1`` (one
trial per task and tuner).
"""

import os

import numpy as np

import autosched as ansor
from autosched import autotvm, vta
from autosched import quantize as aq
from autosched.autotvm.tuner import GATuner, GridSearchTuner, RandomTuner, XGBTuner
from autosched.vta.top import graph_pack

######################################################################
# Compile the network
# -------------------
# Quantize resnet-18 to int8 (global scale 8.0; the first convolution, with its 3 input
# channels, stays float on the CPU), then pack the layers between the first max pool and the
# global average pool into VTA's NCHW1n16c layout.


def compile_network(env, target, model, start_pack, stop_pack):
    # Get the model (NCHW, batch env.BATCH) from the model zoo
    mod, params, input_shape, _ = ansor.networks.get_network(
        model, batch_size=env.BATCH, layout="NCHW"
    )

    # Perform quantization (batch norms are folded first)
    with aq.qconfig(global_scale=8.0, skip_conv_layers=[0]):
        mod = aq.quantize(mod, params)

    # Perform graph packing for the VTA target
    assert env.BLOCK_IN == env.BLOCK_OUT
    relay_prog = graph_pack(
        mod["main"],
        env.BATCH,
        env.BLOCK_OUT,
        env.WGT_WIDTH,
        start_name=start_pack,
        stop_name=stop_pack,
    )
    return relay_prog, input_shape


######################################################################
# Measurement
# -----------
# The seed measures on Pynq boards registered with an RPC tracker. Our VTA is the simulator,
# and its servers are ``python -m autosched.exec.rpc_server --tracker HOST:9190 --key sim``
# (the key is ``env.TARGET``): with the seed's environment variables set, the tasks are
# measured there through ``autotvm.RPCRunner``, as the seed does (start the tracker and the
# servers first, docs/vta.md). Without them, ``vta.SimulatorRunner()`` runs the simulator in
# this process. Either way a configuration's cost is its simulated time (cycles / 100 MHz),
# the same number; the builder is not used.

# Tracker host and port can be set by your environment
use_tracker = "TVM_TRACKER_HOST" in os.environ or "TVM_TRACKER_PORT" in os.environ
tracker_host = os.environ.get("TVM_TRACKER_HOST", "127.0.0.1")
tracker_port = int(os.environ.get("TVM_TRACKER_PORT", 9190))

env = vta.get_env()
target = env.target  # Target("ext_dev -device=vta"), host "llvm"

network = "resnet-18"
start_pack = "nn.max_pool2d"
stop_pack = "nn.global_avg_pool2d"

log_file = f"{env.TARGET}.{network}.log"
# CI sets AUTOSCHED_TUTORIAL_TRIALS=1 (one trial per task and tuner); a real run uses 200.
n_trial = int(os.environ.get("AUTOSCHED_TUTORIAL_TRIALS", "200"))

if use_tracker:
    runner = autotvm.RPCRunner(
        env.TARGET,
        host=tracker_host,
        port=tracker_port,
        number=5,
        timeout=60,
        module_loader=vta.module_loader(),
    )
else:
    runner = vta.SimulatorRunner()

tuning_option = {
    "log_filename": log_file,
    "tuners": ["xgb", "ga", "random", "gridsearch"],
    "n_trial": n_trial,
    "early_stopping": None,
    "measure_option": autotvm.measure_option(
        builder=autotvm.LocalBuilder(),
        runner=runner,
    ),
}


######################################################################
# Tuning
# ------
# Each task is tuned by each of the four tuners (the seed picks one of them); every
# measurement goes to a temporary log, and ``pick_best`` keeps the best record per workload.


def make_tuner(name, tsk):
    if name == "xgb":
        return XGBTuner(tsk, loss_type="rank")
    if name == "ga":
        return GATuner(tsk, pop_size=50)
    if name == "random":
        return RandomTuner(tsk)
    if name == "gridsearch":
        return GridSearchTuner(tsk)
    raise ValueError("Invalid tuner: " + name)


def tune_tasks(tasks, measure_option, tuners, n_trial, early_stopping, log_filename):
    tmp_log_file = log_filename + ".tmp"
    if os.path.exists(tmp_log_file):
        os.remove(tmp_log_file)

    for i, tsk in enumerate(reversed(tasks)):
        for name in tuners:
            prefix = f"[Task {i + 1:2d}/{len(tasks):2d} {name:<10}] "
            tuner_obj = make_tuner(name, tsk)
            tsk_trial = min(n_trial, len(tsk.config_space))
            tuner_obj.tune(
                n_trial=tsk_trial,
                early_stopping=early_stopping,
                measure_option=measure_option,
                callbacks=[
                    autotvm.callback.progress_bar(tsk_trial, prefix=prefix),
                    autotvm.callback.log_to_file(tmp_log_file),
                ],
            )

    # pick the best records to a cache file
    autotvm.record.pick_best(tmp_log_file, log_filename)
    os.remove(tmp_log_file)


######################################################################
# Extract the tasks, tune them, compile and evaluate the network


def tune_and_evaluate(tuning_opt):
    print("Extract tasks...")
    relay_prog, input_shape = compile_network(env, target, network, start_pack, stop_pack)
    tasks = autotvm.task.extract_from_program(
        relay_prog, ops=("nn.conv2d",), target=target, target_host=env.target_host
    )

    # keep the packed conv2d tasks (the first convolution runs on the CPU)
    tasks = list(filter(lambda t: len(t.args[0][1]) > 4 and "conv" in t.name, tasks))

    # resnet-18 of our model zoo (relay.testing's) has 11: the seed's gluon model has 10
    print(f"Extracted {len(tasks)} conv2d tasks:")
    for tsk in tasks:
        inp = tsk.args[0][1]
        wgt = tsk.args[1][1]
        batch = inp[0] * inp[4]
        in_filter = inp[1] * inp[5]
        out_filter = wgt[0] * wgt[4]
        height, width = inp[2], inp[3]
        hkernel, wkernel = wgt[2], wgt[3]
        hstride, wstride = tsk.args[2][0], tsk.args[2][1]
        hpad, wpad = tsk.args[3][0], tsk.args[3][1]
        print(
            f"({batch}, {height}, {width}, {in_filter}, {out_filter}, "
            f"{hkernel}, {wkernel}, {hpad}, {wpad}, {hstride}, {wstride})"
        )

    print("Tuning...")
    tune_tasks(
        tasks,
        tuning_opt["measure_option"],
        tuning_opt["tuners"],
        tuning_opt["n_trial"],
        tuning_opt["early_stopping"],
        tuning_opt["log_filename"],
    )

    # compile the conv2d layers with the best records; the other layers run on the host
    with autotvm.apply_history_best(log_file):
        print("Compile...")
        module = vta.build(relay_prog)

    # the input image (random, as the seed's)
    rng = np.random.default_rng(0)
    image = rng.uniform(size=input_shape).astype("float32")
    module.set_input("data", image)

    print("Evaluate inference on the simulated VTA...")
    module.run()
    stats = module.stats
    print(f"Simulated conv2d layers on VTA at {env.timing.clock_mhz:.0f} MHz:")
    print(f"  cycles: {stats['cycles']} ({module.simulated_seconds() * 1e3:.2f} ms)")
    for name in ("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
                 "out_store_nbytes", "gemm_counter", "alu_counter"):  # fmt: skip
        print(f"  {name}: {stats[name]}")
    scores = module.get_output(0).reshape(-1)
    print("Top-5 classes:", [int(k) for k in np.argsort(scores)[::-1][:5]])


# Run the tuning and evaluate the results
tune_and_evaluate(tuning_option)
