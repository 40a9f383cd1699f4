"""TVM's logger names, so that the tutorials' logging tips reach our messages.

TVM's tutorials say ``logging.getLogger("autotvm").setLevel(logging.DEBUG)`` (every
measurement of the template tuners) and configure ``logging.getLogger("auto_scheduler")``.
Every module logs to ``logging.getLogger(__name__)`` (tensorir, codegen and runtime to
``"autosched." + __name__``), so every logger is under ``"autosched"``.
:func:`adopt_tvm_loggers` (run by ``import autosched``) puts TVM's two names in between, as
the parents of the packages they stand for (:data:`TVM_PARENTS`): a record of
``"autosched.autotvm.tuner.tuner"`` goes through ``"autosched.autotvm"``, ``"autotvm"`` and
``"autosched"``; one of ``"autosched.search.policy"`` through ``"auto_scheduler"``. A level or
handler set on a TVM name therefore reaches template tuning (:mod:`autosched.autotvm`) or the
search (policy, cost model and features, task scheduler, network build), as TVM's do, and
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

__all__ = ["AUTOTVM", "AUTO_SCHEDULER", "TVM_PARENTS", "adopt_tvm_loggers"]

AUTOTVM = "autotvm"
AUTO_SCHEDULER = "auto_scheduler"

TVM_PARENTS = {
    AUTOTVM: ("autosched.autotvm",),
    AUTO_SCHEDULER: ("autosched.search", "autosched.cost_model", "autosched.network"),
}
"""TVM's logger name -> the packages whose loggers it is made the parent of."""


class _LastResort(logging.StreamHandler):
    """Prints to the current ``sys.stderr`` a record no other handler on its way would get."""

    def __init__(self):
        super().__init__(sys.stderr)

    def _others(self, name: str) -> bool:
        # From the logger that made the record: a handler below ours sees it too.
        logger: logging.Logger | None = logging.getLogger(name)
        while logger is not None:
            if any(h is not self for h in logger.handlers):
                return True
            if not logger.propagate:
                return False
            logger = logger.parent
        return False

    def handle(self, record):
        if self._others(record.name):
            return False
        self.setStream(sys.stderr)  # the stream of now (a test's capture, a notebook's)
        return super().handle(record)


def adopt_tvm_loggers() -> None:
    """Make ``"autotvm"`` and ``"auto_scheduler"`` children of ``"autosched"`` (also when
    the user's script created them first) and the parents of their packages' loggers
    (:data:`TVM_PARENTS`), and give each its last-resort handler once."""
    root = logging.getLogger("autosched")
    for name, packages in TVM_PARENTS.items():
        logger = logging.getLogger(name)
        # A top-level name: the logging manager never recomputes its parent afterwards.
        logger.parent = root
        for package in packages:
            # Nor that of an existing logger: modules' loggers created before or after this
            # find the package's logger as their nearest ancestor.
            logging.getLogger(package).parent = logger
        if not any(isinstance(h, _LastResort) for h in logger.handlers):
            logger.addHandler(_LastResort())
    logging.Logger.manager._clear_cache()  # levels cached before the parents changed
