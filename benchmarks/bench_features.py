"""Lowering and feature extraction per state on a fixed workload (issue 29, search speed).

    python benchmarks/bench_features.py                  # CPU ms per state, per phase
    python benchmarks/bench_features.py --profile 30     # and cProfile's top 30 (cumulative)

The workload is fixed (seeded): for three resnet-18 tasks on ``llvm`` (the 3x3 conv2d at
56x56x64, task 2; a winograd conv2d, task 9; the dense layer, task 22), the first 50 states
of the initial population and 150 mutations of the population (what evolution feeds the
cost model), 200 states per task. Each task's states are lowered and extracted cold in one
batch, as the cost model asks for them: :func:`~autosched.cost_model.feature_pool.states_features`
with an empty feature cache, in this process (``AUTOSCHED_FEATURE_WORKERS=0``).

Reported: CPU seconds (``time.process_time``, less sensitive to a shared machine's load than
wall time; still, compare runs made side by side) per state, split into bound inference
(``analyze``), the loop simplifier, unrolling, the layout rewrite, the features proper and the
rest (emitting the loop nest). ``--profile N`` prints cProfile's N costliest functions: call
counts do not depend on the load.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time
from collections import Counter

import numpy as np

import autosched as ansor
import autosched.cost_model.features as F
import tensorir.lower as L
from autosched.cost_model.feature_pool import FeatureCache, states_features
from autosched.search.mutation import mutate
from tensorir.graph import get_network

TASKS = (2, 9, 22)


def workload(per_task: int = 200) -> list:
    """``[(task, states)]``: the fixed evolved states of each task of :data:`TASKS`."""
    mod, params, _, _ = get_network("resnet-18", batch_size=1, layout="NHWC")
    tasks, _ = ansor.extract_tasks(mod, params, "llvm")
    out = []
    for ti in TASKS:
        task = tasks[ti]
        policy = ansor.SketchPolicy(task, ansor.RandomModel(), seed=0)
        init = policy.sample_initial_population()
        rng = np.random.default_rng(1)
        states, pool = list(init[: per_task // 4]), list(init)
        while len(states) < per_task:
            child = mutate(task, pool[int(rng.integers(len(pool)))], rng, policy.params)
            if child is not None:
                states.append(child)
                pool.append(child)
        out.append((task, states))
    return out


def _timed(split: Counter, module, name: str, label: str) -> None:
    """Charge the CPU time of ``module.name`` to ``split[label]`` (wraps the function)."""
    fn = getattr(module, name)

    def wrapper(*args, **kwargs):
        t0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            split[label] += time.process_time() - t0

    setattr(module, name, wrapper)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--states", type=int, default=200, help="states per task")
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's top N")
    args = parser.parse_args(argv)
    os.environ["AUTOSCHED_FEATURE_WORKERS"] = "0"  # this process: what is measured
    work = workload(args.states)
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for task, states in work:
            states_features(task, states, cache=FeatureCache())
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(args.profile)
        print(text.getvalue())
        return 0
    split: Counter = Counter()
    for module, name, label in (
        (L, "analyze", "analyze"), (L, "simplify_program", "simplify"),
        (L, "unroll_loops", "unroll"), (L, "rewrite_layouts", "layout"),
        (F, "program_features", "features"), (F, "lowered_features", "total"),
    ):  # fmt: skip
        _timed(split, module, name, label)
    grand = 0.0
    for task, states in work:
        split.clear()
        states_features(task, states, cache=FeatureCache())
        n = len(states)
        parts = {k: split[k] for k in ("analyze", "simplify", "unroll", "layout", "features")}
        parts["emit+other"] = split["total"] - sum(parts.values())
        grand += split["total"]
        cells = ", ".join(f"{k} {1e3 * v / n:.2f}" for k, v in parts.items())
        print(f"{task.desc}: {1e3 * split['total'] / n:.2f} ms/state ({cells})")
    print(f"total: {grand:.2f} CPU s for {sum(len(s) for _, s in work)} states")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
