"""Tuning and building with a target this machine cannot serve: fail at once, with the reason
(issue 14)."""

import pytest

import autosched as ansor
from autosched import testing as W
from autosched.tuning import require_measuring_devices


def _no_cuda(monkeypatch):
    def query_properties(index=0):
        raise RuntimeError("CUDA driver unavailable: cuInit failed (test)")

    monkeypatch.setattr("runtime.cuda.query_properties", query_properties)


def test_tuning_cuda_without_a_gpu_stops_at_once_with_the_reason(monkeypatch, tmp_path):
    _no_cuda(monkeypatch)
    task = ansor.SearchTask(ansor.ComputeDAG(W.matmul_relu(16, 16, 16)), target="cuda")
    log = tmp_path / "log.json"
    options = ansor.TuningOptions(
        num_measure_trials=4, verbose=0, measure_callbacks=[ansor.RecordToFile(str(log))]
    )
    match = r"cannot tune for target 'cuda': no usable cuda device 0 .*cuInit failed \(test\)"
    with pytest.raises(RuntimeError, match=match):
        task.tune(options)
    with pytest.raises(RuntimeError, match=match):
        ansor.TaskScheduler([task], callbacks=[]).tune(options)
    assert not log.exists() or not log.read_text().strip()  # no failed trials recorded


def test_the_device_check_is_only_for_local_measuring(monkeypatch):
    _no_cuda(monkeypatch)
    task = ansor.SearchTask(ansor.ComputeDAG(W.matmul_relu(16, 16, 16)), target="cuda")
    elsewhere = object()  # a custom runner, e.g. measuring on other machines
    require_measuring_devices([task], ansor.TuningOptions(num_measure_trials=4, runner=elsewhere))
    require_measuring_devices([task], ansor.TuningOptions(num_measure_trials=0))
    cpu = ansor.SearchTask(ansor.ComputeDAG(W.matmul_relu(16, 16, 16)), target="llvm")
    require_measuring_devices([cpu], ansor.TuningOptions(num_measure_trials=4))


def test_an_mcpu_that_is_not_the_host_is_refused_where_code_is_made():
    import llvmlite.binding as llvm

    dag = ansor.ComputeDAG(W.matmul_relu(8, 8, 8))
    match = r"target 'llvm -mcpu=nonexistent': -mcpu=nonexistent is not this host's CPU"
    with pytest.raises(ValueError, match=match):
        ansor.SearchTask(dag, target="llvm -mcpu=nonexistent")
    with pytest.raises(ValueError, match=match):
        ansor.build(dag, target="llvm -mcpu=nonexistent")
    assert ansor.Target("llvm -mcpu=nonexistent").get("mcpu") == "nonexistent"  # records parse
    for ok in ("native", llvm.get_host_cpu_name()):
        ansor.SearchTask(dag, target=f"llvm -mcpu={ok}")
