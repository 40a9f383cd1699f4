"""A network built under autotvm.apply_history_best uses the AutoTVM records of its conv2d /
dense groups (the element-wise ops after them fused into the tiled output)."""

import warnings

import numpy as np
import pytest
from test_network import _run, assert_rebuilds_from_recorded_states, small_net

import autosched as ansor
from autosched import autotvm
from autosched.measure.data import BuildResult, MeasureResult
from tensorir.graph.reference import evaluate


class _Builder:
    n_parallel = 4

    def build(self, inputs):
        return [BuildResult({}) for _ in inputs]


class _Runner:
    """A model device: the config with the largest index of each task is the fastest."""

    def __init__(self):
        self.calls = 0

    def run(self, inputs, build_results):
        self.calls += 1
        return [MeasureResult((1e-3 / (1 + k + self.calls),), 0, "", 0.0, 1.0)
                for k in range(len(inputs))]  # fmt: skip


def test_network_build_uses_autotvm_records(tmp_path):
    rng = np.random.default_rng(7)
    func, params = small_net(rng)
    data = rng.uniform(-1, 1, (1, 8, 8, 3)).astype("float32")
    tasks = autotvm.task.extract_from_program(func, params, ("nn.conv2d", "nn.dense"), "llvm")
    assert sorted(t.name for t in tasks) == ["conv2d_nhwc.x86", "conv2d_nhwc.x86", "dense.x86"]
    log = tmp_path / "net.log"
    option = {"builder": _Builder(), "runner": _Runner()}
    best = {}
    for task in tasks:
        tuner = autotvm.tuner.RandomTuner(task, seed=1)
        tuner.tune(6, measure_option=option, callbacks=[autotvm.callback.log_to_file(log)])
        best[task.workload] = tuner.best_config

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plain = ansor.build(func, "llvm", params=params)
        with autotvm.apply_history_best(log) as ctx:
            lib = ansor.build(func, "llvm", params=params)
    assert ctx.hits >= 3
    assert not any(plain.tuned.values())
    tuned = [name for name, used in lib.tuned.items() if used]
    assert any("conv2d" in n for n in tuned) and any("dense" in n for n in tuned)
    # every conv2d / dense group found its record: only the pool and the softmax (reductions
    # no template covers) are reported as missing
    missing = [str(w.message) for w in caught if "no tuning record" in str(w.message)]
    assert "conv2d" in missing[0] and "dense" in missing[0]
    assert missing[1].startswith("2 of 6 kernels") and "conv2d" not in missing[1]
    assert "dense" not in missing[1]
    _, out = _run(lib, data)
    np.testing.assert_allclose(out, evaluate(func, {"data": data}, params), rtol=1e-4, atol=1e-5)
    assert_rebuilds_from_recorded_states(lib)


def test_network_build_on_opencl_uses_the_gpu_templates(tmp_path):
    pytest.importorskip("pyopencl")
    try:
        if not ansor.device("opencl", 0).exists:
            pytest.skip("no OpenCL device")
    except Exception as err:  # noqa: BLE001 - a missing ICD loader or platform
        pytest.skip(f"no OpenCL device: {err}")
    from autosched.network.build import build_network

    rng = np.random.default_rng(7)
    func, params = small_net(rng)
    data = rng.uniform(-1, 1, (1, 8, 8, 3)).astype("float32")
    tasks = autotvm.task.extract_from_program(func, params, ("nn.conv2d", "nn.dense"), "opencl")
    assert sorted(t.name for t in tasks) == ["conv2d_nhwc.cuda"] * 2 + ["dense.cuda"]
    log = tmp_path / "net.log"
    for task in tasks:
        autotvm.tuner.RandomTuner(task, seed=1).tune(
            6,
            measure_option={"builder": _Builder(), "runner": _Runner()},
            callbacks=[autotvm.callback.log_to_file(log)],
        )
    # winograd off: the GPU build would otherwise turn the 3x3 convs into winograd groups,
    # which no AutoTVM template covers
    with autotvm.apply_history_best(log), pytest.warns(UserWarning, match="2 of 6 kernels"):
        lib = build_network(func, "opencl", params=params, use_winograd=False)
    assert sum(lib.tuned.values()) == 3
    _, out = _run(lib, data)
    np.testing.assert_allclose(out, evaluate(func, {"data": data}, params), rtol=1e-4, atol=1e-5)
    assert_rebuilds_from_recorded_states(lib)
