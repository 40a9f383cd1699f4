"""Measuring VTA configurations on simulator servers through ``autotvm.RPCRunner``.

Seed 004 measures on boards registered with a tracker::

    autotvm.RPCRunner(env.TARGET, host=tracker_host, port=tracker_port, number=5, timeout=60,
                      module_loader=vta.module_loader())

Here the servers of key ``"sim"`` (``python -m autosched.exec.rpc_server --tracker HOST:PORT
--key sim``) run the simulator. For each configuration the client generates the program with
``vta.top.build`` (an invalid configuration is an INSTANTIATION_ERROR record, nothing is sent),
and sends only data (:mod:`autosched.rpc.vta_job`): the program, the packed shapes, the VTA
configuration and timing model, the seed of the inputs and, with ``check_correctness``, the
reference output. The server answers the cycles and the seed's counters; the cost is
``env.timing.seconds(cycles)``, exactly what ``vta.SimulatorRunner`` gives for the same
configuration (same program, same seeded inputs). Simulated time is deterministic, so
``number`` and ``repeat`` do not apply: each candidate runs once.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from codegen.vta import VTAConfigError

from ..autotvm.measure import EXT_DEV_RPC_MEASURERS
from ..autotvm.measure_input import MeasureInput
from ..autotvm.space import InstantiationError
from ..measure.data import MeasureErrorNo, MeasureResult, failed_result
from ..rpc.runner import check_cost, check_error_fields
from ..rpc.vta_job import encode_job, seeded_inputs
from ..rpc.wire import BadReply
from .env import Environment, get_env
from .measure import packed_shapes
from .top.build import build
from .top.reference import conv2d_packed_reference
from .top.templates import task_workload, tile_config

#: The seed of the random inputs, the same as ``vta.SimulatorRunner``'s default.
INPUT_SEED = 0


@dataclass(frozen=True)
class SimulatorModuleLoader:
    """What ``vta.module_loader()`` returns: the VTA configuration that ``autotvm.RPCRunner``
    compiles programs for before it sends them to the simulator servers."""

    env: Environment = field(default_factory=get_env)
    ext_dev: ClassVar[str] = "vta"


def module_loader(env: Environment | None = None) -> SimulatorModuleLoader:
    """TVM's ``vta.module_loader()`` for ``autotvm.RPCRunner(..., module_loader=...)``.

    Parameters
    ----------
    env : Environment, optional
        The VTA configuration (default ``vta.get_env()``).
    """
    return SimulatorModuleLoader(env or get_env())


@functools.lru_cache(maxsize=16)
def _reference(wkl, spec, seed: int) -> np.ndarray:
    """The int8 output every configuration of ``wkl`` must produce on the seeded inputs
    (``spec``: the hardware's VTASpec, hashable, unlike the Environment)."""
    shapes = packed_shapes(wkl, spec)
    data, weight = seeded_inputs(shapes["inp"], shapes["wgt"], seed)
    out = conv2d_packed_reference(
        data, weight, (wkl.stride_h, wkl.stride_w), (wkl.pad_h, wkl.pad_w),
        wkl.shift, wkl.clip_min, wkl.clip_max,
    )  # fmt: skip
    return np.asarray(out, np.int8).reshape(shapes["out"])


def measure_on_servers(runner, task, configs) -> tuple[list, list]:
    """``autotvm.RPCRunner.measure_configs`` for VTA tasks: (MeasureInputs, MeasureResults),
    measured on the simulator servers of ``runner.key`` (see the module docstring)."""
    loader = runner.module_loader
    env = loader.env if isinstance(loader, SimulatorModuleLoader) else get_env()
    wkl = task_workload(task)
    shapes = packed_shapes(wkl, env)
    inputs = [MeasureInput(task.target, task, cfg) for cfg in configs]
    results: list = [None] * len(configs)
    jobs, spent = {}, {}
    for k, cfg in enumerate(configs):
        start = time.perf_counter()
        try:
            task.instantiate(cfg)  # the template's own validity check
            kernel = build(wkl, tile_config(cfg), env)
        except (InstantiationError, VTAConfigError) as e:
            results[k] = failed_result(
                MeasureErrorNo.INSTANTIATION_ERROR, str(e), time.perf_counter() - start
            )
            continue
        expected = (
            _reference(wkl, env.spec, INPUT_SEED)
            if runner.check_correctness and wkl.requantize
            else None
        )
        jobs[k] = encode_job(kernel.program, shapes, env.config, env.timing, INPUT_SEED, expected)
        spent[k] = time.perf_counter() - start

    def finish(k, reply, secs, server) -> MeasureResult:
        code, msg = check_error_fields(reply, server)  # BadReply: an error record naming it
        if code != MeasureErrorNo.NO_ERROR:
            return failed_result(code, msg, secs)
        cycles = reply.get("cycles")
        if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles <= 0:
            raise BadReply(f"malformed reply from {server}: 'cycles' {cycles!r} is not a "
                           "positive int")  # fmt: skip
        seconds = check_cost(env.timing.seconds(cycles), server, "time of the cycles")
        return MeasureResult((seconds,), 0, "", secs, time.time())

    if jobs:
        runner.run_jobs("vta_measure", list(jobs), jobs.__getitem__, finish, spent.__getitem__,
                        results)  # fmt: skip
    return inputs, results


EXT_DEV_RPC_MEASURERS["vta"] = measure_on_servers
