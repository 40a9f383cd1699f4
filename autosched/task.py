"""``SearchTask`` (one DAG to tune for one target) and workload registration.

``HardwareParams`` lives in :mod:`autosched.hardware` (re-exported here for old imports).

A task is identified in records by ``(workload_key, str(target))``. Workloads can be given as a
``ComputeDAG`` or, as in TVM, as a registered function plus its arguments::

    @ansor.register_workload
    def matmul_relu(n, m, k):
        ...
        return [A, B, out]

    task = ansor.SearchTask(func=matmul_relu, args=(512, 512, 512), target="llvm")
"""

from __future__ import annotations

import warnings

from codegen.target import Target, check_host_cpu
from tensorir.dag import ComputeDAG

from .hardware import HardwareParams

__all__ = ["HardwareParams", "SearchTask", "register_workload", "registered_workloads"]

_WORKLOADS: dict[str, object] = {}


def register_workload(func=None, *, name: str | None = None, override: bool = False):
    """Register a function that returns a workload's tensors (inputs first, then outputs).

    Usable as ``@register_workload`` or ``@register_workload(name="...")``.
    """

    def register(f):
        key = name or f.__name__
        if key in _WORKLOADS and _WORKLOADS[key] is not f and not override:
            raise ValueError(
                f"workload {key!r} is already registered by {_WORKLOADS[key]!r}; "
                "pass override=True or choose another name"
            )
        _WORKLOADS[key] = f
        return f

    return register(func) if func is not None else register


def registered_workloads() -> dict[str, object]:
    """A copy of the registry: name -> function."""
    return dict(_WORKLOADS)


class SearchTask:
    """One tuning task: a compute DAG, a target and the hardware parameters.

    Parameters
    ----------
    compute_dag : ComputeDAG, optional
        The computation. Give either this or ``func`` (+ ``args``).
    func : callable or str, optional
        A function registered with :func:`register_workload` (or its name) returning tensors.
    args : tuple
        Arguments for ``func``.
    target : str or Target
        ``"llvm"``, ``"cuda"``, ``"opencl"``...
    hardware_params : HardwareParams, optional
        Overrides of the device's defaults.
    desc : str
        A short description used in progress output.
    """

    def __init__(
        self,
        compute_dag: ComputeDAG | None = None,
        workload_key: str | None = None,
        target="llvm",
        hardware_params: HardwareParams | None = None,
        func=None,
        args=(),
        desc: str = "",
    ):
        if compute_dag is None:
            if func is None:
                raise ValueError("SearchTask needs compute_dag=... or func=... (with args=...)")
            if isinstance(func, str):
                if func not in _WORKLOADS:
                    raise ValueError(
                        f"no workload registered as {func!r}; registered: {sorted(_WORKLOADS)}"
                    )
                func = _WORKLOADS[func]
            compute_dag = ComputeDAG(list(func(*args)))
            desc = desc or getattr(func, "__name__", "")
        if not isinstance(compute_dag, ComputeDAG):
            raise TypeError(f"compute_dag must be a ComputeDAG, got {type(compute_dag).__name__}")
        self.compute_dag = compute_dag
        self.workload_key = workload_key or compute_dag.workload_key
        self.target = Target(target)
        check_host_cpu(self.target)
        self.hardware_params = HardwareParams.for_target(self.target, hardware_params)
        self.desc = desc or "_".join(op.name for op in compute_dag.compute_ops)
        from .measure.records import register_dag

        # Records name workloads by key; registering lets logs of this task load as states.
        register_dag(compute_dag, self.workload_key)

    def tune(self, tuning_options=None, search_policy=None):
        """Search for a fast schedule (see :func:`autosched.tuning.auto_schedule`).

        Returns the best measured state (or the best predicted one with 0 trials).
        """
        from .tuning import auto_schedule

        return auto_schedule(self, search_policy, tuning_options)

    def apply_best(self, log_file):
        """The best error-free state of this task in ``log_file``.

        A best record whose steps do not replay on this task's DAG (a stale or corrupt line)
        gives way to the next best, with one warning naming the lines skipped.

        Raises
        ------
        ValueError
            If the log holds no valid record of this task, or none that replays (naming the
            file, the key and the lines).
        """
        from .measure.records import load_ranked_records

        ranked = load_ranked_records(log_file, self.workload_key, str(self.target))
        if not ranked:
            raise ValueError(
                f"{log_file}: no valid record of task {self.desc!r} (workload key "
                f"{self.workload_key}, target {self.target}); tune it first"
            )
        failed = []
        for inp, _ in ranked:
            try:
                state = inp.state.to_state(self.compute_dag)
            except Exception as e:  # records are outside input: any failure skips the record
                failed.append(f"{inp.state.origin} ({str(e).strip()[:200] or repr(e)})")
                continue
            if failed:
                warnings.warn(
                    f"task {self.desc!r}: skipped {len(failed)} best record(s) that do not "
                    f"replay: {'; '.join(failed)}; using {inp.state.origin}",
                    stacklevel=2,
                )
            return state
        raise ValueError(
            f"{log_file}: none of the {len(ranked)} records of task {self.desc!r} replays on "
            f"its DAG (first: {failed[0]}); tune it again"
        )

    def print_best(self, log_file, print_mode: str = "schedule") -> str:
        """The best schedule in ``log_file`` as Python schedule code (``"schedule"``) or as
        the lowered loop program (``"loops"``)."""
        state = self.apply_best(log_file)
        if print_mode == "schedule":
            from tensorir.state_printer import print_python_code

            return print_python_code(state)
        if print_mode == "loops":
            from tensorir.lower import lower

            return str(lower(state))
        raise ValueError(f"print_mode must be 'schedule' or 'loops', got {print_mode!r}")

    def __repr__(self) -> str:
        return f"SearchTask({self.desc!r}, target={str(self.target)!r})"
