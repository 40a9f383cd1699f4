"""Lesson 5: GPU schedules: binding loops to blocks and threads, and shared memory.

A GPU runs a grid of thread blocks. A schedule says which loops *are* the grid:
``bind(stage, loop, "blockIdx.x")`` / ``"threadIdx.x"`` turn loops into block and thread
indices. Threads of one block share fast on-chip memory: ``cache_read(A, "shared", ...)``
copies a tile of A there, computed at a loop of the consumer so each block loads its tile once.
The same state becomes CUDA C or OpenCL C; here it runs on the OpenCL device (a GPU, or PoCL).
"""

import numpy as np

import autosched as ansor
from autosched import te
from tensorir.bounds import infer_bound
from tensorir.state_printer import state_str

N = 128
A = te.placeholder((N, N), name="A")
B = te.placeholder((N, N), name="B")
k = te.reduce_axis((0, N), name="k")
C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
dag = ansor.ComputeDAG([A, B, C])

# 1. Binding only: one thread per element of C, 64 threads per block.
s = dag.get_init_state()
fused = s.fuse("C", list(s["C"].iters[:2]))
bx, tx = s.split("C", fused, [64])
s.bind("C", bx, "blockIdx.x")
s.bind("C", tx, "threadIdx.x")
print("== one thread per element: the fused (i, j) loop split into blocks of 64 threads")
print(s)
print("== as OpenCL C")
print(ansor.generate_source(s, "opencl").code)

# 2. Tiles in shared memory: a 32x32 tile of C per block, 8x8 = 64 threads with a 4x4 register
#    tile each; per k step of 8, the block copies the A and B tiles it needs to shared memory.
s = dag.get_init_state()
s.cache_write("C", "local")
i, j = s["C"].iters
bi, ti, ii = s.split("C", i, [8, 4])
bj, tj, jj = s.split("C", j, [8, 4])
s.reorder("C", [bi, bj, ti, tj, ii, jj])
block = s.fuse("C", [bi, bj])
thread = s.fuse("C", [s["C"].iters[1], s["C"].iters[2]])
s.bind("C", block, "blockIdx.x")
s.bind("C", thread, "threadIdx.x")
s.compute_at("C.local", "C", thread)
li, lj, lk = s["C.local"].iters
ko, ki = s.split("C.local", lk, [8])
s.reorder("C.local", [ko, ki, li, lj])
for name in ("A", "B"):
    shared = s.cache_read(name, "shared", ["C.local"]).name
    s.compute_at(shared, "C.local", ko)
    copy = s.fuse(shared, list(s[shared].iters))
    _, tid = s.split(shared, copy, [64])
    s.bind(shared, tid, "threadIdx.x")  # the block's 64 threads copy the tile together
print("== shared-memory tiles (the copy loops of A.shared and B.shared run per k.0)")
print(state_str(infer_bound(s)))
print("== as CUDA C (barriers around the shared-memory copy)")
# The kernel's first line on sm_90+ waits for the kernels before it (griddepcontrol.wait): in a
# network's CUDA graph, each kernel is launched while the one before it finishes.
print(ansor.generate_source(s, "cuda").code)

# Run it on the OpenCL device and check it.
rng = np.random.default_rng(0)
a = rng.standard_normal((N, N)).astype("float32")
b = rng.standard_normal((N, N)).astype("float32")
func = ansor.build(s, "opencl")
c = np.empty((N, N), dtype="float32")
func(a, b, c)
print("== run on OpenCL; matches numpy:", np.allclose(c, a @ b, rtol=1e-3, atol=1e-3))
