"""Tuning and building with a target this machine cannot serve: fail at once, with the reason
(issue 14)."""

import pytest

import autosched as ansor
from autosched import workloads as W
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


# ---------------------------------------------------------------- issue 27: accepted silently


def test_a_state_of_another_dag_is_refused_for_a_task():
    task = ansor.SearchTask(ansor.ComputeDAG(W.matmul(8, 8, 8)), target="llvm")
    for other in (W.matmul(16, 16, 16), W.matmul_relu(8, 8, 8)):
        state = ansor.ComputeDAG(other).get_init_state()
        with pytest.raises(ValueError, match=r"MeasureInput: the state was built from another"):
            ansor.MeasureInput(task, state)
    same = ansor.ComputeDAG(W.matmul(8, 8, 8)).get_init_state()  # an equal DAG is the same task
    assert ansor.MeasureInput(task, same).state is same
    ansor.MeasureInput(task, task.compute_dag.get_init_state())


@pytest.mark.parametrize("spec", ["llvm -", "llvm -=x", "llvm --=3", "cuda -arch=", "llvm -mcpu="])
def test_a_target_option_with_an_empty_key_or_value_is_refused(spec):
    with pytest.raises(ValueError, match=rf"target {spec!r}: option .* has an empty (key|value)"):
        ansor.Target(spec)
    assert str(ansor.Target("llvm -fast")) == "llvm -fast=1"  # a bare flag is still "1"


def test_num_cores_minus_one_for_a_cross_target_warns_that_it_is_this_hosts():
    target = "llvm -mtriple=aarch64-linux-gnu"
    with pytest.warns(UserWarning, match=r"cannot read .*num_cores.* from the device of 'llvm -m"):
        hw = ansor.HardwareParams.for_target(target, ansor.HardwareParams(num_cores=-1))
    assert hw.num_cores >= 1
    given = ansor.HardwareParams(num_cores=4, vector_unit_bytes=16)
    hw = ansor.HardwareParams.for_target(target, given)  # the device's values given: no warning
    assert (hw.num_cores, hw.vector_unit_bytes) == (4, 16)


@pytest.mark.parametrize("callbacks", ["log.json", ansor.RecordToFile("x.json")])
def test_measure_callbacks_must_be_a_list(callbacks):
    with pytest.raises(TypeError, match=r"TuningOptions: measure_callbacks must be a list"):
        ansor.TuningOptions(measure_callbacks=callbacks)
    ansor.TuningOptions(measure_callbacks=(ansor.RecordToFile("x.json"),))


def test_a_search_policy_of_another_task_is_refused():
    task = ansor.SearchTask(ansor.ComputeDAG(W.matmul(8, 8, 8)), target="llvm")
    other = ansor.SearchTask(ansor.ComputeDAG(W.matmul(16, 16, 16)), target="llvm")
    policy = ansor.SketchPolicy(other, ansor.RandomModel(), verbose=0)
    options = ansor.TuningOptions(num_measure_trials=0, verbose=0)
    with pytest.raises(ValueError, match=r"the search policy was made for another task"):
        task.tune(options, search_policy=policy)
    assert task.tune(options, ansor.SketchPolicy(task, ansor.RandomModel(), verbose=0))
