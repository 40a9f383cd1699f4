"""Measuring VTA configurations: the simulator's cycles are the cost.

``SimulatorRunner`` is the in-process local runner (use it as ``autotvm.measure_option(
builder=autotvm.LocalBuilder(), runner=vta.SimulatorRunner())``; AutoTVM's tuners then call its
``measure_configs``, the builder is not used): for each configuration of a
``conv2d_packed.vta`` / ``dense_packed.vta`` task it generates the program, runs it on random
int8 inputs (a fixed seed, so every candidate sees the same data) and reports
``cycles / clock`` as the cost, with the cycles and the seed's counters beside it. Simulated
time is deterministic, so one run per candidate is exact (no repeats needed).

An invalid configuration (a tile that does not divide its axis, tiles that overflow a buffer)
is an ``INSTANTIATION_ERROR`` result, not an exception, so a tuner simply moves on. A program
whose simulation would need more memory than ``max_memory`` (by default a server's limit,
``AUTOSCHED_VTA_MAX_MEMORY``: :mod:`autosched.rpc.vta_job`) is a ``COMPILE_DEVICE`` result,
refused before it runs, as a simulator server refuses it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from codegen.vta import VTAConfigError

from ..autotvm.measure_input import MeasureInput
from ..autotvm.space import InstantiationError
from ..measure.data import MAX_COST, MeasureResult
from ..rpc.vta_job import MEMORY_ENV, job_memory, memory_limit, seeded_inputs
from .env import Environment, get_env
from .top.build import build
from .top.reference import conv2d_packed_reference
from .top.templates import task_workload, tile_config

#: TVM's MeasureErrorNo values used here.
NO_ERROR, INSTANTIATION_ERROR, COMPILE_DEVICE, RUNTIME_DEVICE = 0, 1, 3, 4


def packed_shapes(wkl, env) -> dict:
    """The packed shapes of a workload's DRAM tensors: ``{"inp", "wgt", "out"}`` (the output
    with its byte planes first: 1 when it requantizes to int8, 4 for the int32 accumulator).
    ``env``: an Environment or its VTASpec (anything with BATCH, BLOCK_IN, BLOCK_OUT)."""
    e = env
    planes = 1 if wkl.requantize else 4
    return {
        "inp": (wkl.batch_blocks, wkl.in_blocks, wkl.height, wkl.width, e.BATCH, e.BLOCK_IN),
        "wgt": (wkl.out_blocks, wkl.in_blocks, wkl.kernel_h, wkl.kernel_w, e.BLOCK_OUT,
                e.BLOCK_IN),
        "out": (planes, wkl.batch_blocks, wkl.out_blocks, wkl.out_height, wkl.out_width,
                e.BATCH, e.BLOCK_OUT),
    }  # fmt: skip


@dataclass(frozen=True)
class SimMeasureResult:
    """One configuration's measurement (TVM's MeasureResult fields, plus the simulator's).

    Attributes
    ----------
    costs : tuple of float
        ``(seconds,)``: the simulated time at ``env.timing.clock_mhz``; on error ``(MAX_COST,)``
        (1e10 seconds, as in every failed record).
    error_no : int
        0, or 1 (invalid configuration), 4 (the simulator refused the program).
    error_msg : str
    all_cost : float
        Wall-clock seconds this measurement took on the host.
    timestamp : float
    cycles : int
    counters : dict
        The seed's counters (``inp_load_nbytes`` ... ``alu_counter``, ``cycles``).
    """

    costs: tuple
    error_no: int
    error_msg: str = ""
    all_cost: float = 0.0
    timestamp: float = 0.0
    cycles: int = 0
    counters: dict = field(default_factory=dict)


class SimulatorRunner:
    """Measure configurations of VTA tasks on the simulator, in this process.

    Parameters
    ----------
    env : Environment, optional
        The VTA configuration (default ``get_env()``).
    check_correctness : bool
        Also compare each output with the int8 numpy reference (an error result on mismatch).
    seed : int
        Seed of the random inputs.
    max_memory : int, optional
        Bytes one simulation may take (default: :func:`autosched.rpc.vta_job.memory_limit`).
    """

    def __init__(
        self,
        env: Environment | None = None,
        check_correctness=False,
        seed: int = 0,
        max_memory: int | None = None,
    ):
        self.env = env or get_env()
        self.check_correctness = check_correctness
        self.seed = seed
        self.max_memory = max_memory
        self._inputs: dict = {}

    #: Like AutoTVM's builders: how many configurations a tuner proposes per batch.
    n_parallel = 1

    def run(self, task, configs) -> list[SimMeasureResult]:
        """Measure each of ``configs`` (ConfigEntity objects of ``task``'s space)."""
        return [self.measure(task, cfg) for cfg in configs]

    def measure_configs(self, task, configs) -> tuple[list, list]:
        """AutoTVM's ``measure_batch`` for this runner: (MeasureInputs, MeasureResults), the
        results in the project's record format (cost = simulated seconds)."""
        inputs, results = [], []
        for cfg in configs:
            r = self.measure(task, cfg)
            inputs.append(MeasureInput(task.target, task, cfg))
            results.append(MeasureResult(r.costs, r.error_no, r.error_msg, r.all_cost,
                                         r.timestamp))  # fmt: skip
        return inputs, results

    def measure(self, task, config) -> SimMeasureResult:
        start = time.perf_counter()
        wkl = task_workload(task)
        try:
            task.instantiate(config)  # the template's own validity check
            kernel = build(wkl, tile_config(config), self.env)
        except (InstantiationError, VTAConfigError) as e:
            return self._error(INSTANTIATION_ERROR, str(e), start)
        spec, timing = self.env.spec, self.env.timing
        need = job_memory(kernel.program, spec, timing, packed_shapes(wkl, spec))
        limit = memory_limit() if self.max_memory is None else int(self.max_memory)
        if need > limit:
            msg = (
                f"the program needs about {need / 2**20:.0f} MiB to simulate, over the limit of "
                f"{limit / 2**20:.0f} MiB (max_memory / {MEMORY_ENV})"
            )
            return self._error(COMPILE_DEVICE, msg, start)
        data, weight = self._data(task, wkl)
        try:
            out, stats = kernel.run(data, weight)
        except RuntimeError as e:  # VTAError: the program is malformed (a codegen bug)
            return self._error(RUNTIME_DEVICE, str(e), start)
        if self.check_correctness:
            want = conv2d_packed_reference(
                data, weight, (wkl.stride_h, wkl.stride_w), (wkl.pad_h, wkl.pad_w),
                wkl.shift, wkl.clip_min, wkl.clip_max,
            )  # fmt: skip
            if not np.array_equal(out, want):
                return self._error(RUNTIME_DEVICE, "output differs from the reference", start)
        return SimMeasureResult(
            costs=(self.env.timing.seconds(stats.cycles),),
            error_no=NO_ERROR,
            all_cost=time.perf_counter() - start,
            timestamp=time.time(),
            cycles=stats.cycles,
            counters=stats.counters(),
        )

    def _data(self, task, wkl):
        key = task.workload
        if key not in self._inputs:
            shapes = packed_shapes(wkl, self.env)
            self._inputs[key] = seeded_inputs(shapes["inp"], shapes["wgt"], self.seed)
        return self._inputs[key]

    @staticmethod
    def _error(code: int, msg: str, start: float) -> SimMeasureResult:
        return SimMeasureResult(
            costs=(MAX_COST,), error_no=code, error_msg=msg,
            all_cost=time.perf_counter() - start, timestamp=time.time(),
        )  # fmt: skip
