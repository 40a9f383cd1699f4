"""The model-based tuners' cost model: gradient-boosted trees on configuration features.

TVM's XGBTuner trains XGBoost; this one trains LightGBM (a dependency of autosched already),
with the same two losses: ``"rank"`` (LightGBM's lambdarank on throughput levels, TVM's
``rank:pairwise``) and ``"reg"`` (squared error on normalized throughput). A *base model*
trained on the records of other tasks (transfer learning) adds its scores to this model's, as
XGBoost's ``base_margin`` does in TVM.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LGBCostModel"]

RANK_LEVELS = 30  # throughput levels for lambdarank (its label gains cover 0..30)


class LGBCostModel:
    """Boosted trees scoring feature rows; higher means faster.

    Parameters
    ----------
    loss_type : str
        "rank" or "reg".
    num_threads : int, optional
        LightGBM threads (default 1: the tuner shares the machine with the measurements).
    seed : int
    """

    def __init__(self, loss_type: str = "rank", num_threads: int | None = None, seed: int = 0):
        if loss_type not in ("rank", "reg"):
            raise ValueError(f"loss_type {loss_type!r}: use 'rank' or 'reg'")
        self.loss_type = loss_type
        self.num_threads = num_threads or 1
        self.seed = seed
        self.booster = None
        self.base: LGBCostModel | None = None

    def _params(self) -> dict:
        params = {
            "num_leaves": 31,
            "learning_rate": 0.1,
            "min_data_in_leaf": 2,
            "min_sum_hessian_in_leaf": 1e-6,
            "feature_pre_filter": False,
            "deterministic": True,
            "force_row_wise": True,
            "seed": self.seed,
            "num_threads": self.num_threads,
            "verbosity": -1,
        }
        if self.loss_type == "rank":
            params.update(objective="lambdarank", lambdarank_truncation_level=64)
        else:
            params.update(objective="regression")
        return params

    def fit(self, x: np.ndarray, y: np.ndarray, groups=None, rounds: int = 100) -> None:
        """Train on rows ``x`` with throughputs ``y`` (0 for failed configurations).

        ``groups``: sizes of consecutive row groups whose throughputs are comparable (one per
        task); default one group. Throughputs are normalized by each group's best.
        """
        import lightgbm as lgb

        x = np.asarray(x, np.float32)
        y = np.asarray(y, np.float64)
        groups = [len(y)] if groups is None else list(groups)
        norm = np.zeros_like(y)
        lo = 0
        for size in groups:
            best = y[lo : lo + size].max(initial=0.0)
            norm[lo : lo + size] = y[lo : lo + size] / best if best > 0 else 0.0
            lo += size
        if self.loss_type == "rank":
            label = np.round(norm * RANK_LEVELS).astype(np.int32)
        else:
            label = norm
        init = self.base.predict(x) if self.base is not None else None
        data = lgb.Dataset(x, label=label, init_score=init, params={"verbosity": -1})
        if self.loss_type == "rank":
            data.set_group(groups)
        self.booster = lgb.train(self._params(), data, num_boost_round=rounds)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Scores of rows ``x`` (the base model's plus this one's)."""
        x = np.asarray(x, np.float32)
        out = np.zeros(len(x))
        if self.base is not None:
            out += self.base.predict(x)
        if self.booster is not None and len(x):
            out += self.booster.predict(x, num_threads=self.num_threads)
        return out

    @property
    def trained(self) -> bool:
        return self.booster is not None or (self.base is not None and self.base.trained)
