"""The one place that starts processes, counts cores and reads ``AUTOSCHED_*`` variables.

* :class:`WorkerProcess` / :class:`WorkerPool`: every worker (builders, feature extraction,
  the measuring process that owns a device) is a fresh interpreter running
  ``python -m autosched.workers``, talking over a socket pair, so the user's script, ``python
  -c`` code, stdin or notebook is never re-imported (multiprocessing's ``spawn`` would import
  it, and a script without a main guard then fails in every worker);
* :func:`cpu_count`: usable cores (affinity, cgroup quota), used wherever cores are counted;
* :func:`env`: the parsed value of an ``AUTOSCHED_*`` variable (docs/environment.md);
* :func:`stop_on_signals`, :func:`deferred_signals`, :class:`TuningInterrupted`: a clean
  stop on SIGINT / SIGTERM.
"""

from runtime.environment import VARIABLES, cpu_count, env

from .pool import Outcome, WorkerPool
from .process import WorkerProcess, WorkerStartError
from .signals import TuningInterrupted, deferred_signals, interrupted, stop_on_signals

__all__ = [
    "VARIABLES",
    "Outcome",
    "TuningInterrupted",
    "WorkerPool",
    "WorkerProcess",
    "WorkerStartError",
    "cpu_count",
    "deferred_signals",
    "env",
    "interrupted",
    "stop_on_signals",
]
