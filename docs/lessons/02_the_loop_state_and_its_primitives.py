"""Lesson 2: the loop state, and what each scheduling primitive does to the loop nest.

``dag.get_init_state()`` is the naive schedule: one loop per axis, in order. Each primitive is a
step that rewrites the loop nest; printing the state shows the nest (``for`` loops with their
ranges; annotated loops print their annotation instead of ``for``). The steps are recorded,
so a state replays from its step list (that is what a record log stores).
"""

import autosched as ansor
from autosched import te
from tensorir.bounds import infer_bound
from tensorir.lower import lower
from tensorir.state_printer import print_python_code, state_str

A = te.placeholder((64, 64), name="A")
B = te.placeholder((64, 64), name="B")
k = te.reduce_axis((0, 64), name="k")
C = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
D = te.compute((64, 64), lambda i, j: C[i, j] * 2.0, name="D")
dag = ansor.ComputeDAG([A, B, D])


def step(title, state):
    print(f"== {title}")
    print(state)


s = dag.get_init_state()
step("the initial state: one loop per axis", s)

# split: one loop becomes two (outer, inner); the inner one has the given extent.
i, j, kk = s["C"].iters
io, ii = s.split("C", i, [8])
step("split C.i by 8 -> i.0 (0,8) outside, i.1 (0,8) inside", s)

jo, ji = s.split("C", j, [16])
step("split C.j by 16", s)

# reorder: any order of a stage's loops (here the usual i.0 j.0 k i.1 j.1 tiling).
s.reorder("C", [io, jo, kk, ii, ji])
step("reorder C to i.0, j.0, k, i.1, j.1: an 8x16 tile of C per (i.0, j.0)", s)

# fuse: adjacent loops become one (their extents multiply).
fused = s.fuse("C", [io, jo])
step("fuse i.0 and j.0 into one loop of 4*8 = 32 iterations", s)

# annotations: parallel (threads), vectorize (SIMD lanes), unroll (copies of the body).
s.parallel("C", fused)
step("parallel: the fused loop runs on all cores", s)
s.vectorize("C", s["C"].iters[-1])
step("vectorize the innermost j.1 (16 lanes)", s)
s.unroll("C", s["C"].iters[-2])
step("unroll i.1 (8 copies of the body)", s)

# compute_at: move a producer under a loop of its consumer. C is then computed one row at a
# time, right before D reads that row; bound inference shrinks C to what one row needs.
t = dag.get_init_state()
di, dj = t["D"].iters
t.compute_at("C", "D", di)
step("another state: compute_at C under D's loop i (one row of C per row of D)", t)
print("== C's extents are left to bound inference (None above); inferred:")
print(state_str(infer_bound(t)))
print("== lowered, with the bounds inferred: C now holds one row")
print(lower(t))

print("== the steps of the first state, as schedule code (what print_best shows)")
print(print_python_code(s))
