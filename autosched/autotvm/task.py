"""Tuning tasks of templates: ``autotvm.task.create`` and ``extract_from_program``.

A :class:`Task` is a template name plus its arguments (the workload) and a target. Its
``config_space`` is collected by running the template once on a :class:`ConfigSpace`;
``instantiate(config)`` runs it on one configuration and gives ``(state, tensors)``, a State of
the same ComputeDAG for every configuration, so measurement, records and the auto-scheduler's
cost-model features all apply unchanged (``task.search_task`` is the matching
:class:`~autosched.task.SearchTask`).
"""

from __future__ import annotations

import logging

from codegen.target import Target
from tensorir.schedule import State

from .context import ApplyConfig
from .space import ConfigSpace
from .template import TEMPLATES, deserialize_args, serialize_args

__all__ = ["Task", "TaskExtractEnv", "create", "extract_from_program"]

_log = logging.getLogger(__name__)


class Task:
    """One template workload to tune on one target.

    Parameters
    ----------
    name : str
        A registered template (``@autotvm.template(name)``).
    args : tuple
        Its arguments (te tensors are kept as ``("TENSOR", shape, dtype)``).
    target, target_host : str or Target, optional

    Attributes
    ----------
    config_space : ConfigSpace
        Every configuration (collected on first use).
    flop : float
        Operations of one run: the template's ``cfg.add_flop`` total, or the DAG's count.
    workload : tuple
        ``(name, *args)``, how records and dispatch contexts name it.
    """

    def __init__(self, name: str, args=(), target=None, target_host=None):
        self.name = name
        self.args = serialize_args(args)
        self.target = Target(target, host=target_host) if target is not None else None
        self.target_host = self.target.host if self.target is not None else None
        self._space: ConfigSpace | None = None
        self._flop: float | None = None
        self._search_task = None

    @property
    def func(self):
        if self.name not in TEMPLATES:
            raise ValueError(
                f"no template registered as {self.name!r}; registered templates: "
                f"{sorted(TEMPLATES)} (import the module that defines it first)"
            )
        return TEMPLATES[self.name]

    @property
    def workload(self) -> tuple:
        return (self.name, *self.args)

    def instantiate(self, config) -> tuple[State, list]:
        """Run the template on ``config``; returns ``(state, tensors)``.

        Raises
        ------
        ValueError
            If the template does not return ``(State, [tensors])``, naming the template.
        Exception
            Whatever the template's steps raise for this configuration (e.g. ScheduleError).
        """
        args = deserialize_args(self.args)
        with ApplyConfig(config):
            if self.target is not None:
                with self.target:
                    out = self.func(*args)
            else:
                out = self.func(*args)
        if (
            not isinstance(out, tuple)
            or len(out) != 2
            or not isinstance(out[0], State)
            or not isinstance(out[1], list | tuple)
        ):
            raise ValueError(
                f"template {self.name!r} must return (state, [tensors]) with state = "
                f"ComputeDAG([...]).get_init_state() after its steps; got {type(out).__name__}"
            )
        return out[0], list(out[1])

    def _collect(self) -> None:
        space = ConfigSpace()
        state, _ = self.instantiate(space)
        self._space = space
        self._flop = space.flop or float(state.dag.flop_count())
        self._dag = state.dag

    @property
    def config_space(self) -> ConfigSpace:
        if self._space is None:
            self._collect()
        return self._space

    @property
    def flop(self) -> float:
        if self._flop is None:
            self._collect()
        return self._flop

    @property
    def compute_dag(self):
        """The template's ComputeDAG (the same for every configuration)."""
        if self._space is None:
            self._collect()
        return self._dag

    @property
    def search_task(self):
        """The :class:`~autosched.task.SearchTask` of this DAG and target (for measurement)."""
        if self._search_task is None:
            from ..task import SearchTask

            self._search_task = SearchTask(
                compute_dag=self.compute_dag,
                target=self.target or "llvm",
                desc=self.name,
            )
        return self._search_task

    def __repr__(self) -> str:
        return (
            f"Task(func_name={self.name}, args={self.args!r}, kwargs={{}}, "
            f"workload={self.workload!r})"
        )


class TaskExtractEnv:
    """Accepted for TVM's tutorials (``TaskExtractEnv()`` before registering templates):
    templates register themselves with ``@autotvm.template``, so there is nothing to set up."""

    def __init__(self, allow_duplicate: bool = False):
        self.allow_duplicate = allow_duplicate

    @staticmethod
    def get(allow_duplicate: bool = False) -> TaskExtractEnv:
        return TaskExtractEnv(allow_duplicate)


def create(task_name: str, args, target, target_host=None) -> Task:
    """A :class:`Task` of template ``task_name`` with ``args`` on ``target``; its config space
    is collected at once (so a template error shows here)."""
    task = Task(task_name, args, target, target_host)
    task.config_space  # noqa: B018 - collect now: a broken template fails at creation
    return task


def _op_name(op) -> str:
    return op if isinstance(op, str) else getattr(op, "name", str(op))


def extract_from_program(mod, params=None, ops=("nn.conv2d",), target="llvm", target_host=None):
    """One :class:`Task` per distinct workload of the given operators in a network.

    Parameters
    ----------
    mod : tensorir.graph Module or Function
        The network (``networks.get_network``, ``from_onnx``, a quantized module...).
    params : dict, optional
        Its weights (shapes come from the graph; accepted for TVM's signature).
    ops : tuple
        Operator names: ``"nn.conv2d"`` (plain, and depthwise when groups == channels,
        NCHW / NHWC) and ``"nn.dense"``.
    target, target_host : str or Target

    Returns
    -------
    list of Task
        In order of first appearance; calls with equal shapes, attributes and dtypes share
        one task. Grouped (non-depthwise) convolutions have no template and are skipped.
    """
    from tensorir.graph import ir as gir

    from .templates import workload_of_call

    target = Target(target, host=target_host)
    wanted = {_op_name(op) for op in ops}
    unknown = wanted - {"nn.conv2d", "nn.dense"}
    if unknown:
        raise ValueError(
            f"extract_from_program: no templates for ops {sorted(unknown)}; "
            "use 'nn.conv2d' and/or 'nn.dense'"
        )
    func = gir.main_function(mod, "extract_from_program")
    tasks: dict[tuple, Task] = {}
    skipped = 0
    for call in gir.calls(func):
        if call.op not in wanted:
            continue
        found = workload_of_call(call, target)
        if found is None:
            skipped += 1
            continue
        name, args = found
        key = (name, *args)
        if key not in tasks:
            tasks[key] = create(name, args, target, target_host)
    if skipped:
        _log.info("extract_from_program: %d call(s) have no template (e.g. group conv)", skipped)
    return list(tasks.values())
