"""Feature extraction of many states: a cache, and parallel worker processes for batches.

:func:`states_features` is the batching entry the cost model calls.

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
import gc
import json
import logging
from collections import OrderedDict
from contextlib import contextmanager

import numpy as np

from ..measure.timing import phase
from ..suppressed import counts as suppressed_counts
from ..suppressed import merge as merge_suppressed
from ..suppressed import suppressed
from ..workers import WorkerPool, cpu_count, env
from .feature_store import FeatureStore, entry_key, hardware_part
from .features import N_FEATURES, lowered_features, state_features

__all__ = [
    "DEFAULT_CACHE",
    "MIN_STATES_PER_WORKER",
    "FeatureCache",
    "extract_many",
    "num_workers",
    "shutdown",
    "states_features",
    "store_keys",
    "worker_pool",
]

_log = logging.getLogger(__name__)

# A batch goes to the pool in chunks of at least this many states (two chunks at least).
# Measured on a 2-core EPYC (resnet-18's largest conv): 16 states took 63 ms in-process and
# 40 ms on two workers, 128 states 509 and 306 ms, so even small batches gain; below about 8
# states per chunk the pickling round trip eats the gain. Evolution's batches of new states
# are often 50-70 states, so the old fixed threshold (128) kept them in-process, on a 16-core
# GPU host too (features were 127 s of a 314 s resumed H200 piece).
MIN_STATES_PER_WORKER = 8

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


def worker_pool(workers: int) -> WorkerPool:
    """The shared pool of ``workers`` processes (started on first use): feature extraction's,
    also used by GPU sampling (:mod:`autosched.search.sample_pool`)."""
    return _workers(workers)


def shutdown() -> None:
    """Stop the worker processes (they are started again on the next use)."""
    pool = _pool.pop("pool", None)
    if pool is not None:
        pool.close()


atexit.register(shutdown)


@contextmanager
def _older_objects_frozen():
    """Keep the objects alive at entry out of the garbage collector's passes until exit.

    Lowering a batch of states allocates millions of small IR nodes, so the collector runs
    its passes often, and each full pass rescans every object the process already holds (the
    DAGs, the populations, the records): about 15% of the extraction's time in a small
    process, more in a tuning one. ``gc.freeze`` moves those objects out of its view and
    ``gc.unfreeze`` back; what the batch allocates is collected as usual. Nothing is done if
    something else froze objects already (its freeze is not ours to undo).
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _extract_chunk(job: tuple) -> tuple[list[np.ndarray], dict]:
    """Worker side: replay, lower, verify (GPU) and extract each state of the chunk; the rows,
    and the errors suppressed meanwhile (counted in the tuning process)."""
    before = suppressed_counts()
    with _older_objects_frozen():
        rows = _extract(*job)
    return rows, dict(suppressed_counts() - before)


def _extract(dag, gpu_limits, cache_line_bytes, steps_json) -> list[np.ndarray]:
    from tensorir.schedule import replay
    from tensorir.steps import steps_from_json

    out = []
    for text in steps_json:
        try:
            state = replay(dag, steps_from_json(json.loads(text)[1]))
        except Exception as exc:  # noqa: BLE001 - an invalid state is scored -inf, as in-process
            if not isinstance(exc, ValueError):  # ScheduleError: invalid; anything else: a bug
                suppressed("cost-model features")
            out.append(np.zeros((0, N_FEATURES), np.float32))
            continue
        out.append(lowered_features(state, gpu_limits, cache_line_bytes))
    return out


def extract_many(
    task, steps_json: list[str], workers: int, chunks: int | None = None
) -> list[np.ndarray]:
    """Feature rows of the states whose ``to_json()`` texts are ``steps_json``, in order.

    Parameters
    ----------
    task : SearchTask
    steps_json : list of str
        ``json.dumps(state.to_json())`` of each state (the feature cache's key part).
    workers : int
        Worker processes to spread the states over (at least 1).
    chunks : int, optional
        Jobs to cut the states into (default: two per worker).
    """
    limits = task.hardware_params.as_limits() if task.target.is_gpu else None
    line = task.hardware_params.cache_line_bytes or 64
    # Two chunks per worker: one slow chunk does not leave the other workers idle for long.
    n_chunks = min(len(steps_json), 2 * workers if chunks is None else max(1, chunks))
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
        rows, errors = outcome.value
        merge_suppressed(errors)
        out.extend(rows)
    return out


class FeatureCache:
    """An LRU map from state keys to feature arrays.

    The key is ``(workload_key, str(target), steps-JSON)``: the steps replay deterministically
    to one program, and the JSON is cheaper to produce than the printed loop tree (which also
    needs bound inference). States with different steps but equal programs are extracted twice,
    which is harmless.
    """

    def __init__(self, max_entries: int = 20000):
        self.max_entries = max_entries
        self._data: OrderedDict = OrderedDict()
        self.hits = self.misses = 0

    @staticmethod
    def key(task, state) -> tuple:
        return (task.workload_key, str(task.target), json.dumps(state.to_json()))

    def get(self, key):
        arr = self._data.get(key)
        if arr is not None:
            self._data.move_to_end(key)
            self.hits += 1
        else:
            self.misses += 1
        return arr

    def put(self, key, arr: np.ndarray) -> None:
        arr.setflags(write=False)  # shared between callers
        self._data[key] = arr
        if len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        self._data.clear()


DEFAULT_CACHE = FeatureCache()


def states_features(
    task, states, cache: FeatureCache | None = None, store: FeatureStore | None = None
) -> list[np.ndarray]:
    """:func:`state_features` of many states, reusing ``cache`` (default: a module-wide LRU).

    A large batch of new states is extracted in parallel worker processes
    (this module's pool); the rows are the same as in-process.

    With a ``store`` (the feature rows kept beside a log, used for measured programs), a
    state missing from ``cache`` is looked up there before it is lowered, and every state's
    rows end up in the store (written by its next flush).

    Returns read-only arrays (cached arrays are shared). The time is charged to the
    ``features`` phase of the current timing ledger.
    """
    with phase("features"):
        return _states_features(task, states, cache, store)


def _states_features(task, states, cache, store=None) -> list[np.ndarray]:
    cache = DEFAULT_CACHE if cache is None else cache
    keys = [cache.key(task, s) for s in states]
    stored = _store_keys(task, keys) if store is not None else None
    out: list = [None] * len(keys)
    first: dict = {}  # key of a state to extract -> its first index in the batch
    for i, key in enumerate(keys):
        if key in first:  # a duplicate within the batch is extracted once
            cache.hits += 1
            continue
        out[i] = cache.get(key)
        if out[i] is None and stored is not None:
            out[i] = store.get(stored[i])
            if out[i] is not None:
                cache.put(key, out[i])
        if out[i] is None:
            first[key] = i
    missing = [i for i, arr in enumerate(out) if arr is None]
    todo = list(first.values())
    workers = num_workers()
    # As many chunks as the batch fills with MIN_STATES_PER_WORKER states (at most two per
    # worker): a batch of 65 on a 16-core host goes to 8 workers rather than staying here.
    chunks = min(2 * workers, len(todo) // MIN_STATES_PER_WORKER)
    rows = None
    if workers and chunks >= 2:
        try:
            rows = extract_many(task, [keys[i][2] for i in todo], workers, chunks)
        except Exception as exc:  # noqa: BLE001 - a broken pool must not stop the search
            # An internal fallback (results are the same, only slower): a diagnostic for the
            # "autosched" logger, not a warning addressed to the user.
            _log.warning(
                "parallel feature extraction failed (%s: %s); extracting in this process",
                type(exc).__name__,
                exc,
            )
            shutdown()
    if rows is None:
        with _older_objects_frozen():
            rows = [state_features(task, states[i]) for i in todo]
    fresh = {}
    for i, arr in zip(todo, rows, strict=True):
        cache.put(keys[i], arr)
        fresh[keys[i]] = arr
    for i in missing:
        out[i] = fresh[keys[i]]
    if stored is not None:
        for skey, arr in zip(stored, out, strict=True):
            store.add(skey, arr)
    return out


def store_keys(task, states) -> list[bytes]:
    """The feature store's keys of ``states`` of ``task``
    (:func:`autosched.cost_model.feature_store.entry_key`)."""
    return _store_keys(task, [FeatureCache.key(task, s) for s in states])


def _store_keys(task, keys: list[tuple]) -> list[bytes]:
    """The feature store's keys of the states whose in-memory cache keys are ``keys``."""
    hardware = hardware_part(task)
    return [entry_key(wk, target, hardware, steps) for wk, target, steps in keys]
