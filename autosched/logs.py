"""TVM's logger names, so that the tutorials' logging tips reach our messages.

TVM's tutorials say ``logging.getLogger("autotvm").setLevel(logging.DEBUG)`` (every
measurement of the template tuners) and configure ``logging.getLogger("auto_scheduler")``.
Template tuning (:mod:`autosched.autotvm`) logs to ``"autotvm"`` and the search (policy,
task scheduler, features) to ``"auto_scheduler.<module>"``, as TVM's do; both loggers are
made children of ``"autosched"`` (:func:`adopt_tvm_loggers`, run by ``import autosched``), so
configuring the one ``"autosched"`` logger still controls every diagnostic
(docs/architecture.md).

A TVM tip sets a level and adds no handler: Python's last-resort handler would then drop
everything below WARNING. Each of the two loggers carries a :class:`_LastResort` handler that
prints a record to stderr only when no other handler would see it, so the tip prints what it
promises and nothing is printed twice once the user configures logging.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["AUTOTVM", "AUTO_SCHEDULER", "adopt_tvm_loggers"]

AUTOTVM = "autotvm"
AUTO_SCHEDULER = "auto_scheduler"


class _LastResort(logging.StreamHandler):
    """Prints to the current ``sys.stderr`` a record no other handler on its way would get."""

    def __init__(self, logger: logging.Logger):
        super().__init__(sys.stderr)
        self._logger = logger

    def _others(self) -> bool:
        logger: logging.Logger | None = self._logger
        while logger is not None:
            if any(h is not self for h in logger.handlers):
                return True
            if not logger.propagate:
                return False
            logger = logger.parent
        return False

    def handle(self, record):
        if self._others():
            return False
        self.setStream(sys.stderr)  # the stream of now (a test's capture, a notebook's)
        return super().handle(record)


def adopt_tvm_loggers() -> None:
    """Make ``"autotvm"`` and ``"auto_scheduler"`` children of ``"autosched"`` (also when
    the user's script created them first) and give each its last-resort handler once."""
    root = logging.getLogger("autosched")
    for name in (AUTOTVM, AUTO_SCHEDULER):
        logger = logging.getLogger(name)
        # A top-level name: the logging manager never recomputes its parent afterwards.
        logger.parent = root
        if not any(isinstance(h, _LastResort) for h in logger.handlers):
            logger.addHandler(_LastResort(logger))
