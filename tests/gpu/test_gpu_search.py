"""The GPU search on a real GPU: sampled and mutated candidates of the seeded sweep compute the
interpreter's result on CUDA and on the GPU's OpenCL platform, and a short tune + build + run of
a small network on cuda equals the numpy reference."""

import sys
from pathlib import Path

import numpy as np
import pytest

import autosched as ansor
from tensorir.interp import eval_dag

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "autosched"))
from test_gpu_sweep import WORKLOADS, sweep_states  # noqa: E402
from test_network import small_net  # noqa: E402


def _check_states(name: str, target: str, dev) -> int:
    task, sampled, mutated = sweep_states(name)
    dag = task.compute_dag
    rng = np.random.default_rng(9)
    args = [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors]
    refs = eval_dag(dag, args)
    checked = 0
    for s in sampled + mutated:
        outs = [np.full(t.shape, np.nan, t.dtype) for t in dag.output_tensors]
        ansor.build(s, target, device=dev)(*args, *outs)
        for out, ref in zip(outs, refs, strict=True):
            np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4, err_msg=str(s))
        checked += 1
    return checked


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_sampled_candidates_are_right_on_cuda(cuda_backend, name):
    from runtime import device

    assert _check_states(name, "cuda", device("cuda")) == 20


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_sampled_candidates_are_right_on_opencl_gpu(opencl_gpu_backend, name):
    from runtime.device import Device

    dev = Device("opencl", 0)
    assert dev.backend.properties()["is_gpu"]
    assert _check_states(name, "opencl", dev) == 20


def test_short_network_tune_build_run_on_cuda(cuda_backend, tmp_path, capsys):
    from tensorir.graph import evaluate
    from tensorir.graph import ir as gir

    rng = np.random.default_rng(4)
    func, params = small_net(rng, n_blocks=1, hw=16, c=32)
    mod = gir.Module({"main": func})
    tasks, weights = ansor.extract_tasks(mod, params, "cuda")
    assert tasks
    log = tmp_path / "net.json"
    search = ansor.SearchParams(evolutionary_search_population=64,
                                evolutionary_search_num_iters=1)  # fmt: skip
    with ansor.LocalRPCMeasureContext(min_repeat_ms=20) as ctx:
        tuner = ansor.TaskScheduler(tasks, weights)
        tuner.tune(ansor.TuningOptions(num_measure_trials=4 * len(tasks),
                                       num_measures_per_round=4, runner=ctx.runner,
                                       builder=ctx.builder,
                                       measure_callbacks=[ansor.RecordToFile(str(log))]),
                   search_policy_params=search)  # fmt: skip
    records = list(ansor.load_records(str(log)))
    assert len(records) == 4 * len(tasks)
    with ansor.ApplyHistoryBest(str(log)) as ctx:
        lib = ansor.build(mod, "cuda", params=params)
    module = ansor.GraphModule(lib)
    data = rng.uniform(-1, 1, (1, 16, 16, 3)).astype("float32")
    module.set_input("data", data)
    module.run()
    out = module.get_output(0).numpy()
    np.testing.assert_allclose(out, evaluate(mod, {"data": data}, params), rtol=1e-4, atol=1e-5)
    print(ctx.summary(), f"{len(tasks)} tasks, {len(records)} records")
