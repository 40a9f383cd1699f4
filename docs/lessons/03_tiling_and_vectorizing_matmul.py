"""Lesson 3: tile and vectorize a matrix product, and time it against numpy.

The naive loop nest reads B column-wise (a cache miss per element) and uses one core, one lane.
A tiled schedule keeps a block of C in registers while k runs (``cache_write`` to "local"),
vectorizes the innermost j loop and runs the tiles in parallel. Lines starting with ``~`` hold
measured times (they change from run to run).
"""

import os
import time

import numpy as np

import autosched as ansor
from autosched import te
from tensorir.bounds import infer_bound
from tensorir.state_printer import state_str

# AUTOSCHED_LESSON_QUICK=1 (the test suite) shrinks the problem so the lesson runs in seconds.
N = 128 if os.environ.get("AUTOSCHED_LESSON_QUICK") else 512
A = te.placeholder((N, N), name="A")
B = te.placeholder((N, N), name="B")
k = te.reduce_axis((0, N), name="k")
C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
dag = ansor.ComputeDAG([A, B, C])

naive = dag.get_init_state()

tiled = dag.get_init_state()
tiled.cache_write("C", "local")  # C.local: the accumulator tile, computed per tile of C
i, j = tiled["C"].iters
io, ii = tiled.split("C", i, [4])  # 4 rows x 32 columns of C per tile: 4 x 2 AVX2 vectors
jo, ji = tiled.split("C", j, [32])
tiled.reorder("C", [io, jo, ii, ji])
tiled.parallel("C", io)
tiled.compute_at("C.local", "C", jo)  # the tile's accumulation runs inside (i.0, j.0)
li, lj, lk = tiled["C.local"].iters
tiled.reorder("C.local", [lk, li, lj])  # k outermost: each A/B element is loaded once per tile
tiled.unroll("C.local", li)
tiled.vectorize("C.local", lj)
tiled.vectorize("C", tiled["C"].iters[-1])
print("== the tiled state (compute_at leaves C.local's extents to bound inference: None)")
print(tiled)
print("== the same state with the bounds inferred: a 4x32 tile, k over all of N")
print(state_str(infer_bound(tiled)))

rng = np.random.default_rng(0)
a = rng.standard_normal((N, N)).astype("float32")
b = rng.standard_normal((N, N)).astype("float32")
expected = a @ b
for name, state in (("naive", naive), ("tiled", tiled)):
    func = ansor.build(state, "llvm")
    c = np.empty((N, N), dtype="float32")
    func(a, b, c)
    print(f"== {name}: matches numpy: {np.allclose(c, expected, rtol=1e-3, atol=1e-3)}")
    seconds = func.time_evaluator(number=3, repeat=3)(a, b, c).mean
    print(f"~ {name}: {seconds * 1e3:.3f} ms, {2 * N**3 / seconds / 1e9:.1f} GFLOP/s")

start = time.perf_counter()
for _ in range(10):
    a @ b
numpy_s = (time.perf_counter() - start) / 10
print(f"~ numpy (a tuned BLAS): {numpy_s * 1e3:.3f} ms, {2 * N**3 / numpy_s / 1e9:.1f} GFLOP/s")
