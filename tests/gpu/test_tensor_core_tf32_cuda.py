"""TF32 tensor cores on a real GPU (sm_80+): float32 GEMMs built for ``cuda -allow_tf32=1`` run on
TF32 fragments. Each result is checked twice on random inputs: within a TF32 tolerance of the
exact (float64) product, and much closer to the product of the operands rounded to TF32 the way
``__float_to_tf32`` rounds them (``cvt.rna``) than to the exact one: so the kernel is neither
wrong nor secretly float32. Without the option, the same schedule computes exact float32."""

import numpy as np
import pytest

import autosched as ansor
from tensorir.dag import ComputeDAG
from tensorir.dtype import round_to_tf32
from tensorir.passes.tensor_core import TF32_TENSOR_CORES
from tests.autosched.tensor_core_helpers import (
    bmm_tensors,
    dense_tensors,
    two_layer_mlp,
    valid_states,
)

TF32 = "cuda -allow_tf32=1"
pytestmark = pytest.mark.skipif(
    not TF32_TENSOR_CORES, reason="TF32 tensor cores are switched off (TF32_TENSOR_CORES)"
)


@pytest.fixture(scope="module")
def sm80(cuda_backend):
    from runtime import device

    dev = device("cuda")
    version = str(dev.compute_version)  # "9.0"
    if int(version.split(".")[0]) < 8:
        pytest.skip(f"TF32 tensor cores need sm_80+; this GPU's compute capability is {version}")
    return dev


def _dense(m, n, k):
    return dense_tensors(m, n, k, "float32", out_dtype="")


def _bmm(bs, m, n, k):
    return bmm_tensors(bs, m, n, k, "float32", out_dtype="")


CASES = {"dense_256x512x1024": lambda: _dense(256, 512, 1024),
         "batch_matmul_4x128x96x256": lambda: _bmm(4, 128, 96, 256)}  # fmt: skip


def _product(x, y):
    return np.asarray(x, np.float64) @ np.swapaxes(np.asarray(y, np.float64), -1, -2)


def _states(task, n, seed=7):
    return valid_states(task, n, seed, tries=300)


@pytest.mark.parametrize("name", list(CASES))
def test_tf32_gemm_matches_the_tf32_rounded_product(sm80, name):
    task = ansor.SearchTask(ComputeDAG(CASES[name]()), target=TF32)
    dag = task.compute_dag
    rng = np.random.default_rng(5)
    x, y = (rng.standard_normal(t.shape).astype("float32") for t in dag.input_tensors)
    exact, rounded = _product(x, y), _product(round_to_tf32(x), round_to_tf32(y))
    scale = float(np.abs(exact).max())
    for s in _states(task, 3):
        func = ansor.build(s, TF32, device=sm80)
        src = func.get_source()
        assert "precision::tf32" in src and "__float_to_tf32" in src
        out = np.full(dag.output_tensors[0].shape, np.nan, np.float32)
        func(x, y, out)
        err_exact = float(np.abs(out - exact).max())
        err_tf32 = float(np.abs(out - rounded).max())
        assert err_exact <= 1e-2 * scale, (err_exact, scale, str(s))  # a TF32 tolerance
        assert err_tf32 <= 5e-5 * scale, (err_tf32, scale, str(s))  # float32 sums only
        assert err_exact > 4 * err_tf32, (err_exact, err_tf32)  # the operands were rounded


def test_without_allow_tf32_the_same_schedule_is_exact_float32(sm80):
    task = ansor.SearchTask(ComputeDAG(_dense(128, 128, 512)), target=TF32)
    (s,) = _states(task, 1)
    rng = np.random.default_rng(6)
    x, y = (rng.standard_normal(t.shape).astype("float32") for t in task.compute_dag.input_tensors)
    exact = _product(x, y)
    func = ansor.build(s, "cuda", device=sm80)  # the TF32 schedule, TF32 not allowed
    assert "wmma" not in func.get_source()
    out = np.full((128, 128), np.nan, np.float32)
    func(x, y, out)
    assert float(np.abs(out - exact).max()) <= 1e-5 * float(np.abs(exact).max())


def test_a_float32_network_built_with_tf32_records(sm80, tmp_path):
    """A two-layer perceptron: records of TF32 tensor-core states drive a -allow_tf32=1 build
    (TF32 kernels, TF32 accuracy); a plain cuda build of the same records ignores them."""
    from autosched.measure import MeasureInput, MeasureResult
    from autosched.measure.records import save_records
    from autosched.network.build import build_network
    from tensorir.graph import evaluate

    rng = np.random.default_rng(0)
    func, params = two_layer_mlp(64, 128, 256, 64, rng, scale=0.1)
    tasks, _ = ansor.extract_tasks(func, params, TF32)
    assert len(tasks) == 2
    log = tmp_path / "tf32.json"
    inputs = [MeasureInput(t, _states(t, 1)[0]) for t in tasks]
    save_records(log, inputs, [MeasureResult(costs=(1e-5,))] * len(inputs))
    x = rng.uniform(-1, 1, (64, 128)).astype("float32")
    ref = evaluate(func, {"data": x}, params)
    ref = np.asarray(ref[0] if isinstance(ref, list) else ref, np.float64)
    with ansor.ApplyHistoryBest(str(log)):
        lib = build_network(func, TF32, params, device=sm80)
    assert lib.get_source().count("precision::tf32") >= 2
    module = ansor.GraphModule(lib, sm80)
    module.set_input("data", x)
    module.run()
    got = module.get_output(0).numpy()
    err = float(np.abs(got - ref).max())
    assert err <= 1e-2 * float(np.abs(ref).max()) and got.std() > 0
    with ansor.ApplyHistoryBest(str(log)), pytest.warns(UserWarning, match="default schedule"):
        plain = build_network(func, "cuda", params, device=sm80)
    assert "tf32" not in plain.get_source()
