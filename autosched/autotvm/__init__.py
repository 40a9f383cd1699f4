"""AutoTVM: template tuning beside the template-free search, on the same IR and records.

    import autosched as ansor
    from autosched import autotvm

    task = autotvm.task.create("conv2d_nchw.x86", args, target="llvm")
    print(task.config_space)
    tuner = autotvm.tuner.XGBTuner(task, loss_type="rank")
    tuner.tune(n_trial=100,
               measure_option=autotvm.measure_option(builder=autotvm.LocalBuilder(),
                                                     runner=autotvm.LocalRunner(number=5)),
               callbacks=[autotvm.callback.progress_bar(100),
                          autotvm.callback.log_to_file("conv.log")])
    with autotvm.apply_history_best("conv.log"):
        with ansor.Target("llvm"):
            s, tensors = conv2d_nchw_cpu(*args)     # the best configuration's State
    func = ansor.build(s, target="llvm")

See docs/autotvm.md.
"""

# network: importing it registers AutoTVM's records with the network build (a lower layer).
from . import callback, measure, network, record, task, templates, tophub, tuner
from .context import ApplyConfig, DispatchContext, FallbackContext
from .dispatch import ApplyHistoryBest, apply_history_best
from .measure import LocalBuilder, LocalRunner, MeasureInput, RPCRunner, measure_option
from .space import ConfigEntity, ConfigSpace, FallbackConfigEntity
from .task import Task
from .template import get_config, template

__all__ = [
    "ApplyConfig",
    "ApplyHistoryBest",
    "ConfigEntity",
    "ConfigSpace",
    "DispatchContext",
    "FallbackConfigEntity",
    "FallbackContext",
    "LocalBuilder",
    "LocalRunner",
    "MeasureInput",
    "RPCRunner",
    "Task",
    "apply_history_best",
    "callback",
    "get_config",
    "measure",
    "measure_option",
    "network",
    "record",
    "task",
    "template",
    "templates",
    "tophub",
    "tuner",
]
