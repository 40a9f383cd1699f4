"""The schedule fuzzer's operators and checks (used by test_fuzz_schedules.py).

Every workload is small, with awkward extents (7, 13, 30...) so that sampled splits rarely
divide and the tail guards run. ``check_state`` lowers, builds for LLVM and runs a state on
random inputs and compares with the reference interpreter; ``replay_hint`` is what a failure
prints so the state can be rebuilt with ``State.from_json(dag, steps)``.
"""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np

import autosched as ansor
from autosched import workloads as W
from autosched.search import state_utils
from autosched.search.annotate import sample_init_population
from autosched.search.mutation import mutate
from autosched.search.sketch import generate_sketches
from autosched.task import SearchTask
from tensorir import ops, te
from tensorir import steps as st
from tensorir.dag import ComputeDAG
from tensorir.interp import eval_dag
from tensorir.steps import ScheduleError

# float32 kernels accumulate in another order than the float64 reference: reductions here
# are at most a few hundred terms of uniform(-1, 1) products, so 1e-4 relative plus 1e-4
# absolute (for sums that cancel to about 0) is well above rounding noise.
RTOL = ATOL = 1e-4


def _scoped(build):
    """Build a tensor list under a fresh NameScope (unique stage names per DAG)."""

    def make():
        scope = ops.NameScope()
        with scope:
            return build(scope)

    return make


@_scoped
def _batch_matmul(scope):
    x = scope.placeholder((3, 7, 13))
    y = scope.placeholder((3, 10, 13))
    return [x, y, ops.batch_matmul(x, y)]


@_scoped
def _conv2d_nchw_stride(scope):
    x = scope.placeholder((1, 5, 13, 11))
    w = scope.placeholder((6, 5, 3, 3))
    out = ops.conv2d(x, w, strides=(2, 2), padding=(1, 2, 1, 0), data_layout="NCHW")
    return [x, w, out]


@_scoped
def _conv2d_dilated(scope):
    x = scope.placeholder((1, 11, 10, 3))
    w = scope.placeholder((3, 3, 3, 7))
    out = ops.conv2d(
        x, w, padding=(2, 2, 2, 2), dilation=(2, 2), data_layout="NHWC", kernel_layout="HWIO"
    )
    return [x, w, out]


@_scoped
def _conv3d(scope):
    x = scope.placeholder((1, 3, 5, 7, 6))
    w = scope.placeholder((5, 3, 3, 3, 3))
    out = ops.conv3d(x, w, padding=(1, 1, 1, 1, 1, 1), data_layout="NCDHW")
    return [x, w, out]


@_scoped
def _winograd(scope):
    x = scope.placeholder((1, 7, 7, 5))
    tw = scope.placeholder((4, 4, 5, 6))  # tile 2: alpha = 4, (alpha, alpha, CI, CO)
    return [x, tw, ops.conv2d_winograd_nhwc_without_weight_transform(x, tw, 2)]


@_scoped
def _max_pool(scope):
    x = scope.placeholder((1, 13, 11, 6))
    return [x, ops.pool(x, "max", 3, strides=2, padding=1, layout="NHWC")]


@_scoped
def _avg_pool(scope):
    x = scope.placeholder((1, 5, 13, 9))
    return [x, ops.pool(x, "avg", (3, 2), strides=(2, 1), padding=(1, 0, 1, 1), layout="NCHW")]


@_scoped
def _softmax(scope):
    x = scope.placeholder((7, 30))
    return [x, ops.softmax(x)]


@_scoped
def _broadcast_chain(scope):
    a = scope.placeholder((7, 13, 6))
    b = scope.placeholder((13, 1))
    c = scope.placeholder((6,))
    t = ops.multiply(ops.add(a, b), c)
    return [a, b, c, ops.tanh(ops.relu(ops.subtract(t, b)))]


def _sum_axis():
    x = te.placeholder((13, 30, 7), name="x")
    k = te.reduce_axis((0, 30), name="k")
    out = te.compute((13, 7), lambda i, j: te.sum(x[i, k, j], axis=k), name="x_red")
    return [x, out]


# name -> tensor-list builder; each DAG small enough to build and run in well under a second.
WORKLOADS = {
    "matmul": lambda: W.matmul(30, 13, 7),
    "matmul_relu": lambda: W.matmul_relu(13, 30, 17),
    "batch_matmul": _batch_matmul,
    "dense_bias": lambda: W.dense_bias(7, 30, 13),
    "conv2d_nhwc_bias_relu": lambda: W.conv2d_nhwc_bias_relu(1, 9, 7, 5, 6, 3, 3, 2, 1),
    "conv2d_nchw_stride": _conv2d_nchw_stride,
    "depthwise_conv2d": lambda: W.depthwise_conv2d_nhwc(1, 9, 11, 6, 3, 3, 1, 1),
    "winograd_conv2d": _winograd,
    "conv2d_dilated": _conv2d_dilated,
    "conv3d": _conv3d,
    "max_pool": _max_pool,
    "avg_pool": _avg_pool,
    "softmax": _softmax,
    "broadcast_chain": _broadcast_chain,
    "sum_axis": _sum_axis,
}

_TASKS: dict[tuple[str, str], SearchTask] = {}
_SKETCHES: dict[tuple[str, str], list] = {}


def task_of(name: str, target: str = "llvm") -> SearchTask:
    """The (cached) SearchTask of workload ``name``: CPU sketches for "llvm", GPU sketches
    (thread binding, shared-memory caches) for "cuda"."""
    key = (name, target)
    if key not in _TASKS:
        _TASKS[key] = SearchTask(ComputeDAG(WORKLOADS[name]()), target=target)
    return _TASKS[key]


def sketches_of(name: str, target: str = "llvm") -> list:
    key = (name, target)
    if key not in _SKETCHES:
        _SKETCHES[key] = generate_sketches(task_of(name, target))
    return _SKETCHES[key]


def perturb_splits(dag, state, rng: random.Random):
    """``state`` with the lengths of one to three of its splits redrawn at random, most not
    dividing the extent (the sampler only draws divisors, a user need not), replayed; None
    when the state has no concrete split or a later step refuses the new loop structure."""
    steps = list(state.steps)
    ids = [k for k, s in enumerate(steps) if isinstance(s, st.SplitStep) and None not in s.lengths]
    if not ids:
        return None
    for k in rng.sample(ids, min(len(ids), rng.randint(1, 3))):
        old = steps[k]
        top = max(2, (old.extent or 8) + 2)  # up to a little past the extent
        lengths = tuple(rng.randint(1, top) for _ in old.lengths)
        steps[k] = dataclasses.replace(old, lengths=lengths)
    try:
        return state_utils.replay_steps(dag, steps)
    except ScheduleError:
        return None


def fuzz_states(
    name: str, seed: int, n_sampled: int, n_mutated: int, n_perturbed: int, target: str = "llvm"
) -> list:
    """``(kind, state)`` pairs: ``n_sampled`` states drawn the way the search draws them
    (sketch + random annotation), up to ``n_mutated`` mutations of them (one mutation rule
    each, stacked at random) and up to ``n_perturbed`` with non-dividing split lengths.
    ``target`` "cuda" gives GPU states (perturbed ones are not checked against the GPU
    limits: ask for none there)."""
    task = task_of(name, target)
    dag = task.compute_dag
    sampled = sample_init_population(task, sketches_of(name, target), n_sampled, seed)
    if not sampled:
        return []
    rng = random.Random(seed * 7919 + 1)
    pool, mutated, tries = list(sampled), [], 0
    while len(mutated) < n_mutated and tries < 20 * n_mutated:
        tries += 1
        child = mutate(task, pool[rng.randrange(len(pool))], rng)
        if child is not None:
            mutated.append(child)
            pool.append(child)  # later mutations may stack on earlier ones
    perturbed, tries = [], 0
    while len(perturbed) < n_perturbed and tries < 20 * n_perturbed:
        tries += 1
        child = perturb_splits(dag, pool[rng.randrange(len(pool))], rng)
        if child is not None:
            perturbed.append(child)
    return (
        [("sampled", s) for s in sampled]
        + [("mutated", s) for s in mutated]
        + [("perturbed", s) for s in perturbed]
    )


def random_inputs(dag, seed: int) -> list[np.ndarray]:
    """uniform(-1, 1) inputs (never zeros/ones: a wrong index shows in the output)."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]


def replay_hint(name: str, seed, state, kind: str = "") -> str:
    """What a failure prints: operator, seed and the steps in the record format."""
    steps = json.dumps(state.to_json()[1])
    return (
        f"operator={name} seed={seed} {kind}\n"
        f"replay: State.from_json(ComputeDAG(WORKLOADS[{name!r}]()), json.loads(STEPS))\n"
        f"STEPS={steps}\n{state}"
    )


def check_state(
    dag, state, args: list[np.ndarray], refs: list[np.ndarray], hint: str, target: str = "llvm"
) -> None:
    """Build ``state`` for ``target``, run it on ``args`` and compare with ``refs``."""
    outs = [np.full(t.shape, np.nan, t.dtype) for t in dag.output_tensors]
    try:
        ansor.build(state, target)(*args, *outs)
    except Exception as err:
        raise AssertionError(f"build/run failed: {type(err).__name__}: {err}\n{hint}") from err
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL, err_msg=hint)


def reference(dag, args):
    return eval_dag(dag, args)
