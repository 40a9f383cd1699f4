"""Lesson 7: the cost model and the features it reads.

Measuring a program takes milliseconds to seconds; the search looks at thousands. So Ansor
predicts: each candidate is lowered, and every innermost store ("buffer statement") becomes a
row of 170 numbers (TVM's 164, plus 4 for tensor cores and 2 for software pipelines):
arithmetic counts, loop annotations (vectorized / unrolled / parallel lengths), and per buffer
the bytes touched, cache lines, reuse and stride. A gradient-boosted tree model (LightGBM)
learns from the measured programs to score the rest; only the best predicted are measured.
Most features are ``log2(1 + x)`` (``slog``), so 10 means ~1000.
"""

import os
import random

import numpy as np

import autosched as ansor
from autosched import te
from autosched.cost_model.features import FEATURE_NAMES, state_features
from autosched.search.annotate import sample_init_population
from autosched.search.sketch import generate_sketches

N = 128
A = te.placeholder((N, N), name="A")
B = te.placeholder((N, N), name="B")
k = te.reduce_axis((0, N), name="k")
C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
hardware = ansor.HardwareParams(num_cores=4, vector_unit_bytes=32, cache_line_bytes=64)
task = ansor.SearchTask(ansor.ComputeDAG([A, B, C]), target="llvm", hardware_params=hardware)

naive = task.compute_dag.get_init_state()
tiled = task.compute_dag.get_init_state()
i, j, kk = tiled["C"].iters
io, ii = tiled.split("C", i, [8])
jo, ji = tiled.split("C", j, [16])
tiled.reorder("C", [io, jo, kk, ii, ji])
tiled.parallel("C", io)
tiled.vectorize("C", ji)

print(f"== {len(FEATURE_NAMES)} features per buffer statement; a few of them:")
shown = ["float_addsub", "float_mul", "vec_len", "parallel_len", "B0.bytes",
         "B0.unique_bytes", "B0.lines", "B0.reuse_ct", "B0.stride", "B1.stride",
         "B2.stride"]  # fmt: skip
columns = [FEATURE_NAMES.index(name) for name in shown]
print(f"{'feature':16s} {'naive':>8s} {'tiled':>8s}")
rows = {name: state_features(task, s) for name, s in (("naive", naive), ("tiled", tiled))}
for name, col in zip(shown, columns):
    print(f"{name:16s} {rows['naive'][-1, col]:8.2f} {rows['tiled'][-1, col]:8.2f}")
print("(the tiled program has vector lanes, parallel iterations, and its first buffer B0 touches")
print(" fewer cache lines with a smaller stride: what the model learns to reward)")

# Train the model on measured random programs and see how it ranks programs it has not seen.
quick = bool(os.environ.get("AUTOSCHED_LESSON_QUICK"))
n_train, n_test = (8, 4) if quick else (48, 24)
states = sample_init_population(task, generate_sketches(task), n_train + n_test, random.Random(1))
inputs = [ansor.MeasureInput(task, s) for s in states]
options = ansor.TuningOptions(runner=ansor.LocalRunner(repeat=1, number=1, min_repeat_ms=1))
measurer = options.make_measurer()
results = measurer.measure(inputs)
measurer.close()
costs = np.array([r.mean_cost for r in results])
model = ansor.LGBModel(num_warmup_sample=0)
model.update(inputs[:n_train], results[:n_train])
scores = model.predict(task, states[n_train:])  # higher = predicted faster
print(f"== trained on {n_train} measured programs, scored {n_test} others")
fastest_predicted = int(np.argmax(scores))
test_costs = costs[n_train:]
rank = int(np.sum(test_costs < test_costs[fastest_predicted])) + 1
print(
    f"~ the model's favourite is number {rank} of {n_test} by measured time "
    f"({test_costs[fastest_predicted] * 1e3:.3f} ms; the fastest: {test_costs.min() * 1e3:.3f} ms)"
)
