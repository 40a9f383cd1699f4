"""AutoTVM with real measurement (a tiny conv2d, a few trials) and task extraction."""

import re

import numpy as np
import pytest

import autosched as ansor
from autosched import autotvm, networks
from autosched.autotvm.templates.conv2d import conv2d_nchw_cpu
from tensorir.interp import eval_dag

ARGS = (
    ("TENSOR", (1, 8, 10, 10), "float32"),
    ("TENSOR", (16, 8, 3, 3), "float32"),
    (1, 1),
    (1, 1, 1, 1),
    (1, 1),
    "float32",
)


def test_tune_measures_logs_and_applies_the_best(tmp_path, capsys):
    task = autotvm.task.create("conv2d_nchw.x86", ARGS, target="llvm")
    log = tmp_path / "conv.log"
    option = autotvm.measure_option(
        builder=autotvm.LocalBuilder(n_parallel=1),
        runner=autotvm.LocalRunner(number=1, repeat=1, timeout=20),
    )
    tuner = autotvm.tuner.RandomTuner(task, seed=0)
    tuner.tune(
        3,
        measure_option=option,
        callbacks=[
            autotvm.callback.progress_bar(3, prefix="[Task  1/ 1] "),
            autotvm.callback.log_to_file(log),
        ],
    )
    option["builder"].close()
    option["runner"].close()
    out = capsys.readouterr().out
    last = out.replace("\r", "\n").strip().splitlines()[-1]
    assert re.fullmatch(
        r"\[Task  1/ 1\]  Current/Best: +\d+\.\d\d/ +\d+\.\d\d GFLOPS \| Progress: \(3/3\) \| "
        r"\d+\.\d\d s Done\.",
        last,
    ), last
    results = [res for _, res in autotvm.record.load_from_file(log)]
    assert len(results) == 3 and all(r.error_no == 0 for r in results)
    assert tuner.best_flops == pytest.approx(task.flop / min(r.mean_cost for r in results))

    with autotvm.apply_history_best(log), ansor.Target("llvm"):
        s, (data, kernel, out_t) = conv2d_nchw_cpu(*ARGS)
    assert s.to_json() == task.instantiate(tuner.best_config)[0].to_json()
    rng = np.random.default_rng(7)
    d = rng.uniform(-1, 1, data.shape).astype("float32")
    k = rng.uniform(-1, 1, kernel.shape).astype("float32")
    o = np.full(out_t.shape, np.nan, "float32")
    ansor.build(s, "llvm")(d, k, o)
    np.testing.assert_allclose(o, eval_dag(s.dag, [d, k])[0], rtol=1e-4, atol=1e-4)


def test_a_config_the_template_rejects_is_an_instantiation_error():
    @autotvm.template("test/rejects_odd")
    def rejects(n):
        A = ansor.te.placeholder((n,), name="A")
        B = ansor.te.compute((n,), lambda i: A[i] * 2.0, "B")
        s = ansor.ComputeDAG([A, B]).get_init_state()
        cfg = autotvm.get_config()
        cfg.define_knob("odd", [0, 1])
        if cfg["odd"].val:
            cfg.raise_error("odd configs are invalid")
        return s, [A, B]

    task = autotvm.task.create("test/rejects_odd", (8,), "llvm")
    inputs, results = autotvm.measure.measure_batch(
        task, [task.config_space.get(1)], builder=None, runner=None
    )
    assert results[0].error_no == autotvm.measure.MeasureErrorNo.INSTANTIATION_ERROR
    assert "test/rejects_odd" in results[0].error_msg and "odd configs" in results[0].error_msg


def test_rpc_runner_is_the_remote_runner_with_autotvm_defaults():
    from autosched.rpc import RPCRunner as RemoteRunner

    runner = autotvm.RPCRunner("pynq", host="127.0.0.1", port=9190, timeout=60)
    assert isinstance(runner, RemoteRunner)
    assert (runner.key, runner.port, runner.number, runner.repeat, runner.timeout) == (
        "pynq", 9190, 4, 3, 60.0,
    )  # fmt: skip
    with pytest.raises(ValueError, match="module_loader"):
        autotvm.RPCRunner("pynq", module_loader=object())


# The seed's 10 packed conv2d workloads of resnet-18 (gluon resnet18_v1), printed as
# (batch, H, W, CI, CO, KH, KW, pad_h, pad_w, stride_h, stride_w).
SEED_CONV2D = {
    (1, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1),
    (1, 56, 56, 64, 128, 1, 1, 0, 0, 2, 2),
    (1, 56, 56, 64, 128, 3, 3, 1, 1, 2, 2),
    (1, 28, 28, 128, 128, 3, 3, 1, 1, 1, 1),
    (1, 28, 28, 128, 256, 1, 1, 0, 0, 2, 2),
    (1, 28, 28, 128, 256, 3, 3, 1, 1, 2, 2),
    (1, 14, 14, 256, 256, 3, 3, 1, 1, 1, 1),
    (1, 14, 14, 256, 512, 1, 1, 0, 0, 2, 2),
    (1, 14, 14, 256, 512, 3, 3, 1, 1, 2, 2),
    (1, 7, 7, 512, 512, 3, 3, 1, 1, 1, 1),
}


def _seed_tuple(tsk):
    inp, wgt = tsk.args[0][1], tsk.args[1][1]
    stride, pad = tsk.args[2], tsk.args[3]
    return (inp[0], inp[2], inp[3], inp[1], wgt[0], wgt[2], wgt[3], pad[0], pad[1],
            stride[0], stride[1])  # fmt: skip


def test_extract_from_program_resnet18_conv2d_tasks():
    mod, params, _, _ = networks.get_network("resnet-18", layout="NCHW")
    tasks = autotvm.task.extract_from_program(
        mod, params, ops=("nn.conv2d",), target="llvm", target_host="llvm"
    )
    found = [_seed_tuple(t) for t in tasks]
    assert len(found) == len(set(found)) == 12
    # The seed's 10 packed tasks, plus the two this zoo's resnet-18 (relay.testing's, as in
    # TVM's tune_relay tutorials) adds: the 7x7 stem, which the seed keeps in float
    # (skip_conv_layers=[0]), and stage 1's 1x1 projection shortcut, which gluon's
    # resnet18_v1 does not have.
    assert set(found) >= SEED_CONV2D
    assert set(found) - SEED_CONV2D == {
        (1, 224, 224, 3, 64, 7, 7, 3, 3, 2, 2),
        (1, 56, 56, 64, 64, 1, 1, 0, 0, 1, 1),
    }
    assert {t.name for t in tasks} == {"conv2d_nchw.x86"}
    assert all(str(t.target) == "llvm" and len(t.config_space) > 1 for t in tasks)

    with_dense = autotvm.task.extract_from_program(mod, params, ("nn.conv2d", "nn.dense"), "cuda")
    assert [t.name for t in with_dense].count("dense.cuda") == 1 and len(with_dense) == 13


def test_extract_from_program_rejects_unknown_ops():
    mod, params, _, _ = networks.get_network("resnet-18", layout="NCHW")
    with pytest.raises(ValueError, match="nn.max_pool2d"):
        autotvm.task.extract_from_program(mod, params, ops=("nn.max_pool2d",), target="llvm")
