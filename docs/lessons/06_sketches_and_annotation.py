"""Lesson 6: what the search generates: sketches, then random annotation.

Ansor does not enumerate schedules one primitive at a time. It first derives a few *sketches*
from the DAG by rules (multi-level tiling of each reduction, fusing its consumer into the
tiles, adding a cache stage, rfactor for long reductions...): loop structures whose tile sizes
are still unknown. Then *annotation* fills each sketch at random: tile sizes, where producers
are computed, which loops are parallel, vectorized, unrolled. These random programs are the
initial population that evolution and the cost model (lesson 7) improve.
"""

import random

import autosched as ansor
from autosched import te
from autosched.search.annotate import sample_init_population
from autosched.search.sketch import generate_sketches
from tensorir.bounds import infer_bound
from tensorir.state_printer import state_str

A = te.placeholder((512, 512), name="A")
B = te.placeholder((512, 512), name="B")
k = te.reduce_axis((0, 512), name="k")
C = te.compute((512, 512), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
D = te.compute((512, 512), lambda i, j: te.max(C[i, j], 0.0), name="D")
# Fixed hardware numbers, so this lesson prints the same on every machine.
hardware = ansor.HardwareParams(num_cores=4, vector_unit_bytes=32, cache_line_bytes=64)
task = ansor.SearchTask(ansor.ComputeDAG([A, B, D]), target="llvm", hardware_params=hardware)

sketches = generate_sketches(task)
# Sketches 0 and 1: C tiled SSRSRS (i, j split in four, k in two) and computed inside a tile of
# the relu D (at two depths); sketch 2: D left alone, at the root.
print(f"== {len(sketches)} sketches of matmul + relu (tile sizes undecided: None)")
for n, sketch in enumerate(sketches):
    print(f"-- sketch {n}: {len(sketch.steps)} steps")
    print(sketch)

# Annotation: each sample picks a sketch and fills it in. One seed, one population.
population = sample_init_population(task, sketches, 3, random.Random(0))
for n, state in enumerate(population):
    print(f"== random program {n}: tile sizes chosen, loops annotated (bounds inferred)")
    print(state_str(infer_bound(state)))
