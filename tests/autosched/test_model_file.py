"""Saved cost models: a file of plain arrays and LightGBM text; pickles are refused, never run."""

import os
import pickle

import numpy as np
import pytest

import autosched as ansor
from autosched import testing
from autosched.cost_model.features import N_FEATURES
from autosched.cost_model.model import LGBModel
from tensorir import ComputeDAG


class _Payload:
    """Unpickling this creates ``marker``: what a crafted model file could do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _trained_model(rng, n_programs=40):
    m = LGBModel(seed=3, num_warmup_sample=10, num_threads=1)
    feats, costs = [], []
    for _ in range(n_programs):
        x = rng.random((int(rng.integers(1, 4)), N_FEATURES)).astype(np.float32)
        feats.append(x)
        costs.append(1.0 / (0.1 + x[:, 0].sum()))
    feats.append(np.zeros((0, N_FEATURES), np.float32))  # a program that did not lower
    costs.append(1e10)
    m.features, m.keys, m.costs = (
        feats,
        [("w", "llvm")] * (n_programs - 1) + [("v", "cuda")] * 2,
        costs,
    )
    m.train()
    return m


@pytest.fixture
def pickled_model(tmp_path):
    marker = tmp_path / "payload_ran"
    path = tmp_path / "model.pkl"
    blob = {"model": None, "features": [], "keys": [], "costs": [], "base_score": _Payload(marker)}
    path.write_bytes(pickle.dumps(blob))
    return path, marker


def test_pickled_model_is_refused_and_its_payload_never_runs(pickled_model):
    path, marker = pickled_model
    with pytest.raises(ValueError, match=r"model\.pkl: .*old pickle format.*retrain"):
        LGBModel().load(str(path))
    assert not marker.exists()


def test_task_scheduler_refuses_pickled_load_model_file(pickled_model):
    path, marker = pickled_model
    task = ansor.SearchTask(ComputeDAG(testing.matmul(8, 8, 8)), target="llvm")
    ts = ansor.TaskScheduler([task], load_model_file=str(path), callbacks=[])
    with pytest.raises(ValueError, match="model.pkl"):
        ts.tune(ansor.TuningOptions(num_measure_trials=1, verbose=0))
    assert not marker.exists()


def test_round_trip_predicts_the_same_scores(tmp_path):
    rng = np.random.default_rng(11)
    m = _trained_model(rng)
    path = tmp_path / "model.lgb"  # saved under exactly this name
    m.save(str(path))
    assert os.listdir(tmp_path) == ["model.lgb"]
    with np.load(path, allow_pickle=False) as z:  # plain arrays: loads without pickle
        assert "LightGBM" in str(z["booster"]) or str(z["booster"]).startswith("tree")
    m2 = LGBModel()
    m2.load(str(path))
    test = [rng.random((int(rng.integers(1, 5)), N_FEATURES)).astype(np.float32) for _ in range(20)]
    np.testing.assert_array_equal(m2.predict_features(test), m.predict_features(test))
    assert m2.keys == m.keys and all(isinstance(k, tuple) for k in m2.keys)
    assert m2.costs == m.costs and m2.base_score == m.base_score
    assert [f.shape for f in m2.features] == [f.shape for f in m.features]
    np.testing.assert_array_equal(np.concatenate(m2.features), np.concatenate(m.features))
    np.testing.assert_array_equal(m2.labels(), m.labels())


def test_untrained_model_round_trips(tmp_path):
    path = tmp_path / "empty.model"
    LGBModel().save(str(path))
    m = LGBModel()
    m.load(str(path))
    assert m.booster is None and m.features == [] and m.keys == []


def test_inconsistent_or_foreign_files_are_refused_naming_the_file(tmp_path):
    rng = np.random.default_rng(2)
    m = _trained_model(rng, 12)
    path = tmp_path / "m.npz"
    m.save(str(path))
    with np.load(path) as z:
        members = {k: z[k] for k in z.files}
    members["rows"] = members["rows"][:-1]
    with open(path, "wb") as fh:
        np.savez(fh, **members)
    with pytest.raises(ValueError, match=r"m\.npz: invalid cost model file: row counts"):
        LGBModel().load(str(path))
    text = tmp_path / "m.txt"
    text.write_text("tree\n")
    with pytest.raises(ValueError, match=r"m\.txt: not a cost model"):
        LGBModel().load(str(text))
    obj = tmp_path / "obj.npz"
    with open(obj, "wb") as fh:
        np.savez(fh, format=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match=r"obj\.npz: not a cost model"):
        LGBModel().load(str(obj))
