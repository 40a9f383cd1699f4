"""Feature extraction of many states in parallel worker processes.

Under a trained cost model one search round lowers thousands of new states for their features
(about 5 ms each, almost all of it lowering), while the host's other cores sit idle. This pool
spreads those states over worker processes (:class:`autosched.workers.WorkerPool`: fresh
interpreters that never import the user's script): each gets the DAG and a chunk of step
lists, replays them (about 0.5 ms each), lowers and extracts, and sends the rows back. The
result is exactly what :func:`autosched.cost_model.features.state_features` computes in-process.

The pool is created on first use and shared by all tasks of the process. Set
``AUTOSCHED_FEATURE_WORKERS`` to the number of workers (0 turns the pool off; the default is
the number of usable cores, and no pool on a single core).
"""

from __future__ import annotations

import atexit
import json

import numpy as np

from ..workers import WorkerPool, cpu_count, env

__all__ = ["MIN_BATCH", "extract_many", "num_workers", "shutdown"]

# Below this many states the pickling round trip and worker start are not worth it.
MIN_BATCH = 128

_pool: dict = {}


def num_workers() -> int:
    """Workers the pool uses (0: extract in this process)."""
    workers = env("AUTOSCHED_FEATURE_WORKERS")
    if workers is not None:
        return workers
    cores = cpu_count()
    return cores if cores > 1 else 0


def _workers(workers: int) -> WorkerPool:
    pool = _pool.get("pool")
    if pool is None or pool.size != workers:
        shutdown()
        pool = WorkerPool(workers, ("autosched.cost_model.feature_pool",), name="feature worker")
        _pool["pool"] = pool
    return pool


def shutdown() -> None:
    """Stop the worker processes (they are started again on the next use)."""
    pool = _pool.pop("pool", None)
    if pool is not None:
        pool.close()


atexit.register(shutdown)


def _extract_chunk(job: tuple) -> list[np.ndarray]:
    """Worker side: replay, lower, verify (GPU) and extract each state of the chunk."""
    dag, gpu_limits, cache_line_bytes, steps_json = job
    from tensorir.schedule import replay
    from tensorir.steps import steps_from_json

    from .features import N_FEATURES, lowered_features

    out = []
    for text in steps_json:
        try:
            state = replay(dag, steps_from_json(json.loads(text)[1]))
        except Exception:  # noqa: BLE001 - an invalid state is scored -inf, as in-process
            out.append(np.zeros((0, N_FEATURES), np.float32))
            continue
        out.append(lowered_features(state, gpu_limits, cache_line_bytes))
    return out


def extract_many(task, steps_json: list[str], workers: int) -> list[np.ndarray]:
    """Feature rows of the states whose ``to_json()`` texts are ``steps_json``, in order.

    Parameters
    ----------
    task : SearchTask
    steps_json : list of str
        ``json.dumps(state.to_json())`` of each state (the feature cache's key part).
    workers : int
        Worker processes to spread the states over (at least 1).
    """
    limits = task.hardware_params.as_limits() if task.target.is_gpu else None
    line = task.hardware_params.cache_line_bytes or 64
    # Two chunks per worker: one slow chunk does not leave the other workers idle for long.
    n_chunks = min(len(steps_json), 2 * workers)
    bounds = np.linspace(0, len(steps_json), n_chunks + 1).astype(int)
    jobs = [
        (task.compute_dag, limits, line, steps_json[lo:hi])
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    out: list[np.ndarray] = []
    for outcome in _workers(workers).map(_extract_chunk, [(job,) for job in jobs]):
        if not outcome.ok:
            why = outcome.detail if outcome.error is None else repr(outcome.error)
            raise RuntimeError(f"feature extraction in a worker process failed: {why}")
        out.extend(outcome.value)
    return out
