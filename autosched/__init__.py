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
from tensorir import ComputeDAG, Tensor, TensorError, te
from tensorir.bounds import LowerError
from tensorir.schedule import State
from tensorir.steps import ScheduleError

from .build_module import build, generate_source

__version__ = "0.1.0"

__all__ = [
    "ComputeDAG",
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
