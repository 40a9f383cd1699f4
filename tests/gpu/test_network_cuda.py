"""Whole networks on the GPU: resnet-18 built for CUDA with default schedules, run by
GraphModule with and without a CUDA graph, against the numpy reference of the graph.

Run with ``-s`` to see the timings: ``pytest -q -s tests/gpu/test_network_cuda.py``.
"""

import warnings

import numpy as np
import pytest

import autosched as ansor
from autosched.network.build import build_network
from runtime import array, device
from tensorir.graph import evaluate

from .conftest import CUDA_REASON, OPENCL_GPU_REASON


@pytest.fixture(scope="module")
def resnet18():
    if CUDA_REASON:
        pytest.skip(CUDA_REASON)
    mod, params, input_shape, _ = ansor.networks.get_network("resnet-18", 1, "NHWC")
    x = np.random.default_rng(0).uniform(-1, 1, input_shape).astype("float32")
    dev = device("cuda")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib = build_network(mod, "cuda", params, device=dev)
    assert any("default schedule" in str(w.message) for w in caught)
    ref = evaluate(mod, {"data": x}, params)
    ref = ref[0] if isinstance(ref, list) else ref
    return mod, params, lib, x, ref, dev


def test_resnet18_cuda_default_schedules_match_reference(resnet18):
    mod, params, lib, x, ref, dev = resnet18
    assert all(m.lang == "cuda" for m in lib.modules) and "blockIdx.x" in lib.get_source()
    module = ansor.GraphModule(lib, dev)
    module.set_input("data", x)
    module.run()
    out = module.get_output(0).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-7)
    assert out.argmax() == ref.argmax() and out.std() > 0
    module.run()  # a second run (a graph replay) gives the same output
    np.testing.assert_array_equal(module.get_output(0).numpy(), out)


def test_cuda_graph_replay_equals_plain_launches(resnet18):
    mod, params, lib, x, ref, dev = resnet18
    graph = ansor.GraphModule(lib, dev, use_cuda_graph=True)
    plain = ansor.GraphModule(lib, dev, use_cuda_graph=False)
    runner = graph.cuda_graph
    assert runner is not None and plain.cuda_graph is None
    if not runner.enabled:
        pytest.skip(f"CUDA graphs unavailable: {runner.reason}")
    outs = []
    for module in (graph, plain):
        module.set_input("data", x)
        module.run()
        module.run()
        outs.append(module.get_output(0).numpy())
    assert runner.reason is None, runner.reason  # capturing did not fail
    assert runner.captures == 1 and runner.replays == 2
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], ref, rtol=1e-4, atol=1e-7)
    # new input values in the same buffer: replay without capturing again
    y = np.random.default_rng(1).uniform(-1, 1, x.shape).astype("float32")
    graph.set_input("data", y)
    graph.run()
    assert runner.captures == 1
    ref_y = evaluate(mod, {"data": y}, params)
    ref_y = ref_y[0] if isinstance(ref_y, list) else ref_y
    np.testing.assert_allclose(graph.get_output(0).numpy(), ref_y, rtol=1e-4, atol=1e-7)
    # a zero-copy input is another buffer: the graph is captured again
    graph.set_input_zero_copy("data", array(x, dev))
    graph.run()
    assert runner.captures == 2
    np.testing.assert_array_equal(graph.get_output(0).numpy(), outs[1])


def test_resnet18_cuda_benchmark(resnet18):
    _, _, lib, x, _, dev = resnet18
    times = {}
    for use_graph in (True, False):
        module = ansor.GraphModule(lib, dev, use_cuda_graph=use_graph)
        module.set_input("data", x)
        res = module.benchmark(dev, repeat=5, min_repeat_ms=100)
        times[use_graph] = res.mean
        assert 0 < res.mean < 1.0 and len(res.results) == 5
    print(
        f"\nresnet-18 NHWC b1, default GPU schedules on {dev}: "
        f"{times[True] * 1e3:.3f} ms with a CUDA graph, {times[False] * 1e3:.3f} ms with plain "
        f"launches ({len(lib.plan.calls)} kernels)"
    )


def test_resnet18_export_and_load_cuda(resnet18, tmp_path):
    _, _, lib, x, ref, dev = resnet18
    path = tmp_path / "resnet18_cuda.json"
    lib.export_library(path)
    loaded = ansor.load_module(path)
    assert loaded.target.kind == "cuda"
    module = ansor.GraphModule(loaded, dev)
    module.set_input("data", x)
    module.run()
    np.testing.assert_allclose(module.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-7)


def test_small_resnet_on_opencl_gpu():
    if OPENCL_GPU_REASON:
        pytest.skip(OPENCL_GPU_REASON)
    from tensorir.graph import ir as gir
    from tensorir.graph.zoo import NetBuilder, resnet

    b = NetBuilder("NHWC", "float32")
    out = resnet(b, (1, 64, 64, 3), 18)
    func = gir.Function(tuple(gir.free_vars(out)), out)
    params = b.params(0)
    x = np.random.default_rng(3).uniform(-1, 1, (1, 64, 64, 3)).astype("float32")
    dev = device("opencl")
    with pytest.warns(UserWarning, match="default schedule"):
        lib = build_network(func, "opencl", params, device=dev)
    module = ansor.GraphModule(lib, dev)
    module.set_input("data", x)
    module.run()
    np.testing.assert_allclose(
        module.get_output(0).numpy(), evaluate(func, {"data": x}, params), rtol=1e-4, atol=1e-7
    )
    res = module.benchmark(dev, repeat=3, min_repeat_ms=50)
    print(f"\nresnet-18 64x64 on OpenCL {dev.properties['name']}: {res.mean * 1e3:.3f} ms")
