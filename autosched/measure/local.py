"""Measurement: build candidates to code, run them safely, and say why one failed.

``MeasureInput`` (a task and a loop state) goes through a :class:`LocalBuilder` (replay, lower,
codegen and compilation to machine code in a process pool) and a :class:`LocalRunner` (load,
check against the reference interpreter, time, in a separate process that may crash or hang
without taking the search with it) to a ``MeasureResult``. The runner measures CPU, CUDA and
OpenCL candidates alike (the device follows the generated code's language);
:class:`LocalRPCMeasureContext` bundles a builder and a runner set up for GPUs, as in TVM.
Failures are results with a :class:`MeasureErrorNo` code (TVM's
numbering, so logs read alike) and a readable message, never exceptions.
:class:`ProgramMeasurer` drives both per batch, keeps the best per workload, calls callbacks
such as ``records.RecordToFile`` and totals the build / run wall time.

The worker processes (started by :mod:`autosched.workers`, never re-importing the user's
script) run :mod:`autosched.measure.worker`.

The code lives by job in sibling modules, all re-exported here (import them from here):
``local_builder.py`` (:class:`LocalBuilder`), ``local_runner.py`` (:class:`LocalRunner`,
:class:`LocalRPCMeasureContext`, the reference cache) and ``measurer.py``
(:class:`ProgramMeasurer`, :class:`MeasureStats`, :func:`measure`, :func:`runner_builds`).
"""

from __future__ import annotations

from .data import MAX_COST, BuildResult, MeasureErrorNo, MeasureInput, MeasureResult
from .local_builder import LocalBuilder
from .local_runner import LocalRPCMeasureContext, LocalRunner, ReferenceCache
from .measurer import MeasureStats, ProgramMeasurer, measure, runner_builds

__all__ = [
    "MAX_COST",
    "BuildResult",
    "LocalBuilder",
    "LocalRPCMeasureContext",
    "LocalRunner",
    "MeasureErrorNo",
    "MeasureInput",
    "MeasureResult",
    "MeasureStats",
    "ProgramMeasurer",
    "ReferenceCache",
    "measure",
    "runner_builds",
]
