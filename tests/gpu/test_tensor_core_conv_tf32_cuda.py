"""float32 conv2d on TF32 tensor cores on a real GPU (sm_80+): implicit-GEMM convs built for
``cuda -allow_tf32=1`` are checked, on random inputs, within a TF32 tolerance of the exact
(float64) convolution and much closer to the convolution of the operands rounded to TF32 the way
``__float_to_tf32`` rounds them than to the exact one (neither wrong nor secretly float32); an
untuned float32 network under the option runs its convs on TF32 fragments and matches its
float32 reference within the TF32 tolerance."""

import warnings

import numpy as np
import pytest

import autosched as ansor
from tensorir.dtype import round_to_tf32
from tests.autosched.tensor_core_helpers import conv_dag, conv_ref, small_resnet_block
from tests.gpu import test_tensor_core_tf32_cuda as tf32_gpu

TF32 = "cuda -allow_tf32=1"
pytestmark = tf32_gpu.pytestmark
sm80 = tf32_gpu.sm80  # the fixture: a CUDA device of compute capability 8.0+, else skipped


# (layout, n, ci, h, co, k, stride, pad): P = 49 in 64 GEMM rows; strided, batch 2; 1x1;
# batch 2 of 14x14 stride 2: P = 98 in 112 = 7 x 16 rows, tiles whose rows span both images
# (0 of 300 draws were valid on session 7's H100 run, until the simplifier folded the
# flattened (n, oh, ow) index back: tests/autosched/test_tensor_core_rows.py).
CASES = [
    ("NHWC", 1, 64, 7, 64, 3, 1, 1),
    ("NHWC", 2, 32, 16, 64, 3, 2, 1),
    ("NCHW", 1, 64, 8, 32, 1, 1, 0),
    ("NHWC", 2, 32, 14, 64, 3, 2, 1),
    ("NHWC:OHWI", 1, 64, 7, 64, 3, 1, 1),  # the K-major weight networks store
]


@pytest.mark.parametrize("case", CASES)
def test_tf32_conv_matches_the_tf32_rounded_convolution(sm80, case):
    layout, n, ci, h, co, k, s, p = case
    dag = conv_dag(layout, n, ci, h, co, k, s, p, 1, epilogue=True, dtype="float32")
    task = ansor.SearchTask(dag, target=TF32)
    rng = np.random.default_rng(11)
    x, w, b = (rng.uniform(-1, 1, t.shape).astype("float32") for t in dag.input_tensors)
    cb = b[None, :, None, None] if layout == "NCHW" else b

    def relu_bias(conv):
        return np.maximum(conv + cb, 0)

    exact = relu_bias(conv_ref(x, w, s, p, 1, layout))
    rounded = relu_bias(conv_ref(round_to_tf32(x), round_to_tf32(w), s, p, 1, layout))
    scale = float(np.abs(exact).max())
    for st in tf32_gpu._states(task, 2):
        func = ansor.build(st, TF32, device=sm80)
        src = func.get_source()
        assert "precision::tf32" in src and "__float_to_tf32" in src
        out = np.full(dag.output_tensors[0].shape, np.nan, np.float32)
        func(x, w, b, out)
        err_exact = float(np.abs(out - exact).max())
        err_tf32 = float(np.abs(out - rounded).max())
        assert err_exact <= 1e-2 * scale, (err_exact, scale, str(st))  # a TF32 tolerance
        assert err_tf32 <= 5e-5 * scale, (err_tf32, scale, str(st))  # float32 sums only
        assert err_exact > 4 * err_tf32, (err_exact, err_tf32)  # the operands were rounded


def test_untuned_float32_network_runs_its_convs_on_tf32(sm80):
    """No records: the implicit-GEMM conv groups get the fixed tensor-core tile; a plain cuda
    build of the same network has no wmma and is exact float32."""
    from autosched.network.build import build_network
    from tensorir.graph import evaluate

    rng = np.random.default_rng(1)
    mod, params = small_resnet_block(rng)
    x = rng.uniform(-1, 1, (1, 8, 8, 16)).astype("float32")
    want = evaluate(mod, {"data": x}, params)
    want = np.asarray(want[0] if isinstance(want, list) else want, np.float64)
    got = {}
    for target in (TF32, "cuda"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the default schedules
            lib = build_network(mod, target, params, device=sm80)
        src = lib.get_source()
        assert (src.count("precision::tf32") >= 2) == (target == TF32), target
        module = ansor.GraphModule(lib, sm80)
        module.set_input("data", x)
        module.run()
        got[target] = module.get_output(0).numpy().astype(np.float64)
    scale = float(np.abs(want).max())
    assert scale > 0.1
    assert float(np.abs(got[TF32] - want).max()) <= 1e-2 * scale
    assert float(np.abs(got["cuda"] - want).max()) <= 1e-4 * scale  # float32 (winograd 3x3)
