"""The task scheduler's policies: the one cost model they share, the default schedule that
seeds each (measured first) and the records a resume preloads into them.

:meth:`~autosched.network.task_scheduler.TaskScheduler.tune` calls :func:`make_policies`
once per run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence

from ..cost_model.model import LGBModel, RandomModel
from ..measure.timing import phase
from ..suppressed import suppressed

__all__ = ["make_policies"]

_log = logging.getLogger(__name__)


class _AdaptiveLGBModel(LGBModel):
    """``LGBModel`` that skips retraining until its data grew by 20% since the last fit
    (TVM's ``adaptive_training``)."""

    last_train_size = 0

    def train(self) -> None:
        n = len(self.features)
        if self.last_train_size and n - self.last_train_size < self.last_train_size / 5:
            return
        super().train()
        self.last_train_size = n


def _make_cost_model(kind: str, num_warmup_sample: int, adaptive_training: bool):
    if kind == "random":
        return RandomModel()
    if kind in ("xgb", "lgb"):
        cls = _AdaptiveLGBModel if adaptive_training else LGBModel
        return cls(num_warmup_sample=num_warmup_sample)
    raise ValueError(
        f"unknown cost model {kind!r} in search_policy; use 'default', 'sketch.xgb' "
        "(= 'sketch.lgb') or 'sketch.random'"
    )


def _default_schedule_seed(task):
    """The default (untuned) schedule of ``task``, or None when it cannot be made. Measured
    first: the best record is then never worse than what an untuned build runs, and after the
    first pass over the tasks each of them has a latency, so the estimated total is known (a
    CPU default is rarely competitive, but a searched candidate of a first round often fails
    or is slower still)."""
    from .default_schedules import default_schedule

    if not task.target.is_gpu:
        try:
            return default_schedule(task.compute_dag, task.target)
        except ValueError:  # no seed is fine; the search goes on without it
            _log.debug(
                "no default schedule to seed %s", task.desc or task.workload_key, exc_info=True
            )
            return None
        except Exception:  # noqa: BLE001 - a bug: no seed either, but counted (strict: raised)
            suppressed("seed schedules")
            return None
    from ..search.annotate_gpu import gpu_state_errors
    from .default_schedules import default_gpu_state

    def check(state):
        errors = gpu_state_errors(task, state)
        if errors:
            raise ValueError("; ".join(errors))

    hw = task.hardware_params
    try:
        return default_gpu_state(
            task.compute_dag,
            hw.gpu_value("max_threads_per_block"),
            hw.gpu_value("warp_size"),
            check,
            task=task,
        )
    except ValueError:  # no seed is fine (a full reduction to a scalar has no default)
        _log.debug("no default schedule to seed %s", task.desc or task.workload_key, exc_info=True)
        return None
    except Exception:  # noqa: BLE001 - a bug: no seed either, but counted (strict: raised)
        suppressed("seed schedules")
        return None


class _PreloadRecords:
    """Init-search callback: add already-replayed records to a policy's measured set (what
    :class:`~autosched.search.policy.PreloadMeasuredStates` does, without re-reading the log)."""

    def __init__(self, inputs, results):
        self.inputs, self.results = inputs, results

    def enter(self, policy) -> None:
        from ..search.evolution import state_key

        keep = [
            k
            for k, inp in enumerate(self.inputs)
            if state_key(inp.state) not in policy.measured_keys
        ]
        inputs = [self.inputs[k] for k in keep]
        policy.record_results(inputs, [self.results[k] for k in keep])
        policy.num_trials -= len(inputs)  # resumed records are not trials of this run


def make_policies(
    tasks: Sequence,
    search_policy,
    params,
    adaptive_training: bool,
    records: dict,
    *,
    round_size: int,
    verbose: int,
    feature_store: Callable,
    load_model_file: str | None,
) -> list:
    """One search policy per task (see ``TaskScheduler.tune``'s ``search_policy``), the
    replayed ``records`` (``{i: (inputs, results)}``) preloaded into them. Made from a name,
    they share one cost model (warm-up samples: a round of ``round_size`` per task) kept with
    the rows of ``feature_store()``, loaded from ``load_model_file`` or trained on
    ``records``, and each is seeded with its task's default schedule."""
    from ..search.params import SearchParams
    from ..search.policy import SeedStates, SketchPolicy

    if not isinstance(search_policy, str):
        policies = list(search_policy)
        if len(policies) != len(tasks):
            raise ValueError(f"{len(policies)} search policies for {len(tasks)} tasks")
        for i, pol in enumerate(policies):
            if i in records:
                _PreloadRecords(*records[i]).enter(pol)
        return policies
    name = "sketch.xgb" if search_policy == "default" else search_policy
    kind, _, model_kind = name.partition(".")
    if kind != "sketch" or not model_kind:
        raise ValueError(
            f"unknown search policy {search_policy!r}; use 'default', 'sketch.xgb' "
            "(= 'sketch.lgb'), 'sketch.random' or a list of SketchPolicy"
        )
    model = _make_cost_model(model_kind, len(tasks) * round_size, adaptive_training)
    if model_kind != "random":
        model.feature_store = feature_store()
        if load_model_file and os.path.exists(load_model_file):
            model.load(load_model_file)
        elif records:
            inputs = [inp for i in sorted(records) for inp in records[i][0]]
            results = [res for i in sorted(records) for res in records[i][1]]
            with phase("train"):  # (its feature extraction is charged to "features")
                model.update(inputs, results)
    if isinstance(params, dict):
        params = SearchParams(**params)
    policies = []
    for i, task in enumerate(tasks):
        callbacks = [_PreloadRecords(*records[i])] if i in records else []
        seed = _default_schedule_seed(task)
        if seed is not None:
            callbacks.append(SeedStates([seed]))
        policies.append(SketchPolicy(task, model, params, verbose=verbose,
                                     init_search_callbacks=callbacks))  # fmt: skip
    return policies
