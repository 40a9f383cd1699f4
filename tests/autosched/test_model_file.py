"""Saved cost models: a file of plain arrays and LightGBM text; pickles are refused, never run."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import autosched as ansor
from autosched import workloads
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
    task = ansor.SearchTask(ComputeDAG(workloads.matmul(8, 8, 8)), target="llvm")
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


# ---------------------------------------------------------------- crafted booster text
# Each edit made LightGBM abort the process (SIGABRT in its parser), read out of bounds in
# predict (SIGSEGV or a garbage score) or loop forever on a child cycle; each must be a
# ValueError naming the file, before LightGBM sees the text.


def _edit_tree0(key, new):
    """An edit of tree 0's ``key=`` line; ``new`` maps the old value list to the new one."""

    def edit(text):
        head, rest = text.split("\nTree=0\n", 1)
        block, after = rest.split("\n\n\n", 1)
        lines = [
            f"{key}={' '.join(new(line.split('=', 1)[1].split(' ')))}"
            if line.startswith(key + "=")
            else line
            for line in block.split("\n")
        ]
        return _with_tree_sizes(head + "\nTree=0\n" + "\n".join(lines) + "\n\n\n" + after)

    return edit


def _with_tree_sizes(text):
    """Recompute the header's tree_sizes, so that LightGBM reads the edited tree itself."""
    head, rest = text.split("\nTree=0\n", 1)
    body, tail = ("Tree=0\n" + rest).split("end of trees", 1)
    starts = [i for i in range(len(body)) if body.startswith("Tree=", i)]
    sizes = [len(body[a:b].encode()) for a, b in zip(starts, starts[1:] + [len(body)])]
    head = "\n".join(
        "tree_sizes=" + " ".join(map(str, sizes)) if line.startswith("tree_sizes=") else line
        for line in head.split("\n")
    )
    return head + "\n" + body + "end of trees" + tail


BOOSTER_EDITS = {
    "feature index 10^6": (_edit_tree0("split_feature", lambda v: ["1000000"] + v[1:]), "1000000"),
    "child 9999": (_edit_tree0("left_child", lambda v: ["9999"] + v[1:]), "child 9999"),
    "child -9999": (_edit_tree0("left_child", lambda v: ["-9999"] + v[1:]), "leaf -9999"),
    "num_leaves 1e9": (_edit_tree0("num_leaves", lambda v: ["1000000000"]), "num_leaves"),
    "num_leaves beyond arrays": (_edit_tree0("num_leaves", lambda v: ["40"]), "leaf_value"),
    "truncated text": (lambda t: t[: len(t) // 3], "truncated"),
    "truncated inside a tree": (lambda t: t[: t.index("Tree=1") - 300], "truncated"),
    "decision_type 255": (_edit_tree0("decision_type", lambda v: ["255"] + v[1:]), "255"),
    "num_cat without arrays": (_edit_tree0("num_cat", lambda v: ["1"]), "num_cat"),
    "categorical split without arrays": (
        lambda t: _edit_tree0("decision_type", lambda v: ["1"] + v[1:])(
            _edit_tree0("num_cat", lambda v: ["1"])(t)
        ),
        "cat_boundaries",
    ),
    "child cycle": (_edit_tree0("left_child", lambda v: [v[0], "0"] + v[2:]), "cycle"),
    "short threshold array": (_edit_tree0("threshold", lambda v: v[:3]), "threshold"),
    "tree_sizes off": (lambda t: t.replace("tree_sizes=", "tree_sizes=9999"), "tree_sizes"),
    "num_tree_per_iteration 0": (
        lambda t: t.replace("num_tree_per_iteration=1", "num_tree_per_iteration=0"),
        "num_tree_per_iteration",
    ),
    "lenient number spelling": (_edit_tree0("left_child", lambda v: [v[0] + "x"] + v[1:]), "left"),
}


@pytest.fixture(scope="module")
def saved_members(tmp_path_factory):
    path = tmp_path_factory.mktemp("booster") / "m.npz"
    _trained_model(np.random.default_rng(5), 30).save(str(path))
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _write_edited(members, edit, path):
    members = dict(members, booster=np.array(edit(str(members["booster"]))))
    with open(path, "wb") as fh:
        np.savez(fh, **members)


@pytest.mark.parametrize("name", list(BOOSTER_EDITS))
def test_crafted_booster_text_is_a_value_error_not_a_crash(name, saved_members, tmp_path):
    edit, says = BOOSTER_EDITS[name]
    path = tmp_path / "crafted.npz"
    _write_edited(saved_members, edit, path)
    with pytest.raises(ValueError, match=r"crafted\.npz: invalid cost model file: malformed") as e:
        LGBModel().load(str(path))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_unedited_tree_sizes_recompute_is_the_identity(saved_members, tmp_path):
    # The edits above rely on _with_tree_sizes; it must reproduce what LightGBM wrote.
    text = str(saved_members["booster"])
    assert _with_tree_sizes(text) == text


def test_crafted_boosters_in_a_child_process_exit_cleanly(saved_members, tmp_path):
    # The same files in a fresh process: a regression would abort or hang that process only.
    paths = []
    for i, (edit, _) in enumerate(BOOSTER_EDITS.values()):
        paths.append(str(tmp_path / f"c{i}.npz"))
        _write_edited(saved_members, edit, paths[-1])
    code = (
        "import sys\nfrom autosched.cost_model.model import LGBModel\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n        LGBModel().load(p)\n    except ValueError:\n        print('refused')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run(
        [sys.executable, "-c", code, *paths], capture_output=True, timeout=300, env=env
    )
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-500:]
    assert r.stdout.decode().split() == ["refused"] * len(paths)


def test_a_model_of_one_leaf_trees_round_trips(tmp_path):
    # Equal costs: no split has a gain, so every tree is one leaf with empty split arrays.
    rng = np.random.default_rng(8)
    m = LGBModel(seed=3, num_warmup_sample=2, num_threads=1)
    m.features = [rng.random((2, N_FEATURES)).astype(np.float32) for _ in range(8)]
    m.keys, m.costs = [("w", "llvm")] * 8, [1.0] * 8
    m.train()
    assert "num_leaves=1\n" in m.booster.model_to_string()
    m.save(str(tmp_path / "one.npz"))
    m2 = LGBModel()
    m2.load(str(tmp_path / "one.npz"))
    test = [rng.random((3, N_FEATURES)).astype(np.float32)]
    np.testing.assert_array_equal(m2.predict_features(test), m.predict_features(test))
