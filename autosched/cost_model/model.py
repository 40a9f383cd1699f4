"""Cost models that rank candidate states: ``RandomModel`` and the pack-sum ``LGBModel``.

``LGBModel`` is Ansor's XGBoost model (ansor-notes section 7) on LightGBM: a program's score is
the sum of per-store predictions over its feature rows
(:mod:`autosched.cost_model.features`); labels are
throughputs normalized per task (``min_cost / cost``, best program of a task = 1), recomputed
at every training; every row of a program has the program's label and a weight equal to it, and
the model is retrained from scratch after each update, on all data up to
``max_train_programs`` programs and on a fixed-size sample of it past that.

Example
-------
>>> model = LGBModel()
>>> model.update(inputs, results)        # MeasureInput / MeasureResult lists
>>> scores = model.predict(task, states)  # higher = predicted faster
"""

from __future__ import annotations

import time

import numpy as np

from ..measure.data import MAX_COST, MeasureErrorNo
from ..measure.timing import phase
from .feature_pool import states_features
from .model_file import load_model_file as _load_model_file
from .model_file import save_model_file as _save_model_file
from .record_inputs import resolve_inputs

__all__ = ["CostModel", "LGBModel", "RandomModel"]


class CostModel:
    """Interface of the search's cost models."""

    def update(self, inputs, results) -> None:
        """Learn from measured programs (lists of MeasureInput and MeasureResult)."""
        raise NotImplementedError

    def predict(self, task, states) -> np.ndarray:
        """Scores of ``states`` of ``task``, higher meaning faster; shape ``(len(states),)``."""
        raise NotImplementedError

    @property
    def warming_up(self) -> bool:
        """True while the scores are random because too little has been measured; the search
        then skips the evolution, which would only shuffle random scores."""
        return False


class RandomModel(CostModel):
    """Uniform random scores in [0, 1); ``update`` does nothing (TVM's RandomModel)."""

    def __init__(self, seed: int | None = None):
        self.rng = np.random.default_rng(seed)

    def update(self, inputs, results) -> None:
        pass

    def predict(self, task, states) -> np.ndarray:
        return self.rng.random(len(states))


def task_key(task) -> tuple[str, str]:
    """How records identify a task: ``(workload_key, str(target))``."""
    return (task.workload_key, str(task.target))


def pack_sum(preds: np.ndarray, pack_ids: np.ndarray, n_packs: int) -> np.ndarray:
    """Per-program sums of per-row values (``pack_ids[r]`` = program of row r)."""
    return np.bincount(pack_ids, weights=preds, minlength=n_packs)


class LGBModel(CostModel):
    """Pack-sum gradient-boosted trees (LightGBM), retrained from scratch on every update.

    Parameters
    ----------
    seed : int
        Seeds LightGBM and the warm-up random scores.
    num_warmup_sample : int
        Until more programs than this are known, :meth:`predict` returns uniform random scores.
    num_threads : int, optional
        LightGBM threads; defaults to half the cores this process may use, as TVM's XGBoost
        model does (``cpu_count // 2``): training sets here are small (thousands of rows), and
        on 2 cores that also measure candidates two threads trained 10-45x slower than one.
    max_rounds : int
        Upper bound on boosting rounds.
    early_stopping_rounds : int
        Stop after this many rounds without improvement of the training pack-sum RMSE (TVM: 50).
    max_train_programs : int, optional
        Most programs one training fits (None: all, as TVM). Past it, the newest half is kept
        and the other half is drawn from the older ones with probability proportional to
        their label (the rows' training weight, so fast programs stay), with a seed fixed by
        ``seed`` and the data's size: retraining after every round then costs the same however
        long the log grows, instead of growing with it. Labels still come from every program.
    params : dict, optional
        Overrides of the LightGBM parameters (:attr:`params`).

    Attributes
    ----------
    last_train_seconds : float
        Wall time of the latest training.
    last_train_programs : int
        Programs (measured without error) the latest training fitted.
    feature_store : FeatureStore or None
        The feature rows of measured programs kept beside the tuning log
        (:mod:`autosched.cost_model.feature_store`): :meth:`update` reads the rows of programs
        found there instead of lowering them, and adds the others. ``TaskScheduler`` sets it
        when it writes a log.
    """

    def __init__(
        self,
        seed: int = 43,
        num_warmup_sample: int = 100,
        num_threads: int | None = None,
        max_rounds: int = 400,
        early_stopping_rounds: int = 50,
        params: dict | None = None,
        max_train_programs: int | None = 4096,
    ):
        if num_threads is None:
            from ..workers import cpu_count

            num_threads = max(1, cpu_count() // 2)
        self.seed = seed
        self.num_warmup_sample = num_warmup_sample
        self.max_rounds = max_rounds
        self.early_stopping_rounds = early_stopping_rounds
        if max_train_programs is not None and max_train_programs < 2:
            raise ValueError(f"LGBModel: max_train_programs must be >= 2 or None, "
                             f"got {max_train_programs}")  # fmt: skip
        self.max_train_programs = max_train_programs
        # Close to Ansor's XGBoost setup: max_depth 10, eta 0.2, gamma 0.001, min_child_weight 0,
        # lambda 1 (XGBoost's default L2).
        self.params = {
            "max_depth": 10,
            "num_leaves": 64,
            "learning_rate": 0.2,
            "min_gain_to_split": 0.001,
            "min_data_in_leaf": 2,
            "min_sum_hessian_in_leaf": 1e-8,
            "lambda_l2": 1.0,
            "feature_pre_filter": False,
            "deterministic": True,
            "force_row_wise": True,
            "seed": seed,
            "num_threads": num_threads,
            "verbosity": -1,
        }
        self.params.update(params or {})
        self.rng = np.random.default_rng(seed)
        self.booster = None
        self.base_score = 0.0  # added to every row's raw prediction
        self.last_train_seconds = 0.0
        self.last_train_programs = 0
        # Where measured programs' rows are kept across runs (set by the task scheduler).
        self.feature_store = None
        # All measured programs: feature rows, task key, cost (MAX_COST when failed).
        self.features: list[np.ndarray] = []
        self.keys: list[tuple] = []
        self.costs: list[float] = []

    # ------------------------------------------------------------------ data

    def update(self, inputs, results) -> None:
        """Add measured programs and retrain on everything once past the warm-up.

        ``inputs`` may come from a log (``model.update(*zip(*load_records(log)))``, transfer
        learning): records are replayed on their DAGs first (:func:`resolve_inputs`).
        """
        inputs, results = resolve_inputs(inputs, results)
        by_task: dict = {}
        for k, inp in enumerate(inputs):
            by_task.setdefault(id(inp.task), (inp.task, []))[1].append(k)
        feats: list = [None] * len(inputs)
        store = self.feature_store
        for task, idx in by_task.values():
            states = [inputs[k].state for k in idx]
            for k, f in zip(idx, states_features(task, states, store=store), strict=True):
                feats[k] = f
        if store is not None:
            with phase("records"):  # written beside the log, as its records are
                store.flush()
        for inp, res, f in zip(inputs, results, feats, strict=True):
            ok = res.error_no == MeasureErrorNo.NO_ERROR
            self.features.append(f)
            self.keys.append(task_key(inp.task))
            self.costs.append(res.mean_cost if ok else MAX_COST)
        if len(self.features) > self.num_warmup_sample:
            self.train()

    def update_from_file(self, file_name, n_lines: int | None = None, dags=None) -> None:
        """Learn from the records of a log (TVM's ``update_from_file``): its first ``n_lines``
        records, or all; ``dags`` as for :func:`autosched.measure.records.load_records`."""
        from ..measure.records import load_records

        pairs = []
        for pair in load_records(file_name, dags):
            if n_lines is not None and len(pairs) >= n_lines:
                break
            pairs.append(pair)
        if pairs:
            inputs, results = zip(*pairs)
            self.update(list(inputs), list(results))

    def labels(self) -> np.ndarray:
        """Normalized throughput per program: ``min cost of its task / cost`` (0 if failed)."""
        costs = np.asarray(self.costs, dtype=np.float64)
        best: dict = {}
        for key, c in zip(self.keys, costs, strict=True):
            if c < best.get(key, MAX_COST):
                best[key] = c
        mins = np.array([best.get(k, MAX_COST) for k in self.keys])
        y = np.where(costs < MAX_COST, mins / np.maximum(costs, 1e-30), 0.0)
        return y

    def _dataset(self):
        """Rows of the programs that ran (failed ones have weight ~0 in TVM: dropped here)."""
        y = self.labels()
        keep = [p for p, f in enumerate(self.features) if y[p] > 0 and len(f)]
        if not keep:
            return None
        keep = self._cap(keep, y)
        rows = np.concatenate([self.features[p] for p in keep])
        sizes = np.array([len(self.features[p]) for p in keep])
        pack_ids = np.repeat(np.arange(len(keep)), sizes)
        y_pack = y[keep]
        return rows, pack_ids, y_pack

    def _cap(self, keep: list[int], y: np.ndarray) -> list[int]:
        """At most ``max_train_programs`` of the programs ``keep`` (in log order): the newest
        half and a label-weighted sample of the older ones (see the class docstring)."""
        cap = self.max_train_programs
        if cap is None or len(keep) <= cap:
            return keep
        newest = keep[len(keep) - cap // 2 :]
        older = np.asarray(keep[: len(keep) - cap // 2])
        weight = y[older] / y[older].sum()
        rng = np.random.default_rng((self.seed, len(keep)))
        drawn = rng.choice(older, size=cap - len(newest), replace=False, p=weight)
        return sorted(int(p) for p in drawn) + newest

    # ------------------------------------------------------------------ training

    def train(self) -> None:
        """Fit a fresh booster on all data with the pack-sum objective."""
        import lightgbm as lgb

        data = self._dataset()
        if data is None:
            return
        t0 = time.perf_counter()
        rows, pack_ids, y_pack = data
        sizes = np.bincount(pack_ids)
        n_packs = len(y_pack)
        self.last_train_programs = n_packs
        y_rows = y_pack[pack_ids]
        w_rows = y_rows  # throughput-weighted: fast programs matter more

        def objective(preds, _train):
            # loss per row: 1/2 w (sum_pred(P) - y_P)^2, treating the pack sum as the row's output
            sums = pack_sum(preds, pack_ids, n_packs)[pack_ids]
            return w_rows * (sums - y_rows), w_rows

        def p_rmse(preds, _data):
            sums = pack_sum(preds, pack_ids, n_packs)
            return "p-rmse", float(np.sqrt(np.mean((sums - y_pack) ** 2))), False

        # Every row starts from a constant (XGBoost's base_score): LightGBM gives custom
        # objectives no starting score, and when all labels are equal no first split has a
        # positive gain, so training would stop with an all-zero model.
        self.base_score = float(np.sum(w_rows * y_rows / sizes[pack_ids]) / np.sum(w_rows))
        init = np.full(len(rows), self.base_score)
        dtrain = lgb.Dataset(
            rows, label=y_rows, init_score=init, params={"verbosity": -1}, free_raw_data=False
        )
        params = dict(self.params, objective=objective, metric="None")
        # lightgbm's own early_stopping ignores the training set, so stop on p-rmse here.
        callbacks = (
            [_TrainEarlyStop(self.early_stopping_rounds)] if self.early_stopping_rounds else []
        )
        self.booster = lgb.train(
            params,
            dtrain,
            num_boost_round=self.max_rounds,
            valid_sets=[dtrain],
            valid_names=["train"],
            feval=p_rmse,
            callbacks=callbacks,
        )
        self.last_train_seconds = time.perf_counter() - t0

    # ------------------------------------------------------------------ prediction

    @property
    def trained(self) -> bool:
        return self.booster is not None

    @property
    def warming_up(self) -> bool:
        return self.booster is None or len(self.features) <= self.num_warmup_sample

    def predict(self, task, states) -> np.ndarray:
        """Pack-sum scores of ``states``; ``-inf`` for states without features (invalid).

        Before more than ``num_warmup_sample`` programs are known: uniform random in [0, 1).
        """
        if self.warming_up:
            return self.rng.random(len(states))
        with phase("predict"):  # (the features inside are charged to "features")
            return self.predict_features(states_features(task, states))

    def predict_features(self, feats: list[np.ndarray]) -> np.ndarray:
        """Pack-sum scores from per-program feature arrays (one prediction call for all rows)."""
        sizes = np.array([len(f) for f in feats], dtype=np.int64)
        scores = np.full(len(feats), -np.inf)
        if sizes.sum() == 0:
            return scores
        rows = np.concatenate([f for f in feats if len(f)]).astype(np.float32, copy=False)
        pack_ids = np.repeat(np.arange(len(feats)), sizes)
        # A custom objective makes predict return raw scores, which is what we sum; trees past
        # the early-stopping best round are skipped (num_iteration defaults to best_iteration).
        preds = self.booster.predict(rows, num_threads=self.params["num_threads"])
        preds += self.base_score
        sums = pack_sum(preds, pack_ids, len(feats))
        valid = sizes > 0
        scores[valid] = sums[valid]
        return scores

    # ------------------------------------------------------------------ persistence

    def save(self, path: str) -> None:
        """Write the booster and the training data (features, task keys, costs) to ``path``.

        The file is an ``.npz`` archive of plain arrays (no pickle): the booster in LightGBM's
        own text format, the feature rows, per-program row counts, costs, and a JSON header with
        the task keys and the base score. :meth:`load` reads it without running any code.
        """
        _save_model_file(self, path)

    def load(self, path: str) -> None:
        """Read what :meth:`save` wrote; the loaded model predicts at once (no warm-up).

        Raises
        ------
        ValueError
            If ``path`` is not a model saved by :meth:`save` of this version (a file of the
            old pickle format included: it is refused, never unpickled), naming the file.
        """
        saved = _load_model_file(path)
        self.features, self.keys, self.costs = saved.features, saved.keys, saved.costs
        self.base_score = saved.base_score
        self.booster = saved.booster
        self.num_warmup_sample = -1


class _TrainEarlyStop:
    """Stop after ``rounds`` iterations without a better training p-rmse (TVM's callback)."""

    order = 30

    def __init__(self, rounds: int):
        self.rounds = rounds
        self.best = float("inf")
        self.best_iter = 0

    def __call__(self, env) -> None:
        import lightgbm as lgb

        score = env.evaluation_result_list[0][2]
        if score < self.best - 1e-12:
            self.best, self.best_iter = score, env.iteration
        elif env.iteration - self.best_iter >= self.rounds:
            raise lgb.callback.EarlyStopException(self.best_iter, env.evaluation_result_list)
