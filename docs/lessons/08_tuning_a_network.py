"""Lesson 8: tune a whole network with the task scheduler.

A network is cut into fused subgraphs (a conv with its bias and relu, a dense layer...); each
distinct one is a search *task*, weighted by how often it occurs. The ``TaskScheduler`` shares
one trial budget among them, giving each round to the task whose tuning should lower the
estimated total latency most. The records go to one log; ``ApplyHistoryBest(log)`` makes
``build`` use the best schedule of each task. Lines starting with ``~`` hold measurements.
"""

import os
import tempfile
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import autosched as ansor

# A small network as an ONNX model: conv3x3 + relu, conv1x1 + relu, global pool, dense.
rng = np.random.default_rng(0)
weights = {
    "w1": rng.uniform(-0.5, 0.5, (16, 8, 3, 3)).astype("float32"),
    "w2": rng.uniform(-0.5, 0.5, (32, 16, 1, 1)).astype("float32"),
    "fc": rng.uniform(-0.5, 0.5, (10, 32)).astype("float32"),
}
nodes = [
    helper.make_node("Conv", ["data", "w1"], ["c1"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"]),
    helper.make_node("Conv", ["r1", "w2"], ["c2"]),
    helper.make_node("Relu", ["c2"], ["r2"]),
    helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
    helper.make_node("Flatten", ["p"], ["f"]),
    helper.make_node("Gemm", ["f", "fc"], ["out"], transB=1),
]
graph = helper.make_graph(
    nodes, "small_net",
    [helper.make_tensor_value_info("data", TensorProto.FLOAT, (1, 8, 16, 16))],
    [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
    initializer=[numpy_helper.from_array(w, name) for name, w in weights.items()],
)  # fmt: skip
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8

mod, params = ansor.from_onnx(model)
tasks, task_weights = ansor.extract_tasks(mod, params, "llvm")
print(f"== {len(tasks)} tasks")
for i, (task, weight) in enumerate(zip(tasks, task_weights)):
    print(f"-- task {i}: {task.desc} (weight {weight}, {task.compute_dag.flop_count():.0f} FLOPs)")
    print(task.compute_dag)

# AUTOSCHED_LESSON_QUICK=1 (the test suite): two trials per task; otherwise 64 per task.
per_task = 2 if os.environ.get("AUTOSCHED_LESSON_QUICK") else 64
log = Path(tempfile.mkdtemp()) / "small_net.json"
tuner = ansor.TaskScheduler(tasks, task_weights)
options = ansor.TuningOptions(
    num_measure_trials=per_task * len(tasks),
    num_measures_per_round=per_task,
    runner=ansor.LocalRunner(repeat=1, number=2, min_repeat_ms=1),
    measure_callbacks=[ansor.RecordToFile(log)],
    verbose=0,  # a notebook would show the live view; here we print the result below
)
tuner.tune(options)
print(f"== tuned: {tuner.total_trials} trials in all")
for i, (cost, trials) in enumerate(zip(tuner.best_costs, tuner.task_trials)):
    print(f"~ task {i}: best {cost * 1e3:.4f} ms after {trials} trials")
print(f"~ estimated total latency: {tuner.estimated_latency_ms():.4f} ms")

# Build the network with the best records, run it, and check it against onnxruntime.
with ansor.ApplyHistoryBest(log):
    lib = ansor.build(mod, target="llvm", params=params)
module = ansor.GraphModule(lib)
data = rng.standard_normal((1, 8, 16, 16)).astype("float32")
module.set_input("data", data)
module.run()
out = module.get_output(0).numpy()
try:
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString())
    (expected,) = session.run(None, {"data": data})
    print("== built with the tuned schedules; matches onnxruntime:",
          np.allclose(out, expected, rtol=1e-3, atol=1e-3))  # fmt: skip
except ImportError:
    print("== built with the tuned schedules; output shape", out.shape)
