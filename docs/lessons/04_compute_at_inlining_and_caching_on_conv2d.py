"""Lesson 4: compute_at, inlining and caching on a conv2d + bias + relu.

A fused network layer is several ops: padding, the convolution, the bias add, the relu. Scheduled
naively each is a separate loop nest writing a full intermediate tensor. Three primitives fix that:
``compute_inline`` folds an elementwise op into its consumer (no tensor at all),
``compute_at`` computes a producer tile by tile inside its consumer's loops, and
``cache_write`` gives a stage a local accumulator that stays in registers.
"""

import numpy as np

import autosched as ansor
from autosched.workloads import conv2d_nhwc_bias_relu
from tensorir.bounds import infer_bound
from tensorir.interp import eval_dag
from tensorir.state_printer import state_str

dag = ansor.ComputeDAG(conv2d_nhwc_bias_relu(N=1, H=14, W=14, CI=16, CO=32))
print("== conv2d + bias + relu, NHWC")
print(dag)

rng = np.random.default_rng(0)
inputs = [rng.standard_normal(t.shape).astype("float32") for t in dag.input_tensors]
expected = eval_dag(dag, inputs)[0]  # the numpy reference


def check(title, state):
    """Print the state (bounds inferred), build it, and compare with the reference."""
    print(f"== {title}")
    print(state_str(infer_bound(state)))
    out = np.empty(expected.shape, dtype="float32")
    ansor.build(state, "llvm")(*inputs, out)
    print("   matches the reference:", np.allclose(out, expected, rtol=1e-4, atol=1e-4))


s = dag.get_init_state()
check("naive: four loop nests, three intermediate tensors", s)

# Padding and the bias add are elementwise: inline them into their consumers.
s.compute_inline("PaddedInput")
s.compute_inline("T_add")
check("PaddedInput and T_add inlined: padding is a condition in the conv's read", s)

# Tile the output (T_relu) over (x, f) and compute the conv per tile.
n, y, x, f = s["T_relu"].iters
xo, xi = s.split("T_relu", x, [7])
fo, fi = s.split("T_relu", f, [16])
s.reorder("T_relu", [n, y, xo, fo, xi, fi])
s.compute_at("Conv2dOutput", "T_relu", fo)
check("compute_at: a 7x16 tile of the conv per (y, x.0, f.0), consumed at once", s)

# A local accumulator: cache_write makes Conv2dOutput.local, reduced in registers.
t = dag.get_init_state()
t.compute_inline("PaddedInput")
t.compute_inline("T_add")
t.cache_write("Conv2dOutput", "local")
n, y, x, f = t["Conv2dOutput"].iters
fo, fi = t.split("Conv2dOutput", f, [16])
t.compute_at("Conv2dOutput.local", "Conv2dOutput", fo)
t.vectorize("Conv2dOutput", t["Conv2dOutput"].iters[-1])
check("cache_write: Conv2dOutput.local accumulates 16 channels, then is copied out", t)
