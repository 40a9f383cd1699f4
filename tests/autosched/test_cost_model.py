"""Cost models: random scores, warm-up, pack-sum training and ranking, -inf for invalid states."""

import numpy as np
import pytest

from autosched import workloads
from autosched.cost_model.features import N_FEATURES
from autosched.cost_model.model import LGBModel, RandomModel, pack_sum
from autosched.measure import MAX_COST, MeasureErrorNo, MeasureInput, MeasureResult
from autosched.task import SearchTask
from tensorir import ComputeDAG

DIVS = [1, 2, 4, 8, 16]


def random_matmul_state(dag, rng):
    """A tiled 2-level matmul schedule with random factors and annotations."""
    s = dag.get_init_state()
    i, j, k = s["C"].iters
    i0, i1, i2 = s.split("C", i, [int(rng.choice(DIVS)), int(rng.choice(DIVS))])
    j0, j1, j2 = s.split("C", j, [int(rng.choice(DIVS)), int(rng.choice(DIVS))])
    k0, k1 = s.split("C", k, [int(rng.choice(DIVS))])
    s.reorder("C", [i0, j0, i1, j1, k0, k1, i2, j2])
    if rng.random() < 0.7:
        s.parallel("C", i0)
    if rng.random() < 0.7:
        s.vectorize("C", j2)
    return s


def test_random_model_is_uniform_and_ignores_updates():
    m = RandomModel(seed=1)
    m.update([], [])
    p = m.predict(None, list(range(1000)))
    assert p.shape == (1000,) and (p >= 0).all() and (p < 1).all()
    assert 0.4 < p.mean() < 0.6
    assert np.array_equal(p[:5], RandomModel(seed=1).predict(None, [0] * 5))


def _synthetic_model(n_programs, rng, warmup=10):
    """Programs of 1-3 rows whose cost is set by feature 0 summed over rows."""
    m = LGBModel(seed=3, num_warmup_sample=warmup, num_threads=1)
    feats, costs = [], []
    for _ in range(n_programs):
        x = rng.random((int(rng.integers(1, 4)), N_FEATURES)).astype(np.float32)
        feats.append(x)
        costs.append(1.0 / (0.1 + x[:, 0].sum()))  # more of feature 0 = faster
    m.features, m.keys, m.costs = feats, [("w", "llvm")] * n_programs, costs
    m.train()
    return m


def pairwise_accuracy(scores, throughput):
    i, j = np.triu_indices(len(scores), 1)
    d = np.sign(throughput[i] - throughput[j])
    ok = np.sign(scores[i] - scores[j]) == d
    return ok[d != 0].mean()


def test_lgb_ranks_synthetic_programs_better_than_chance():
    rng = np.random.default_rng(0)
    m = _synthetic_model(300, rng)
    assert m.trained
    test = [rng.random((int(rng.integers(1, 4)), N_FEATURES)).astype(np.float32) for _ in range(80)]
    truth = np.array([0.1 + x[:, 0].sum() for x in test])
    assert pairwise_accuracy(m.predict_features(test), truth) > 0.7


def test_labels_are_normalized_per_task_and_failures_are_zero():
    m = LGBModel(num_warmup_sample=1000)
    m.keys = [("a", "llvm"), ("a", "llvm"), ("b", "llvm"), ("b", "llvm")]
    m.costs = [2.0, 4.0, 10.0, MAX_COST]
    np.testing.assert_allclose(m.labels(), [1.0, 0.5, 1.0, 0.0])


def test_pack_sum_groups_programs_with_different_row_counts():
    m = LGBModel(seed=0, num_warmup_sample=0)

    class ConstBooster:  # every row predicts 1.5: a program scores 1.5 x its rows
        def predict(self, rows, num_threads=None):
            return np.full(len(rows), 1.5)

    m.booster = ConstBooster()
    m.features = [np.zeros((1, N_FEATURES))]
    empty = np.zeros((0, N_FEATURES), np.float32)
    feats = [np.ones((3, N_FEATURES), np.float32), empty, np.ones((1, N_FEATURES), np.float32)]
    np.testing.assert_allclose(m.predict_features(feats), [4.5, -np.inf, 1.5])
    np.testing.assert_allclose(pack_sum(np.array([1.0, 2, 3]), np.array([0, 0, 2]), 3), [3, 0, 3])


def test_pack_sum_objective_fits_program_sums():
    # two kinds of programs: 1 row or 3 identical rows of the same feature value; the label is
    # the same, so a pack-sum model must predict about 1/3 per row for the 3-row programs
    rng = np.random.default_rng(1)
    m = LGBModel(seed=0, num_warmup_sample=0, num_threads=1, params={"min_data_in_leaf": 1})
    for p in range(120):
        n = 1 if p % 2 else 3
        x = np.zeros((n, N_FEATURES), np.float32)
        x[:, 1] = n
        x[:, 2] = rng.random()
        m.features.append(x)
        m.keys.append(("t", "llvm"))
        m.costs.append(1.0)
    m.train()
    one = m.booster.predict(np.array([m.features[1][0]])) + m.base_score
    three = m.booster.predict(np.array([m.features[0][0]])) + m.base_score
    assert one[0] == pytest.approx(1.0, abs=0.1)
    assert three[0] == pytest.approx(1 / 3, abs=0.1)


def test_warmup_predicts_random_then_model_and_invalid_is_minus_inf():
    dag = ComputeDAG(workloads.matmul(16, 16, 16))
    task = SearchTask(dag, target="llvm")
    rng = np.random.default_rng(2)
    states = [random_matmul_state(dag, rng) for _ in range(12)]
    m = LGBModel(seed=5, num_warmup_sample=8, num_threads=1)
    inputs = [MeasureInput(task, s) for s in states]
    results = [MeasureResult((1e-3 * (1 + k),)) for k in range(12)]
    m.update(inputs[:6], results[:6])
    assert not m.trained
    p = m.predict(task, states)
    assert ((p >= 0) & (p < 1)).all()
    failed = MeasureResult((MAX_COST,), MeasureErrorNo.RUNTIME_DEVICE)
    m.update(inputs[6:] + [inputs[0]], results[6:] + [failed])
    assert m.trained and len(m.costs) == 13 and m.labels()[-1] == 0.0
    assert np.isfinite(m.predict(task, states)).all()
    # on a GPU target the unbound loops fail verification: no features, score -inf
    gpu = SearchTask(dag, target="cuda")
    assert (m.predict(gpu, states[:3]) == -np.inf).all()


def test_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(4)
    m = _synthetic_model(60, rng)
    path = str(tmp_path / "model.pkl")
    m.save(path)
    m2 = LGBModel()
    m2.load(path)
    test = [rng.random((2, N_FEATURES)).astype(np.float32) for _ in range(10)]
    np.testing.assert_allclose(m2.predict_features(test), m.predict_features(test))
    assert m2.num_warmup_sample == -1 and len(m2.costs) == 60


def test_realistic_matmul_top_pick_is_in_best_quarter():
    """60 random tilings of a 64^3 matmul timed on the host; the model's best guess is good."""
    import autosched as ansor

    dag = ComputeDAG(workloads.matmul(64, 64, 64))
    task = SearchTask(dag, target="llvm")
    rng = np.random.default_rng(7)
    a, b = (rng.random((64, 64), dtype=np.float32) for _ in range(2))
    c = np.empty((64, 64), np.float32)
    states, costs = [], []
    for _ in range(90):
        s = random_matmul_state(dag, rng)
        mod = ansor.build(s, "llvm")
        t = mod.time_evaluator(number=10, repeat=3)(a, b, c)
        states.append(s)
        costs.append(float(np.min(t.results)))
    costs = np.array(costs)
    train, test = slice(0, 60), slice(60, 90)
    m = LGBModel(seed=1, num_warmup_sample=20, num_threads=1)
    m.update([MeasureInput(task, s) for s in states[train]],
             [MeasureResult((c,)) for c in costs[train]])  # fmt: skip
    scores = m.predict(task, states[test])
    pick = costs[test][int(np.argmax(scores))]
    assert pick <= np.quantile(costs[test], 0.25) * 1.05


def test_training_set_is_capped_newest_kept_and_still_ranks():
    """Past ``max_train_programs`` a training fits a fixed number of programs (so retraining
    does not grow with the log): the newest half, and older ones sampled by their label."""
    rng = np.random.default_rng(5)
    m = LGBModel(seed=3, num_warmup_sample=10, num_threads=1, max_train_programs=60)
    for n in (40, 150, 400):
        feats = [rng.random((int(rng.integers(1, 4)), N_FEATURES)).astype(np.float32)
                 for _ in range(n - len(m.features))]  # fmt: skip
        m.features += feats
        m.costs += [1.0 / (0.1 + x[:, 0].sum()) for x in feats]
        m.keys = [("w", "llvm")] * n
        m.train()
        assert m.last_train_programs == min(n, 60)
    rows, pack_ids, y_pack = m._dataset()
    assert len(y_pack) == 60 and len(rows) == len(pack_ids) <= 3 * 60
    newest = m._cap(list(range(400)), m.labels())
    assert newest[-30:] == list(range(370, 400)) and len(set(newest)) == 60
    assert newest == m._cap(list(range(400)), m.labels())  # seeded: the same sample again
    test = [rng.random((int(rng.integers(1, 4)), N_FEATURES)).astype(np.float32) for _ in range(80)]
    truth = np.array([0.1 + x[:, 0].sum() for x in test])
    assert pairwise_accuracy(m.predict_features(test), truth) > 0.7
    # None: every program, as TVM
    m.max_train_programs = None
    m.train()
    assert m.last_train_programs == 400
    with pytest.raises(ValueError, match="max_train_programs"):
        LGBModel(max_train_programs=1)
