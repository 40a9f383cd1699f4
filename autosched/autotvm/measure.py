"""Measuring configurations: ``measure_option``, the builders and runners, ``measure_batch``.

AutoTVM's builder and runner are the auto-scheduler's (:mod:`autosched.measure.local`) under
TVM's AutoTVM names and defaults: a configuration is instantiated to a State of its task's
DAG here, then built and run exactly like a searched candidate (process isolation, output
checked against the reference interpreter, readable error codes). A runner is anything with
``run(inputs, build_results)`` over the auto-scheduler's ``MeasureInput``; that one interface
serves the local runner and :class:`RPCRunner`, the remote one of :mod:`autosched.rpc`.
"""

from __future__ import annotations

import time

from ..measure.data import MeasureErrorNo, MeasureResult, failed_result
from ..measure.data import MeasureInput as StateInput
from ..measure.local import LocalBuilder as _LocalBuilder
from ..measure.local import LocalRunner as _LocalRunner
from ..measure.local import runner_builds
from ..rpc.cluster import DEFAULT_HOST, DEFAULT_PORT
from ..rpc.runner import RPCRunner as _RemoteRunner
from .measure_input import MeasureInput

__all__ = [
    "EXT_DEV_RPC_MEASURERS",
    "LocalBuilder",
    "LocalRunner",
    "MeasureErrorNo",
    "MeasureInput",
    "MeasureResult",
    "RPCRunner",
    "measure_batch",
    "request_remote",
    "measure_option",
]


#: How ``RPCRunner`` measures configurations of external accelerators' tasks
#: (``Target("ext_dev -device=NAME")``): NAME -> ``f(runner, task, configs) -> (inputs,
#: results)``. Their packages register them on import (``autosched.vta`` registers "vta"), as
#: they may import this module but not the reverse (EXT_DEV_WORKLOADS is the same pattern).
EXT_DEV_RPC_MEASURERS: dict = {}


def _ext_dev(task) -> str | None:
    """The accelerator name of a task for ``ext_dev -device=NAME``, else None."""
    target = getattr(task, "target", None)
    if getattr(target, "kind", None) != "ext_dev":
        return None
    return target.get("device")


class LocalBuilder(_LocalBuilder):
    """Builds configurations in worker processes (the auto-scheduler's builder).

    Parameters
    ----------
    timeout : float
        Seconds per build.
    n_parallel : int, optional
        Worker processes (default: the usable cores); also the tuners' batch size.
    build_func : str or callable
        ``"default"``, ``"ndk"`` or ``fcompile(output, objects, options)``: how CPU
        candidates are linked (:class:`autosched.LocalBuilder`).
    """

    def __init__(self, timeout: float = 10, n_parallel: int | None = None, build_func="default"):
        super().__init__(timeout=timeout, n_parallel=n_parallel, build_func=build_func)


class LocalRunner(_LocalRunner):
    """Runs built configurations on this machine (the auto-scheduler's runner, with AutoTVM's
    defaults: ``number=4, repeat=3, min_repeat_ms=0, timeout=10``).

    ``cooldown_interval`` is accepted for TVM's signature (the runner measures one candidate at
    a time in its own process, so it has no effect).
    """

    def __init__(
        self,
        number: int = 4,
        repeat: int = 3,
        min_repeat_ms: float = 0,
        timeout: float = 10,
        cooldown_interval: float = 0.1,
        enable_cpu_cache_flush: bool = False,
        check_correctness: bool = True,
    ):
        super().__init__(
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
            timeout=timeout,
            enable_cpu_cache_flush=enable_cpu_cache_flush,
            check_correctness=check_correctness,
        )
        self.cooldown_interval = cooldown_interval


class RPCRunner(_RemoteRunner):
    """Runs configurations on the RPC servers of ``key`` at a tracker (``autosched.rpc``'s
    runner, docs/remote.md) with AutoTVM's defaults: ``number=4, repeat=3``, and
    ``n_parallel=None`` (as many candidates in flight as the key has servers).

    Tasks of an external accelerator measure on its servers without a build: for VTA
    (``conv2d_packed.vta``, ``dense_packed.vta``) the VTA programs go to the simulator
    servers of ``key`` (``rpc_server --key sim``, docs/vta.md). ``module_loader`` is TVM's
    argument: ``vta.module_loader()`` says which VTA configuration the programs are compiled
    for (default ``vta.get_env()``); any other loader is refused (CPU and GPU servers load
    autosched's kernels themselves).
    """

    def __init__(self, key, host=DEFAULT_HOST, port=DEFAULT_PORT, priority=1, timeout=10,
                 n_parallel=None, number=4, repeat=3, min_repeat_ms=0, cooldown_interval=0.1,
                 enable_cpu_cache_flush=False, check_correctness=True, module_loader=None,
                 security=None):  # fmt: skip
        if module_loader is not None and not isinstance(getattr(module_loader, "ext_dev", None),
                                                        str):  # fmt: skip
            raise ValueError(
                "autotvm.RPCRunner: module_loader must be None or vta.module_loader() (servers "
                f"load autosched's kernels themselves), got {type(module_loader).__name__}"
            )
        super().__init__(
            key, host=host, port=port, priority=priority, n_parallel=n_parallel,
            timeout=timeout, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
            cooldown_interval=cooldown_interval, enable_cpu_cache_flush=enable_cpu_cache_flush,
            check_correctness=check_correctness, security=security,
        )  # fmt: skip
        self.module_loader = module_loader

    def measures_configs_of(self, task) -> bool:
        """Whether ``task``'s configurations go to the servers as they are (no State build):
        the tasks of a registered external accelerator."""
        return _ext_dev(task) in EXT_DEV_RPC_MEASURERS

    def measure_configs(self, task, configs) -> tuple[list, list]:
        """``measure_batch`` for an external accelerator's task: (MeasureInputs,
        MeasureResults) from its registered measurer."""
        device = _ext_dev(task)
        if device not in EXT_DEV_RPC_MEASURERS:
            raise ValueError(
                f"autotvm.RPCRunner: task {task.name!r} for target {task.target} has no remote "
                f"measurer (known accelerators: {sorted(EXT_DEV_RPC_MEASURERS) or 'none'})"
            )
        return EXT_DEV_RPC_MEASURERS[device](self, task, configs)


def request_remote(device_key, host=DEFAULT_HOST, port=DEFAULT_PORT, priority=1, timeout=60):
    """A session on a server of ``device_key`` at the tracker ``host:port`` (TVM's
    ``autotvm.measure.request_remote``; :meth:`autosched.rpc.TrackerSession.request`)."""
    from ..rpc import connect_tracker

    return connect_tracker(host, port, timeout=timeout).request(
        device_key, priority=priority, timeout=timeout
    )


def measure_option(builder=None, runner=None) -> dict:
    """``{"builder": ..., "runner": ...}`` for ``tuner.tune`` (defaults: local ones)."""
    return {"builder": builder or LocalBuilder(), "runner": runner or LocalRunner()}


def measure_batch(task, configs, builder, runner) -> tuple[list, list]:
    """Instantiate, build and run ``configs`` of ``task``.

    Returns
    -------
    (list of MeasureInput, list of MeasureResult)
        One each per configuration, in order. A configuration the template rejects (its steps
        raise) is an INSTANTIATION_ERROR result naming the template and the configuration.
    """
    measure_configs = getattr(runner, "measure_configs", None)
    measures_configs_of = getattr(runner, "measures_configs_of", lambda _task: True)
    if measure_configs is not None and measures_configs_of(task):
        # A runner that measures configurations itself, with no State to build (the simulated
        # VTA: autosched.vta.SimulatorRunner generates its instruction stream from the knobs;
        # RPCRunner sends it to the simulator servers).
        return measure_configs(task, configs)
    inputs, results = [], [None] * len(configs)
    todo = []
    for k, cfg in enumerate(configs):
        t0 = time.perf_counter()
        try:
            state, _ = task.instantiate(cfg)
        except Exception as exc:  # a configuration's steps may not apply: a result, not a crash
            msg = f"template {task.name!r} config {cfg.index}: {type(exc).__name__}: {exc}"
            results[k] = failed_result(
                MeasureErrorNo.INSTANTIATION_ERROR, msg[:500], time.perf_counter() - t0
            )
            state = None
        inputs.append(MeasureInput(task.target, task, cfg, state))
        if state is not None:
            todo.append(k)
    if todo:
        state_inputs = [StateInput(task.search_task, inputs[k].state) for k in todo]
        if runner_builds(builder, runner):  # RPC servers build what they run, not this host
            _, ran = runner.build_and_run(state_inputs)
        else:
            ran = runner.run(state_inputs, builder.build(state_inputs))
        for k, res in zip(todo, ran, strict=True):
            results[k] = res
    return inputs, results
