"""GPU mutations in seeded chunks, spread over the worker processes of the feature pool.

Every child of a GPU evolution is verified against the device limits before the cost model sees
it (:func:`autosched.search.mutation.mutate`: the fragment and warp rules, then an unsimplified
lowering, about 6 ms a state). In the tuning process that was half of its active CPU on the
H100's 16-core host (issue 29: a profile of resnet-18 under a fake runner), while the other
cores waited. Here a generation's mutations go out in chunks, one per worker (at least
:data:`MIN_CHUNK` parents each), each parent with its own seed drawn by the evolution, so a
child depends on its parent and seed only, never on the number of workers or the chunks. A worker
replays each distinct parent once, mutates, verifies and sends the children's step lists back;
this process replays a child only when it is looked into
(:func:`tensorir.schedule.replay_deferred`).
"""

from __future__ import annotations

import json

__all__ = ["MIN_CHUNK", "mutate_gpu_states"]

# Parents per chunk at least: a mutation costs 5-30 ms in a worker against a round trip that
# pickles a 2-3 KB task (well under a millisecond), so small chunks keep every core busy; a
# generation of 70 mutations on a 16-core host makes 14 chunks of 5.
MIN_CHUNK = 4


def _mutate_chunk(task, parent_steps: list, seeds: list, params) -> list:
    """Worker side (also run in-process): each parent's child step list, or None."""
    from tensorir.schedule import replay
    from tensorir.steps import steps_from_json

    from .mutation import mutate

    parents: dict = {}
    out = []
    for steps, seed in zip(parent_steps, seeds, strict=True):
        key = json.dumps(steps)
        if key not in parents:
            parents[key] = replay(task.compute_dag, steps_from_json(steps))
        child = mutate(task, parents[key], seed, params)
        out.append(None if child is None else child.to_json()[1])
    return out


def mutate_gpu_states(task, states: list, seeds: list, params, workers: int | None = None):
    """One mutation of each state, from its seed, in chunks (see the module).

    Parameters
    ----------
    task : SearchTask
        A GPU task.
    states : list of State
        Parents (repeats allowed: roulette selection draws good parents often).
    seeds : list of int
        One per parent.
    params : SearchParams
    workers : int, optional
        Worker processes (default: the feature pool's :func:`num_workers`; 0 in-process).

    Returns
    -------
    list of State or None
        The child of each parent, or None where the mutation found nothing to change or its
        result failed verification.
    """
    from tensorir.schedule import replay_deferred
    from tensorir.steps import steps_from_json

    from ..cost_model.feature_pool import num_workers
    from .mutation import mutate
    from .pool_chunks import run_chunks

    if len(states) != len(seeds):
        raise ValueError(f"mutate_gpu_states: {len(states)} parents but {len(seeds)} seeds")
    workers = num_workers() if workers is None else workers
    if not workers or len(states) < 2 * MIN_CHUNK:  # one chunk: no round trip (same children)
        return [mutate(task, s, int(x), params) for s, x in zip(states, seeds, strict=True)]
    size = max(MIN_CHUNK, -(-len(states) // workers))
    steps = [s.to_json()[1] for s in states]
    jobs = [
        (task, steps[lo : lo + size], [int(x) for x in seeds[lo : lo + size]], params)
        for lo in range(0, len(states), size)
    ]
    rows = run_chunks(_mutate_chunk, jobs, workers, "mutation")
    return [
        None if child is None else replay_deferred(task.compute_dag, steps_from_json(child))
        for chunk in rows
        for child in chunk
    ]
