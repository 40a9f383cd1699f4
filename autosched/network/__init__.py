"""Whole networks: partition into tasks, the task scheduler, and network compilation with
storage planning. The networks to tune (the model zoo, ``get_network``, ``from_onnx``) are
:mod:`autosched.networks`.

Re-exports the public names; modules of the library import from the defining module.
"""

from .build import NetworkLib, build_network, load_module
from .partition import extract_tasks, partition
from .task_scheduler import (
    LogEstimatedLatency,
    PrintTableInfo,
    TaskScheduler,
    TaskSchedulerCallback,
)

__all__ = [
    "LogEstimatedLatency",
    "NetworkLib",
    "PrintTableInfo",
    "TaskScheduler",
    "TaskSchedulerCallback",
    "build_network",
    "extract_tasks",
    "load_module",
    "partition",
]
