"""Measurement data: what goes in (``MeasureInput``), what comes out (``MeasureResult``,
``BuildResult``), the error codes and the step-list JSON records store.

Data only, no process code: the cost model, the records and the search depend on this module,
not on the builders and runners of :mod:`autosched.measure.local`.
"""

from __future__ import annotations

import enum
import json
import math
import time
from dataclasses import dataclass, field

__all__ = [
    "MAX_COST",
    "BuildResult",
    "MeasureErrorNo",
    "MeasureInput",
    "MeasureResult",
    "failed_result",
    "state_data",
    "steps_json_of",
    "usable_cost",
    "usable_result",
]

# The cost recorded for a failed candidate (TVM uses 1e10 seconds as well).
MAX_COST = 1e10


class MeasureErrorNo(enum.IntEnum):
    """Why a measurement failed; 0 means it did not."""

    NO_ERROR = 0
    INSTANTIATION_ERROR = 1  # the steps do not replay / lower on this DAG
    COMPILE_HOST = 2  # code generation or host compilation failed
    COMPILE_DEVICE = 3  # device compiler (nvcc / OpenCL) rejected the kernel
    RUNTIME_DEVICE = 4  # the kernel crashed (the measuring process died) or raised
    WRONG_ANSWER = 5  # the kernel's output differs from the reference interpreter
    BUILD_TIMEOUT = 6
    RUN_TIMEOUT = 7
    UNKNOWN_ERROR = 8


@dataclass(frozen=True)
class MeasureInput:
    """A candidate to measure: the task and one concrete loop state of its DAG."""

    task: object  # SearchTask (kept untyped here so records can load without a search)
    state: object  # tensorir.schedule.State

    def __post_init__(self):
        # A state of another DAG lowers and runs another program: it measured without error and
        # was recorded under this task's workload key. States of the task's own DAG (the
        # search's) are the same object; an equal DAG built again has the same workload key.
        dag, task_dag = getattr(self.state, "dag", None), getattr(self.task, "compute_dag", None)
        if dag is None or task_dag is None or dag is task_dag:
            return
        key, task_key = getattr(dag, "workload_key", None), getattr(task_dag, "workload_key", None)
        if key is not None and task_key is not None and key != task_key:
            raise ValueError(
                f"MeasureInput: the state was built from another ComputeDAG ({_outputs(dag)}) "
                f"than task {self.task!r}'s ({_outputs(task_dag)}); build it from "
                "task.compute_dag.get_init_state()"
            )


def _outputs(dag) -> str:
    """A DAG's outputs, e.g. ``C[16, 16]``: enough to tell two DAGs apart in a message."""
    return ", ".join(f"{t.name}{list(t.shape)}" for t in getattr(dag, "output_tensors", ()))


@dataclass(frozen=True)
class MeasureResult:
    """The outcome of measuring one candidate.

    Parameters
    ----------
    costs : tuple of float
        Seconds per run, one per repeat (``(MAX_COST,)`` on error).
    error_no : MeasureErrorNo
    error_msg : str
        A readable one-paragraph reason when ``error_no`` is not NO_ERROR.
    all_cost : float
        Wall seconds spent building and running this candidate.
    timestamp : float
        ``time.time()`` when the measurement finished.
    build_s, run_s : float
        The part of ``all_cost`` spent building (in a builder worker) and running (loading,
        checking, timing); NaN when unknown (records written before they were kept).
    """

    costs: tuple[float, ...]
    error_no: int = MeasureErrorNo.NO_ERROR
    error_msg: str = ""
    all_cost: float = 0.0
    timestamp: float = field(default=0.0)
    build_s: float = math.nan
    run_s: float = math.nan

    @property
    def mean_cost(self) -> float:
        """Mean seconds per run over the steady repeats (:func:`steady_costs`: tick-sized
        outliers left out), or MAX_COST for a failed measurement."""
        if self.error_no != MeasureErrorNo.NO_ERROR or not self.costs:
            return MAX_COST
        steady = steady_costs(self.costs)
        return sum(steady) / len(steady)


def usable_cost(cost: float) -> bool:
    """Whether ``cost`` (mean seconds per run) is a real measurement: positive, finite and
    below :data:`MAX_COST`, the cost of a failed candidate.

    Parameters
    ----------
    cost : float
        Seconds per run, e.g. :attr:`MeasureResult.mean_cost` or a task's best cost so far.

    Returns
    -------
    bool
    """
    return math.isfinite(cost) and 0 < cost < MAX_COST


def usable_result(result: MeasureResult) -> bool:
    """The one rule that decides whether a measured or recorded result may be a best.

    Error-free, with a :func:`usable_cost` mean cost. Every reader of records applies it: the
    auto-scheduler's ``ApplyHistoryBest``, ``load_ranked_records`` and ``distill``, AutoTVM's
    ``apply_history_best`` and ``pick_best``.

    Parameters
    ----------
    result : MeasureResult
        (anything with ``error_no`` and ``mean_cost``: AutoTVM's results too).

    Returns
    -------
    bool
    """
    return result.error_no == MeasureErrorNo.NO_ERROR and usable_cost(result.mean_cost)


# error_msg of an error-free record that measures a candidate again (TaskScheduler.retime_top):
# tools that count distinct candidates skip these.
RETIMED = "re-timed"

# A repeat slower than the fastest by both this ratio and this many seconds was most likely
# descheduled for a scheduler tick (another process took its core): not the kernel's speed.
OUTLIER_RATIO = 1.5
OUTLIER_JUMP_S = 0.002


def is_outlier(cost: float, fastest: float) -> bool:
    """Whether ``cost`` is a tick-sized jump over ``fastest`` (see OUTLIER_RATIO / _JUMP_S)."""
    return cost > OUTLIER_RATIO * fastest and cost - fastest > OUTLIER_JUMP_S


def steady_costs(costs) -> list[float]:
    """``costs`` without the tick-sized outliers (never empty for non-empty ``costs``).

    The statistic every ranking uses (``MeasureResult.mean_cost``) is the mean of these: the
    records keep every measured cost, outliers included.
    """
    fastest = min(costs)
    return [c for c in costs if not is_outlier(c, fastest)]


def steps_json_of(state) -> list:
    """JSON step records of a State (or of anything with ``steps`` / ``steps_json``)."""
    from tensorir.steps import steps_to_json

    js = getattr(state, "steps_json", None)
    if js is not None:
        return json.loads(js) if isinstance(js, str) else list(js)
    return steps_to_json(state.steps)


def state_data(dag, state, target) -> dict:
    """A state as the plain data a server builds a kernel from: ``{"dag", "steps",
    "target"}``, the DAG as :func:`tensorir.dag_data.dag_to_data` writes it, the steps as
    records store them (:func:`steps_json_of`) and the target string. What a remote measure
    request carries and what an exported library records for each kernel; a server decodes it
    strictly (``autosched.rpc.device_process.DeviceState.build``) and never receives code."""
    from tensorir.dag_data import dag_to_data

    return {"dag": dag_to_data(dag), "steps": steps_json_of(state), "target": str(target)}


def failed_result(error_no: int, msg: str, all_cost: float = 0.0) -> MeasureResult:
    """A failed measurement: cost ``MAX_COST``, the code and message, stamped now."""
    return MeasureResult((MAX_COST,), int(error_no), msg, all_cost, time.time())


@dataclass(frozen=True)
class BuildResult:
    """The outcome of building one candidate.

    Parameters
    ----------
    source : dict or None
        ``codegen.Source.as_dict()`` (plain values, ready for ``runtime.load_module``); None on
        error.
    error_no : int
        A :class:`MeasureErrorNo` code.
    error_msg : str
        Which stage failed and the exception type and message.
    time_cost : float
        Seconds the build took.
    phases : dict
        Seconds of the build's ``"lower"`` (replay included), ``"codegen"`` and ``"compile"``
        stages as the worker timed them (``measure.timing``); empty when not reported.
    """

    source: dict | None
    error_no: int = MeasureErrorNo.NO_ERROR
    error_msg: str = ""
    time_cost: float = 0.0
    phases: dict = field(default_factory=dict)
