"""AutoTVM: template tuning beside the template-free search, on the same IR and records.

    from autosched import autotvm
    task = autotvm.task.create("conv2d_nchw.x86", args, target="llvm")
    print(task.config_space)
    tuner = autotvm.tuner.XGBTuner(task, loss_type="rank")
    tuner.tune(n_trial=100, measure_option=autotvm.measure_option(
        builder=autotvm.LocalBuilder(), runner=autotvm.LocalRunner(number=5)),
        callbacks=[autotvm.callback.progress_bar(100), autotvm.callback.log_to_file("c.log")])
    with autotvm.apply_history_best("c.log"):
        with Target("llvm"):
            s, args = template_function(*workload_args)

See docs/autotvm.md.
"""

from . import task, templates
from .context import ApplyConfig, DispatchContext, FallbackContext
from .space import ConfigEntity, ConfigSpace, FallbackConfigEntity
from .task import Task
from .template import get_config, template

__all__ = [
    "ApplyConfig",
    "ConfigEntity",
    "ConfigSpace",
    "DispatchContext",
    "FallbackConfigEntity",
    "FallbackContext",
    "Task",
    "get_config",
    "task",
    "template",
    "templates",
]
