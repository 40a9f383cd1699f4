"""The default GPU schedule of a group without a reduction (bias + relu, adds, casts: what a
network's untuned groups run): a large one gives each thread several outputs, a block apart,
and still computes the group (no GPU needed: lowering, CUDA source and the simt
interpreter)."""

from __future__ import annotations

import numpy as np

from autosched.kernel import emit_source, lower_for
from autosched.network import default_schedules
from autosched.network.default_schedules import default_gpu_schedule, elements_per_thread
from tensorir import te
from tensorir.dag import ComputeDAG
from tensorir.loop_interp import run_program


def test_elements_per_thread_keeps_enough_blocks():
    # resnet-50 batch 16's first-stage bias + relu: 50176 blocks of 256 -> 8 a thread
    assert elements_per_thread(16 * 56 * 56 * 256, 256) == 8
    assert elements_per_thread(16 * 7 * 7 * 512, 256) == 2  # 1568 blocks: 392 at 4, too few
    assert elements_per_thread(56 * 56 * 64, 256) == 1  # resnet-18 batch 1: 784 blocks stay
    assert elements_per_thread(1026 * 256, 256) == 2  # 1026 blocks: 4 does not divide them
    assert elements_per_thread(1009 * 256, 256) == 1  # a prime number of blocks
    assert elements_per_thread(16 * 56 * 56 * 256, 256, max_elements=2) == 2


def test_a_large_bias_relu_gives_each_thread_several_outputs_and_computes_it(monkeypatch):
    monkeypatch.setattr(default_schedules, "MIN_BLOCKS_PER_KERNEL", 8)  # small enough to run
    x = te.placeholder((2, 16, 16, 32), name="x", dtype="float16")
    b = te.placeholder((32,), name="b", dtype="float16")
    y = te.compute(x.shape, lambda n, h, w, c: te.max(x[n, h, w, c] + b[c], 0), name="y")
    dag = ComputeDAG([x, b, y])
    state = default_gpu_schedule(dag)
    code = emit_source(lower_for(state, "cuda", "k"), "cuda").as_dict()["code"]
    assert "#pragma unroll" in code and "< 8;" in code  # 8 outputs a thread, unrolled
    one = default_gpu_schedule(dag, max_elements_per_thread=1)
    assert "< 8;" not in emit_source(lower_for(one, "cuda", "k"), "cuda").as_dict()["code"]
    rng = np.random.default_rng(3)
    xs = rng.standard_normal(x.shape).astype(np.float16)
    bs = rng.standard_normal(32).astype(np.float16)
    out = np.zeros(x.shape, np.float16)
    run_program(lower_for(state, "cuda", "k"), [xs, bs, out], simt=True)
    np.testing.assert_allclose(out, np.maximum(xs + bs, 0), rtol=1e-3, atol=1e-3)


def test_groups_with_a_reduction_keep_one_output_per_thread(monkeypatch):
    monkeypatch.setattr(default_schedules, "MIN_BLOCKS_PER_KERNEL", 1)
    a = te.placeholder((64, 32), name="a")
    k = te.reduce_axis((0, 32), name="k")
    s = te.compute((64,), lambda i: te.sum(a[i, k], axis=k), name="s")
    state = default_gpu_schedule(ComputeDAG([a, s]))
    code = emit_source(lower_for(state, "cuda", "k"), "cuda").as_dict()["code"]
    assert "#pragma unroll" not in code
