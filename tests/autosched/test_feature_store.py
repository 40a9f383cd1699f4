"""The feature rows kept beside a log (cost_model/feature_store.py): what a resumed tune reads
instead of lowering its records again; the same rows, tolerant of a damaged or stale file, and
bounded in size."""

import logging
import zipfile

import numpy as np
import pytest

from autosched import workloads
from autosched.cost_model import feature_pool, feature_store
from autosched.cost_model.feature_pool import FeatureCache, states_features, store_keys
from autosched.cost_model.feature_store import FeatureStore, store_path
from autosched.cost_model.features import N_FEATURES, state_features
from autosched.cost_model.model import LGBModel
from autosched.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.task import SearchTask
from tensorir import ComputeDAG

DIVS = [1, 2, 4, 8]


@pytest.fixture(scope="module")
def task():
    return SearchTask(ComputeDAG(workloads.matmul(32, 32, 32)), target="llvm")


def _states(task, n, seed):
    """``n`` distinct tiled matmul schedules with random factors and annotations."""
    rng = np.random.default_rng(seed)
    out, seen = [], set()
    while len(out) < n:
        s = task.compute_dag.get_init_state()
        i, j, k = s["C"].iters
        i0, i1, i2 = s.split("C", i, [int(rng.choice(DIVS)), int(rng.choice(DIVS))])
        j0, j1, j2 = s.split("C", j, [int(rng.choice(DIVS)), int(rng.choice(DIVS))])
        k0, k1 = s.split("C", k, [int(rng.choice(DIVS))])
        s.reorder("C", [i0, j0, i1, j1, k0, k1, i2, j2])
        if rng.random() < 0.5:
            s.parallel("C", i0)
        if rng.random() < 0.5:
            s.vectorize("C", j2)
        key = FeatureCache.key(task, s)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


@pytest.fixture
def lowerings(monkeypatch):
    """Counts the states lowered for their features (in this process; no worker pool)."""
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "0")
    calls = []

    def counted(task, state):
        calls.append(state)
        return state_features(task, state)

    monkeypatch.setattr(feature_pool, "state_features", counted)
    return calls


def _written(task, states, path):
    """A store at ``path`` holding the rows of ``states``, as a first tune leaves it."""
    store = FeatureStore.open(path)
    states_features(task, states, cache=FeatureCache(), store=store)
    store.flush()
    return store


def _results(n, seed=0):
    costs = np.random.default_rng(seed).uniform(1e-4, 1e-3, n)
    return [MeasureResult((float(c),), MeasureErrorNo.NO_ERROR) for c in costs]


def test_stored_rows_are_the_lowered_rows_and_nothing_is_lowered_again(task, tmp_path, lowerings):
    states = _states(task, 6, seed=1)
    path = store_path(tmp_path / "log.json")
    _written(task, states, path)
    assert len(lowerings) == 6 and path.exists()
    lowerings.clear()
    reopened = FeatureStore.open(path, keep=store_keys(task, states), limit=6)
    rows = states_features(task, states, cache=FeatureCache(), store=reopened)
    assert lowerings == [] and reopened.hits == 6
    for state, got in zip(states, rows, strict=True):
        want = state_features(task, state)
        assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
        assert got.tobytes() == want.tobytes()  # bit for bit


def test_model_trained_from_the_store_has_the_same_data(task, tmp_path, lowerings):
    states = _states(task, 8, seed=2)
    path = store_path(tmp_path / "log.json")
    _written(task, states, path)
    inputs, results = [MeasureInput(task, s) for s in states], _results(8)
    fresh = LGBModel(num_warmup_sample=4, num_threads=1, max_train_programs=4096)
    feature_pool.DEFAULT_CACHE.clear()
    fresh.update(inputs, results)
    lowerings.clear()
    feature_pool.DEFAULT_CACHE.clear()
    resumed = LGBModel(num_warmup_sample=4, num_threads=1, max_train_programs=4096)
    resumed.feature_store = FeatureStore.open(path, keep=store_keys(task, states), limit=8)
    resumed.update(inputs, results)
    assert lowerings == []
    assert [f.tobytes() for f in resumed.features] == [f.tobytes() for f in fresh.features]
    assert resumed.costs == fresh.costs and resumed.trained and fresh.trained
    probe = _states(task, 5, seed=3)
    np.testing.assert_array_equal(resumed.predict(task, probe), fresh.predict(task, probe))


def test_new_programs_are_appended_and_read_back(task, tmp_path):
    states = _states(task, 9, seed=4)
    path = store_path(tmp_path / "log.json")
    store = _written(task, states[:3], path)
    for part in (states[3:6], states[6:]):  # two more rounds: two appended segments
        states_features(task, part, cache=FeatureCache(), store=store)
        store.flush()
    with np.load(path, allow_pickle=False) as z:
        assert sorted(n for n in z.files if n.startswith("keys_")) == ["keys_0", "keys_1", "keys_2"]
    keys = store_keys(task, states)
    reopened = FeatureStore.open(path, keep=keys, limit=9)
    assert len(reopened) == 9 and all(k in reopened for k in keys)
    with np.load(path, allow_pickle=False) as z:  # merged into one segment on resume
        assert [n for n in z.files if n.startswith("keys_")] == ["keys_0"]


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncated", "pickled rows", "wrong width", "sizes mismatch"],
)
def test_a_damaged_file_is_logged_and_the_records_lowered_again(
    task, tmp_path, lowerings, caplog, damage
):
    states = _states(task, 4, seed=5)
    path = store_path(tmp_path / "log.json")
    _written(task, states, path)
    good = path.read_bytes()
    header = dict(FeatureStore._header())
    keys = np.frombuffer(b"".join(store_keys(task, states)), np.uint8).reshape(4, 16)
    if damage == "garbage":
        path.write_bytes(b"not a zip at all" * 10)
    elif damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "pickled rows":  # np.load(allow_pickle=False) refuses it: never unpickled
        rows = np.array([object()] * 4, dtype=object)
        np.savez(path, **header, keys_0=keys, sizes_0=np.ones(4, np.int64), rows_0=rows)
    elif damage == "wrong width":
        np.savez(path, **header, keys_0=keys, sizes_0=np.ones(4, np.int64),
                 rows_0=np.zeros((4, N_FEATURES - 1), np.float32))  # fmt: skip
    else:
        np.savez(path, **header, keys_0=keys, sizes_0=np.full(4, 2, np.int64),
                 rows_0=np.zeros((4, N_FEATURES), np.float32))  # fmt: skip
    lowerings.clear()
    with caplog.at_level(logging.INFO, logger="autosched.cost_model.feature_store"):
        store = FeatureStore.open(path, keep=store_keys(task, states), limit=4)
    assert len(store) == 0
    assert any(
        "unreadable" in r.getMessage() and str(path) in r.getMessage() for r in caplog.records
    )
    rows = states_features(task, states, cache=FeatureCache(), store=store)
    assert len(lowerings) == 4
    assert all(r.tobytes() == state_features(task, s).tobytes() for r, s in zip(rows, states))
    store.flush()  # rewritten whole: readable again
    assert len(FeatureStore.open(path, keep=store_keys(task, states), limit=4)) == 4


def test_rows_of_other_feature_code_are_never_used(task, tmp_path, lowerings, caplog, monkeypatch):
    states = _states(task, 3, seed=6)
    path = store_path(tmp_path / "log.json")
    _written(task, states, path)
    monkeypatch.setattr(feature_store, "fingerprint", lambda: "changed lowering")
    lowerings.clear()
    with caplog.at_level(logging.INFO, logger="autosched.cost_model.feature_store"):
        store = FeatureStore.open(path, keep=store_keys(task, states), limit=3)
    assert len(store) == 0 and "other feature code" in caplog.text
    states_features(task, states, cache=FeatureCache(), store=store)
    assert len(lowerings) == 3


def test_the_store_stays_bounded_across_many_resumes(task, tmp_path):
    """Each resume adds a round's programs: the file holds one entry per distinct record of
    the log (never more), in at most MAX_SEGMENTS segments."""
    log = tmp_path / "log.json"
    path = store_path(log)
    states = _states(task, 40, seed=7)
    logged: list = []  # the log's records, a resumed tune's preload
    for run in range(10):
        keep = store_keys(task, logged) if run else None
        store = FeatureStore.open(path, keep=keep, limit=len(logged))
        new = states[4 * run : 4 * run + 4]
        # A round measures 4 new programs and one already in the log (logged twice).
        batch = new + logged[:1]
        states_features(task, batch, cache=FeatureCache(), store=store)
        store.flush()
        logged += batch
        assert len(FeatureStore.open(path, keep=store_keys(task, logged), limit=len(logged))) == (
            4 * run + 4
        )
    size_one = path.stat().st_size
    # A log that was started again (fewer records than entries): only its records are kept.
    store = FeatureStore.open(path, keep=store_keys(task, states[:4]), limit=4)
    assert len(store) == 4 and path.stat().st_size < size_one / 4
    # A tune that does not resume starts the file afresh.
    store = FeatureStore.open(path)
    states_features(task, states[:2], cache=FeatureCache(), store=store)
    store.flush()
    assert len(FeatureStore.open(path, keep=[], limit=100)) == 2


def test_segments_are_merged_past_the_limit(task, tmp_path, monkeypatch):
    monkeypatch.setattr(feature_store, "MAX_SEGMENTS", 3)
    states = _states(task, 8, seed=8)
    path = store_path(tmp_path / "log.json")
    store = FeatureStore.open(path)
    for s in states:
        states_features(task, [s], cache=FeatureCache(), store=store)
        store.flush()
        with zipfile.ZipFile(path) as zf:
            assert sum(n.startswith("keys_") for n in zf.namelist()) <= 3
    assert len(FeatureStore.open(path, keep=store_keys(task, states), limit=8)) == 8


def test_a_file_changed_by_someone_else_is_rewritten_not_appended_to(task, tmp_path):
    states = _states(task, 4, seed=9)
    path = store_path(tmp_path / "log.json")
    store = _written(task, states[:2], path)
    path.write_bytes(b"overwritten by another process")
    states_features(task, states[2:], cache=FeatureCache(), store=store)
    store.flush()
    assert len(FeatureStore.open(path, keep=store_keys(task, states), limit=4)) == 4


def test_a_write_that_fails_is_logged_and_the_tune_goes_on(task, tmp_path, caplog):
    path = tmp_path / "missing-dir" / "log.json.features.npz"
    store = FeatureStore.open(path)
    with caplog.at_level(logging.INFO, logger="autosched.cost_model.feature_store"):
        rows = states_features(task, _states(task, 2, seed=10), cache=FeatureCache(), store=store)
        store.flush()
    assert len(rows) == 2 and len(store) == 2 and not path.exists()
    assert "not written" in caplog.text and str(path) in caplog.text
