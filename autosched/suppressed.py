"""Errors the library catches and goes on without: counted, logged, raised under strict mode.

Some failures are a normal outcome and the code goes on without the result: a feature vector,
a default schedule, a seed, a record. What is expected there (an invalid candidate's
``ValueError``, a missing driver) is caught by name. Anything else is caught too, so that one
bad candidate never takes a tuning run down, but never silently: the ``except`` block calls
:func:`suppressed`, which

* logs the exception with its traceback at DEBUG (``logging.getLogger("autosched")`` sees it),
* counts it under the name of its site, so a tune's summary can say
  ``2 errors suppressed in the search (cost-model features 2); ...`` (:func:`summary`),
* re-raises it when ``AUTOSCHED_STRICT=1`` (docs/environment.md), unless it is of the site's
  ``expected`` types. The test suite runs strict (tests/conftest.py), so a bug behind one of
  these blocks fails a test instead of turning into a slower or emptier result.

This module sits at the bottom of autosched's layers (it imports no other autosched module), so
every layer can use it. Counts are per process: the feature workers send theirs back with their
rows (:mod:`autosched.cost_model.feature_pool`).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import Counter

from runtime.environment import env

__all__ = ["counts", "merge", "strict", "summary", "suppressed"]

_log = logging.getLogger(__name__)
_counts: Counter = Counter()
_lock = threading.Lock()


def strict() -> bool:
    """Whether ``AUTOSCHED_STRICT`` asks for suppressed errors to be raised."""
    return bool(env("AUTOSCHED_STRICT"))


def suppressed(site: str, expected: type | tuple = ()) -> None:
    """Record the exception being handled as suppressed at ``site``; call it in the ``except``.

    Counts it, logs it at DEBUG with its traceback and, under ``AUTOSCHED_STRICT=1``,
    re-raises it, unless it is an instance of ``expected`` (the failures that are a normal
    outcome of the site, such as a driver that is missing).

    Parameters
    ----------
    site : str
        What was being done, in a few words ("cost-model features"): the key of the count.
    expected : type or tuple of type
        Exceptions never re-raised here, in strict mode neither (still counted and logged).
    """
    exc = sys.exc_info()[1]
    with _lock:
        _counts[site] += 1
    _log.debug("suppressed error at %s", site, exc_info=True)
    if exc is not None and not isinstance(exc, expected) and strict():
        raise exc


def counts() -> Counter:
    """A copy of this process's counts by site (take one before a run, subtract after)."""
    with _lock:
        return Counter(_counts)


def merge(more: dict) -> None:
    """Add counts taken in another process (a worker's) to this process's."""
    with _lock:
        _counts.update({k: int(v) for k, v in more.items() if v})


def summary(since: Counter | None = None, where: str = "the search") -> str | None:
    """One line on the errors suppressed since the ``since`` snapshot of :func:`counts`, or
    None when there were none, e.g. ``3 errors suppressed in the search (cost-model features
    2, default schedules 1); rerun with AUTOSCHED_STRICT=1 or DEBUG logging to see them``."""
    now = counts()
    if since is not None:
        now.subtract(since)
    now = +now  # positive counts only
    total = sum(now.values())
    if not total:
        return None
    parts = ", ".join(f"{site} {n}" for site, n in now.most_common())
    noun = "error" if total == 1 else "errors"
    return (
        f"{total} {noun} suppressed in {where} ({parts}); rerun with AUTOSCHED_STRICT=1 or "
        'DEBUG logging (logging.getLogger("autosched")) to see them'
    )
