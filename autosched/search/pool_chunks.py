"""Run a search job's chunks on the feature pool's worker processes, or in this process.

The GPU search's costly per-state work (sampling a sketch, verifying a mutation: annotation,
bound inference and lowering against the device limits, 5-30 ms a state) is cut into seeded
chunks so that the result depends on the seeds only. :func:`run_chunks` sends the chunks to
:mod:`autosched.cost_model.feature_pool`'s workers (idle while the policy searches) when there
are at least two, and runs them here when there is no pool (one core,
``AUTOSCHED_FEATURE_WORKERS=0``) or the pool fails: the same chunks, the same answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

__all__ = ["run_chunks"]

_log = logging.getLogger(__name__)


def run_chunks(func: Callable, jobs: Sequence[tuple], workers: int | None, what: str) -> list:
    """``func(*job)`` for every job, in order, on the worker pool where it pays.

    Parameters
    ----------
    func : callable
        A module-level function (the workers import it by name).
    jobs : sequence of tuple
    workers : int or None
        Worker processes (None: the feature pool's :func:`num_workers`; 0: in this process).
    what : str
        The job's name for the log line of a failed pool ("sampling", "mutation").

    Returns
    -------
    list
        One result per job.
    """
    from ..cost_model.feature_pool import num_workers, worker_pool

    workers = num_workers() if workers is None else workers
    if workers and len(jobs) > 1:
        try:
            outcomes = worker_pool(workers).map(func, jobs)
            bad = [o for o in outcomes if not o.ok]
            if bad:
                why = bad[0].detail if bad[0].error is None else repr(bad[0].error)
                raise RuntimeError(f"{what} in a worker process failed: {why}")
            return [o.value for o in outcomes]
        except Exception as exc:  # noqa: BLE001 - a broken pool must not stop the search
            _log.debug("%s in process (the worker pool failed: %s)", what, exc)
    return [func(*job) for job in jobs]
