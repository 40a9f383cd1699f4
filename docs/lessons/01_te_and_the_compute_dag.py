"""Lesson 1: describe a computation with te, and read its compute DAG.

A computation is written once, as math, with ``te``: placeholders are the inputs, ``compute``
says what each output element is, ``reduce_axis`` + ``te.sum`` make a reduction. Nothing here
says *how* to loop; that is the schedule's job (lesson 2). The ``ComputeDAG`` collects the
ops in order and knows what the search needs: the FLOPs, a workload key, which ops are simple.
"""

import numpy as np

import autosched as ansor
from autosched import te

# C = relu(A @ B + bias): three inputs, two compute ops.
N, M, K = 64, 48, 32
A = te.placeholder((N, K), name="A")
B = te.placeholder((K, M), name="B")
bias = te.placeholder((M,), name="bias")
k = te.reduce_axis((0, K), name="k")
matmul = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")
out = te.compute((N, M), lambda i, j: te.max(matmul[i, j] + bias[j], 0.0), name="out")

# Inputs first, then outputs: this order is the argument order of the built function.
dag = ansor.ComputeDAG([A, B, bias, out])
print("== the compute DAG (one line per op, producers first)")
print(dag)

print("== its stages: kind, shape and FLOPs of one run")
for row in dag.stage_rows():
    print(f"{row['name']:8s} {row['kind']:12s} shape={row['shape']} flops={row['flops']:.0f}")
print(f"total: {dag.flop_count():.0f} FLOPs = 2*N*M*K + 2*N*M = {2 * N * M * K + 2 * N * M}")

# The workload key names this computation in record logs (a hash of its exact text).
print("== workload key:", dag.workload_key[:12] + "...")

# The DAG can be run as it is (numpy, the reference every schedule is checked against), and
# built with the default schedule (the "initial state": plain loops, lesson 2).
rng = np.random.default_rng(0)
a = rng.standard_normal((N, K)).astype("float32")
b = rng.standard_normal((K, M)).astype("float32")
c = rng.standard_normal(M).astype("float32")
func = ansor.build(dag.get_init_state(), "llvm")
result = np.empty((N, M), dtype="float32")
func(a, b, c, result)
expected = np.maximum(a @ b + c, 0)
print("== built and run; matches numpy:", np.allclose(result, expected, rtol=1e-4, atol=1e-4))
