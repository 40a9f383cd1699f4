"""``XGBTuner``: model-based tuning (TVM's ModelBasedTuner with its XGBoost cost model).

The model is LightGBM (:class:`~autosched.autotvm.tuner.cost_model.LGBCostModel`), not
XGBoost; the class keeps TVM's name so the tutorials' code runs unchanged. Every
``plan_size`` measurements the model is retrained on all of them and simulated annealing
picks the next ``plan_size`` configurations it rates highest (5% of each plan is random, for
exploration). ``load_history`` trains a base model on the records of earlier tasks, which
guides the first plan of this one (transfer learning).
"""

from __future__ import annotations

import logging

import numpy as np

from .cost_model import LGBCostModel
from .features import FEATURE_TYPES, FeatureCache, config_features
from .sa_optimizer import SimulatedAnnealingOptimizer
from .tuner import Tuner

__all__ = ["XGBTuner"]

_log = logging.getLogger(__name__)


class XGBTuner(Tuner):
    """Tune with a cost model trained on the measurements (LightGBM, under TVM's name).

    Parameters
    ----------
    task : autotvm.task.Task
    plan_size : int
        Configurations the model picks at a time (and measurements between trainings).
    feature_type : str
        "itervar" (per-loop features of the lowered program), "knob" (the knob values) or
        "curve" (touch-count curves, comparable across tasks); see
        :mod:`autosched.autotvm.tuner.features`.
    loss_type : str
        "rank" (lambdarank) or "reg" (regression).
    num_threads : int, optional
        LightGBM threads.
    optimizer : "sa" or SimulatedAnnealingOptimizer
        How the model's best configurations are found.
    diversity_filter_ratio : None
        Accepted for TVM's signature; not implemented (must be None).
    log_interval : int
        Accepted for TVM's signature.
    seed : int, optional
    """

    def __init__(self, task, plan_size: int = 64, feature_type: str = "itervar",
                 loss_type: str = "rank", num_threads=None, optimizer="sa",
                 diversity_filter_ratio=None, log_interval: int = 50,
                 seed: int | None = 0):  # fmt: skip
        super().__init__(task, seed)
        if feature_type not in FEATURE_TYPES:
            raise ValueError(f"XGBTuner feature_type {feature_type!r}: use one of {FEATURE_TYPES}")
        if diversity_filter_ratio is not None:
            raise ValueError("XGBTuner diversity_filter_ratio is not supported; leave it None")
        self.plan_size = plan_size
        self.feature_type = feature_type
        self.model = LGBCostModel(loss_type, num_threads, seed or 0)
        self.features = FeatureCache(task, feature_type)
        if optimizer == "sa":
            # Lowering a configuration for its features costs milliseconds in Python: fewer
            # annealing steps for the program features than for the knob values.
            cheap = feature_type == "knob"
            optimizer = SimulatedAnnealingOptimizer(
                task,
                n_iter=500 if cheap else 40,
                parallel_size=128 if cheap else 64,
                early_stop=50 if cheap else 10,
                seed=seed or 0,
            )
        self.optimizer = optimizer
        self.trials: list[int] = []
        self.trial_pt = 0
        self.xs: list[int] = []
        self.ys: list[float] = []
        self.train_ct = 0

    # ------------------------------------------------------------------ proposals

    def next_batch(self, batch_size: int) -> list:
        out: list = []
        chosen: set[int] = set()
        while len(out) < batch_size and len(self.visited) + len(out) < len(self.space):
            index = None
            while self.trial_pt < len(self.trials):
                cand = self.trials[self.trial_pt]
                self.trial_pt += 1
                if cand not in self.visited and cand not in chosen:
                    index = cand
                    break
            if index is None or self.trial_pt > len(self.trials) - int(0.05 * self.plan_size):
                # exploration (and the first plan before any model): an unmeasured random one
                while index is None or index in self.visited or index in chosen:
                    index = int(self.rng.integers(len(self.space)))
            chosen.add(index)
            out.append(self.space.get(index))
        return out

    def _score(self, indices) -> np.ndarray:
        rows, valid = self.features.matrix(indices)
        scores = np.full(len(indices), -np.inf)
        if valid.any():
            scores[valid] = self.model.predict(rows[valid])
        return scores

    def _replan(self) -> None:
        self.trials = self.optimizer.find_maximums(self._score, self.plan_size, self.visited)
        self.trial_pt = 0

    # ------------------------------------------------------------------ learning

    def update(self, inputs, results) -> None:
        for inp, res in zip(inputs, results, strict=True):
            self.xs.append(inp.config.index)
            self.ys.append(self.task.flop / res.mean_cost if res.error_no == 0 else 0.0)
        if len(self.xs) >= self.plan_size * (self.train_ct + 1) and max(self.ys) > 0:
            rows, valid = self.features.matrix(self.xs)
            if valid.sum() >= 2:
                self.model.fit(rows[valid], np.asarray(self.ys)[valid])
                self._replan()
            self.train_ct += 1

    def load_history(self, data_set, min_seed_records: int = 500) -> None:
        """Train a base model on earlier records (``autotvm.record.load_from_file(log)``) and
        plan the first configurations with it.

        Records of any task count for "itervar" and "curve" features (for "itervar", those of
        the same loop depth matter most); for "knob" only records of this template with the
        same knobs. Fewer than ``min_seed_records`` usable records: nothing is done (TVM's
        rule; pass a smaller number for small logs).
        """
        groups: dict[tuple, list] = {}
        for inp, res in data_set:
            if self.feature_type == "knob" and inp.task.name != self.task.name:
                continue
            groups.setdefault(inp.task.workload, []).append((inp, res))
        n_records = sum(len(v) for v in groups.values())
        if n_records < min_seed_records:
            _log.debug("load_history: %d records < min_seed_records=%d; not used",
                       n_records, min_seed_records)  # fmt: skip
            return
        rows, ys, sizes = [], [], []
        width = None
        for records in groups.values():
            task = records[0][0].task
            flop = task.flop
            size = 0
            for inp, res in records:
                x = config_features(task, inp.config, self.feature_type)
                if x is None or (width is not None and len(x) != width):
                    continue
                width = len(x)
                rows.append(x)
                ys.append(flop / res.mean_cost if res.error_no == 0 else 0.0)
                size += 1
            if size:
                sizes.append(size)
        if len(rows) < 2 or max(ys) <= 0:
            return
        if self.feature_type == "knob":
            own = len(config_features(self.task, self.space.get(0), "knob"))
            if own != width:
                return
        base = LGBCostModel(self.model.loss_type, self.model.num_threads, self.model.seed)
        base.fit(np.stack(rows), np.asarray(ys), groups=sizes)
        self.model.base = base
        _log.debug("load_history: base model on %d records of %d tasks", len(rows), len(sizes))
        self._replan()
