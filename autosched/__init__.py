"""autosched: a pure-Python auto-scheduler (Ansor) with its own tensor IR.

The public API, in TVM ``auto_scheduler`` terms::

    import autosched as ansor
    from autosched import te

    dag = ansor.ComputeDAG([A, B, C])   # a compute DAG from te tensors
    s = dag.get_init_state()            # a loop state; schedule it with s.split(...), ...
    func = ansor.build(s, "llvm")       # compile and load it on a device
"""

from codegen.target import Target
from runtime import device
from runtime.graph_executor import GraphModule
from tensorir import ComputeDAG, Tensor, TensorError, te
from tensorir.bounds import LowerError
from tensorir.graph.ir import Module as IRModule
from tensorir.schedule import State
from tensorir.steps import ScheduleError

from . import nd, networks, target, transform
from ._version import package_version as _package_version
from .build_module import build
from .cost_model.model import LGBModel, RandomModel
from .display import LiveView, RecordsTable, TaskList
from .hardware import HardwareParams
from .kernel import generate_source
from .logs import adopt_tvm_loggers as _adopt_tvm_loggers
from .measure.dispatch import ApplyHistoryBest
from .measure.local import (
    LocalBuilder,
    LocalRPCMeasureContext,
    LocalRunner,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    ProgramMeasurer,
)
from .measure.records import RecordToFile, load_best_record, load_records
from .network.build import NetworkLib, load_module
from .network.partition import extract_tasks
from .network.progress import NotebookView, ProgressBar
from .network.task_scheduler import (
    LogEstimatedLatency,
    PrintTableInfo,
    TaskScheduler,
    TaskSchedulerCallback,
)
from .networks import from_onnx
from .precision import AccuracyReport, accuracy_report, to_mixed_precision
from .search.params import SearchParams
from .search.policy import (
    PreloadCustomSketchRule,
    PreloadMeasuredStates,
    SeedStates,
    SketchPolicy,
)
from .task import SearchTask, register_workload
from .tuning import TuningOptions, auto_schedule

__version__ = _package_version()

#: TVM's name before 0.8 for :func:`device` (``tvm.context(str(target), 0)`` in seed 000).
context = device

# TVM's tips configure logging.getLogger("autotvm") / ("auto_scheduler"): make them ours.
_adopt_tvm_loggers()

# Loaded on first use (``ansor.autotvm``, ``ansor.RPCRunner``, ...): template tuning, the RPC
# client (dask), the VTA target, int8 quantization, the seeds' TVM spellings, the seed
# workloads (``workloads``, old name ``testing``) and the records module are not needed to tune
# or build, and ``import autosched`` stays light without them.
_LAZY_MODULES = (
    "autotvm", "contrib", "quantize", "records", "relay", "rpc", "testing", "utils", "vta",
    "workloads",
)  # fmt: skip
_LAZY_NAMES = {"RPCRunner": "rpc"}


def __getattr__(name: str):
    import importlib

    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(f".{_LAZY_NAMES[name]}", __name__), name)
    raise AttributeError(f"module 'autosched' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_MODULES) | set(_LAZY_NAMES))


__all__ = [
    "AccuracyReport",
    "ApplyHistoryBest",
    "IRModule",
    "contrib",
    "nd",
    "relay",
    "target",
    "transform",
    "utils",
    "workloads",
    "accuracy_report",
    "to_mixed_precision",
    "GraphModule",
    "autotvm",
    "NetworkLib",
    "extract_tasks",
    "from_onnx",
    "load_module",
    "networks",
    "quantize",
    "ComputeDAG",
    "context",
    "HardwareParams",
    "LGBModel",
    "LocalBuilder",
    "LocalRPCMeasureContext",
    "LocalRunner",
    "RPCRunner",
    "LiveView",
    "LogEstimatedLatency",
    "NotebookView",
    "ProgressBar",
    "RecordsTable",
    "TaskList",
    "MeasureErrorNo",
    "MeasureInput",
    "MeasureResult",
    "PreloadCustomSketchRule",
    "PreloadMeasuredStates",
    "SeedStates",
    "PrintTableInfo",
    "ProgramMeasurer",
    "RandomModel",
    "RecordToFile",
    "SearchParams",
    "SearchTask",
    "SketchPolicy",
    "TaskScheduler",
    "TaskSchedulerCallback",
    "TuningOptions",
    "auto_schedule",
    "load_best_record",
    "load_records",
    "register_workload",
    "LowerError",
    "ScheduleError",
    "State",
    "Target",
    "Tensor",
    "TensorError",
    "__version__",
    "build",
    "device",
    "generate_source",
    "te",
]
