"""Dispatch contexts: which configuration a template call gets.

A template call asks ``DispatchContext.current.query(target, workload)``; contexts form a
stack (``with ...:``), each answering what it knows and passing the rest to the one below it.
At the bottom, :class:`FallbackContext` answers every workload with a
:class:`~autosched.autotvm.space.FallbackConfigEntity` and warns once per workload.
``ApplyHistoryBest`` (the tuned records) lives in :mod:`autosched.autotvm.dispatch`.
"""

from __future__ import annotations

import contextlib
import logging
import warnings

from .space import FallbackConfigEntity

__all__ = ["ApplyConfig", "DispatchContext", "FallbackContext", "quiet_fallback"]

_log = logging.getLogger(__name__)


class DispatchContext:
    """Base of the dispatch contexts; ``DispatchContext.current`` is the innermost one."""

    current: DispatchContext | None = None

    def __init__(self):
        self._old_ctx = DispatchContext.current

    def query(self, target, workload):
        """The configuration for ``workload`` on ``target`` (this context's or a lower one's)."""
        ret = self._query_inside(target, workload)
        if ret is None:
            ret = self._old_ctx.query(target, workload)
        return ret

    def _query_inside(self, target, workload):
        raise NotImplementedError

    def __enter__(self):
        self._old_ctx = DispatchContext.current
        DispatchContext.current = self
        return self

    def __exit__(self, *exc) -> None:
        DispatchContext.current = self._old_ctx


class ApplyConfig(DispatchContext):
    """Give ``config`` to every template call inside (what tuning and task creation use).

    ``workload`` is the workload of the last template call answered.
    """

    def __init__(self, config):
        super().__init__()
        self._config = config
        self.workload = None

    def _query_inside(self, target, workload):
        if workload is not None:
            self.workload = workload
        return self._config


_QUIET = [0]  # > 0 inside quiet_fallback()


@contextlib.contextmanager
def quiet_fallback():
    """Fallback configurations without their per-workload warning (the caller warned)."""
    _QUIET[0] += 1
    try:
        yield
    finally:
        _QUIET[0] -= 1


class FallbackContext(DispatchContext):
    """The bottom context: a fallback configuration, with one warning per workload."""

    def __init__(self):
        super().__init__()
        self.memory: dict = {}
        self.silent = False

    def _query_inside(self, target, workload):
        key = (str(target), workload)
        if key in self.memory:
            return self.memory[key]
        if workload is not None and not self.silent and not _QUIET[0]:
            warnings.warn(
                f"autotvm: no tuned config for workload {workload!r} on target {target}; "
                "using a fallback config, which may be slow (tune it, then "
                "apply_history_best(log))",
                stacklevel=4,
            )
        cfg = FallbackConfigEntity()
        if workload is not None:
            self.memory[key] = cfg
        return cfg

    def query(self, target, workload):
        return self._query_inside(target, workload)

    def clear_cache(self, target, workload) -> None:
        """Forget the fallback of ``workload`` (its knobs are redefined at the next call)."""
        self.memory.pop((str(target), workload), None)


DispatchContext.current = FallbackContext()
