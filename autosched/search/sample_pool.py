"""GPU sketch sampling in chunks, spread over the worker processes of the feature pool.

A GPU round samples hundreds of concrete states, each annotated, bound-inferred, lowered and
verified against the device limits (about 10-30 ms apiece), in the tuning process, while the
host's other cores wait (on the H100's 16-core host, sampling was 41% of a tune's wall time,
issue 29). Here the states are drawn in chunks of :data:`CHUNK`, each from its own seed taken
from the policy's generator, so the result depends on the seed only, never on the number of
workers: with no pool (one core, ``AUTOSCHED_FEATURE_WORKERS=0``, a small batch, or a pool
that fails) the same chunks run in this process and give the same states.

The workers are :mod:`autosched.cost_model.feature_pool`'s, through
:func:`autosched.search.pool_chunks.run_chunks` (one set of processes for every job; they are
idle while the policy samples). Each gets the task and the sketches' step
lists, samples with :func:`autosched.search.annotate.sample_init_population` and sends the
states' step lists back; this process replays a state only when it is looked into
(:func:`tensorir.schedule.replay_deferred`: the cost model and the builders take step lists).
"""

from __future__ import annotations

import json
import random

__all__ = ["CHUNK", "sample_gpu_states"]

# States per chunk: enough to amortize a worker round trip (a pickled task and sketches,
# against 10-30 ms per sampled state), few enough that a round's population (80 states under
# a 300 s budget on resnet-18) makes 10 chunks for a 16-core host rather than 5.
CHUNK = 8


def _sample_chunk(task, sketch_steps: list, n: int, seed: int, params) -> list[list]:
    """Worker side (also run in-process): ``n`` states' step records from one seed."""
    from tensorir.schedule import replay
    from tensorir.steps import steps_from_json

    from .annotate import sample_init_population

    sketches = [replay(task.compute_dag, steps_from_json(s)) for s in sketch_steps]
    states = sample_init_population(task, sketches, n, random.Random(seed), params)
    return [s.to_json()[1] for s in states]


def _chunks(n: int) -> list[int]:
    return [min(CHUNK, n - lo) for lo in range(0, n, CHUNK)]


def sample_gpu_states(task, sketches, n: int, rng, params, workers: int | None = None) -> list:
    """Up to ``n`` distinct valid states of a GPU task, sampled in chunks (see the module).

    Parameters
    ----------
    task : SearchTask
    sketches : list of State
    n : int
        States to draw (each chunk draws its share; duplicates across chunks are dropped,
        so fewer may come back).
    rng : numpy.random.Generator
        Gives one seed per chunk.
    params : SearchParams
    workers : int, optional
        Worker processes (default: the feature pool's :func:`num_workers`; 0 in-process).

    Returns
    -------
    list of State
    """
    from tensorir.schedule import replay_deferred
    from tensorir.steps import steps_from_json

    from .pool_chunks import run_chunks

    sizes = _chunks(max(0, int(n)))
    seeds = [int(x) for x in rng.integers(0, 2**63 - 1, size=len(sizes))]
    sketch_steps = [s.to_json()[1] for s in sketches]
    jobs = [(task, sketch_steps, k, seed, params) for k, seed in zip(sizes, seeds, strict=True)]
    rows = run_chunks(_sample_chunk, jobs, workers, "sampling")
    out: dict = {}
    for chunk in rows:
        for steps in chunk:
            out.setdefault(json.dumps(steps), steps)
    return [replay_deferred(task.compute_dag, steps_from_json(s)) for s in out.values()]
