"""LGBModel learns from records read back from a log (transfer learning)."""

import warnings

import numpy as np
import pytest

import autosched as ansor
from autosched import workloads
from autosched.measure.data import MeasureInput, MeasureResult
from autosched.measure.records import load_records, save_records


def _states(dag):
    """Matmul states that differ in the inner tile of i (a cost we can rank them by)."""
    out = []
    for inner in (1, 2, 4, 8, 16, 32):
        s = dag.get_init_state()
        i, j, k = s["C"].iters
        io, ii = s.split("C", i, [inner])
        s.reorder("C", [io, j, k, ii])
        out.append((inner, s))
    return out


@pytest.fixture
def log(tmp_path):
    dag = ansor.ComputeDAG(workloads.matmul(64, 48, 32))
    task = ansor.SearchTask(compute_dag=dag, target="llvm")
    path = tmp_path / "mm.json"
    pairs = _states(dag)
    inputs = [MeasureInput(task, s) for _, s in pairs]
    # inner 8 is the fastest, the cost grows with the distance from it
    results = [
        MeasureResult((1e-4 * (1 + abs(np.log2(n) - 3)),), 0, "", 0.1, 1.0) for n, _ in pairs
    ]
    save_records(path, inputs, results)
    return path, task, [s for _, s in pairs]


def test_lgb_model_updates_from_loaded_records(log):
    path, task, states = log
    model = ansor.LGBModel(num_warmup_sample=0)
    inputs, results = zip(*load_records(path))
    model.update(list(inputs), list(results))  # AttributeError on RecordState before the fix
    assert len(model.features) == 6 and model.trained
    scores = model.predict(task, states)
    assert np.isfinite(scores).all()
    assert np.argmax(scores) == 3  # inner tile 8, the fastest record, ranks first
    assert scores[3] > scores[0] and scores[3] > scores[5]


def test_update_from_file_reads_a_log(log):
    path, task, states = log
    model = ansor.LGBModel(num_warmup_sample=0)
    model.update_from_file(path, n_lines=4)
    assert len(model.features) == 4


def test_records_of_unknown_dags_are_skipped_with_one_warning(log, tmp_path):
    path, task, _ = log
    other = tmp_path / "other.json"
    text = path.read_text().replace(task.workload_key.replace('"', '\\"'), "v2:unknown")
    other.write_text(text)
    model = ansor.LGBModel(num_warmup_sample=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.update(*zip(*load_records(other)))
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 1 and "DAG is unknown here" in msgs[0] and "dags=" in msgs[0]
    assert model.features == []
