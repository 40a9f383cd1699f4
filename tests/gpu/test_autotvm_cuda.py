"""The AutoTVM GPU templates on CUDA (fp32, and int8 with int32 accumulation, bit-exact), and a
short real tuning run with XGBTuner."""

import numpy as np
import pytest

import autosched as ansor
from autosched import autotvm
from tensorir.interp import eval_dag
from tensorir.passes.verify_gpu import GPUVerifyError

WORKLOADS = {
    "conv2d_nchw.cuda": lambda dt, odt: (("TENSOR", (1, 64, 28, 28), dt),
                                         ("TENSOR", (64, 64, 3, 3), dt),
                                         (1, 1), (1, 1, 1, 1), (1, 1), odt),
    "conv2d_nhwc.cuda": lambda dt, odt: (("TENSOR", (1, 28, 28, 64), dt),
                                         ("TENSOR", (3, 3, 64, 64), dt),
                                         (2, 2), (1, 1, 1, 1), (1, 1), odt),
    "depthwise_conv2d_nchw.cuda": lambda dt, odt: (("TENSOR", (1, 32, 28, 28), dt),
                                                   ("TENSOR", (32, 1, 3, 3), dt),
                                                   (1, 1), (1, 1, 1, 1), (1, 1), odt),
    "dense.cuda": lambda dt, odt: (("TENSOR", (16, 256), dt), ("TENSOR", (128, 256), dt), odt),
}  # fmt: skip


def _inputs(tensors, rng):
    return [
        rng.integers(-128, 128, t.shape).astype("int8")
        if t.dtype == "int8"
        else rng.uniform(-1, 1, t.shape).astype(t.dtype)
        for t in tensors
    ]


@pytest.mark.parametrize("dtype,out_dtype", [("float32", "float32"), ("int8", "int32")])
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_gpu_templates_on_cuda(cuda_backend, name, dtype, out_dtype):
    task = autotvm.task.create(name, WORKLOADS[name](dtype, out_dtype), "cuda")
    rng = np.random.default_rng(len(name))
    checked = 0
    for index in rng.permutation(len(task.config_space))[:60]:
        state, tensors = task.instantiate(task.config_space.get(int(index)))
        try:
            func = ansor.build(state, "cuda")
        except GPUVerifyError:
            continue
        args = _inputs(tensors[:-1], rng)
        out = np.zeros(tensors[-1].shape, tensors[-1].dtype)
        func(*args, out)
        ref = eval_dag(state.dag, args)[0]
        if out.dtype.kind == "i":
            np.testing.assert_array_equal(out, ref)
        else:
            np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
        checked += 1
        if checked == 3:
            return
    pytest.fail(f"{name}: only {checked} of 60 configurations built for CUDA")


def test_xgb_tuner_on_cuda(cuda_backend, tmp_path, capsys):
    args = WORKLOADS["conv2d_nchw.cuda"]("float32", "float32")
    task = autotvm.task.create("conv2d_nchw.cuda", args, "cuda")
    log = tmp_path / "cuda.log"
    option = autotvm.measure_option(autotvm.LocalBuilder(), autotvm.LocalRunner(number=5))
    tuner = autotvm.tuner.XGBTuner(task, plan_size=16, seed=0)
    tuner.tune(32, measure_option=option, callbacks=[
        autotvm.callback.progress_bar(32, prefix="[Task  1/ 1] "),
        autotvm.callback.log_to_file(log),
    ])  # fmt: skip
    print(capsys.readouterr().out.replace("\r", "\n").strip().splitlines()[-1])
    assert tuner.best_flops > 0
    with autotvm.apply_history_best(log), ansor.Target("cuda"):
        from autosched.autotvm.templates.conv2d import conv2d_nchw_gpu

        s, tensors = conv2d_nchw_gpu(*args)
    rng = np.random.default_rng(0)
    data, kernel = _inputs(tensors[:2], rng)
    out = np.zeros(tensors[2].shape, "float32")
    ansor.build(s, "cuda")(data, kernel, out)
    np.testing.assert_allclose(out, eval_dag(s.dag, [data, kernel])[0], rtol=1e-4, atol=1e-4)
