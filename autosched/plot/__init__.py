"""Plots of a tuning log (matplotlib, the optional extra ``autosched[viz]``).

Each function reads a record log and returns a :class:`matplotlib.figure.Figure` (made without
pyplot, so nothing global changes; a notebook shows it, ``fig.savefig(path)`` writes it):

- :func:`tuning_curve`: each task's best latency (or GFLOP/s) against trials and seconds;
- :func:`trials_per_task`: the trials the task scheduler gave each task;
- :func:`roofline`: each task's best achieved GFLOP/s against its arithmetic intensity, under
  this machine's measured peak and memory bandwidth (:func:`machine_peak`).
"""

from .curves import trials_per_task, tuning_curve
from .machine import MachinePeak, machine_peak
from .roofline import roofline

__all__ = ["MachinePeak", "machine_peak", "roofline", "trials_per_task", "tuning_curve"]
