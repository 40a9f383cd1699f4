"""A small network on CUDA replayed as one captured CUDA graph (pycuda's graph API, or the
driver's through ctypes where pycuda has none), against the numpy reference on random inputs.

Run with ``-s`` to see the timings: ``pytest -q -s tests/gpu/test_cuda_graph.py``.
"""

import numpy as np
import pytest

import autosched as ansor
import runtime.cuda_graph as cg
from autosched.network.build import build_network
from runtime import device
from tensorir.graph import evaluate, nn, op
from tensorir.graph import ir as gir

from .conftest import CUDA_REASON


def _net(rng, c=16, hw=16, blocks=3):
    """conv-bn-relu, ``blocks`` residual conv blocks, pool, dense, softmax: about 8 kernels."""
    params = {}

    def weight(name, shape):
        params[name] = (rng.standard_normal(shape) * 0.3).astype("float32")
        return op.var(name, shape)

    data = op.var("data", (1, hw, hw, 3))
    x = nn.relu(nn.conv2d(data, weight("w0", (3, 3, 3, c)), padding=1, data_layout="NHWC"))
    for i in range(blocks):
        y = nn.conv2d(x, weight(f"w{i + 1}", (3, 3, c, c)), padding=1, data_layout="NHWC")
        x = op.add(nn.relu(nn.bias_add(y, weight(f"b{i + 1}", (c,)), axis=3)), x)
    x = nn.batch_flatten(nn.global_avg_pool2d(x, layout="NHWC"))
    out = nn.softmax(nn.dense(x, weight("fc", (10, c))))
    return gir.Function(tuple(gir.free_vars(out)), out), params


@pytest.fixture(scope="module")
def small():
    if CUDA_REASON:
        pytest.skip(CUDA_REASON)
    rng = np.random.default_rng(5)
    func, params = _net(rng)
    dev = device("cuda")
    with pytest.warns(UserWarning, match="default schedule"):
        lib = build_network(func, "cuda", params, device=dev)
    return func, params, lib, dev


def _check_runs_through_a_graph(small, api):
    func, params, lib, dev = small
    module = ansor.GraphModule(lib, dev)
    runner = module.cuda_graph
    assert runner is not None and runner.enabled, runner.reason
    assert runner.api == api and f"cuda graph on ({api})" in repr(module)
    rng = np.random.default_rng(9)
    for _ in range(3):  # new values in the same input buffer: one capture, three replays
        x = rng.uniform(-1, 1, (1, 16, 16, 3)).astype("float32")
        module.set_input("data", x)
        module.run()
        np.testing.assert_allclose(
            module.get_output(0).numpy(), evaluate(func, {"data": x}, params), rtol=1e-4, atol=1e-6
        )
    assert runner.reason is None, runner.reason
    assert runner.captures == 1 and runner.replays == 3
    return module


def test_small_network_replays_one_captured_graph(small):
    api = "pycuda" if cg.graph_api_missing(small[3].backend._cuda) is None else "driver"
    module = _check_runs_through_a_graph(small, api)
    print(f"\n{module}: {len(module.cuda_graph._launches)} kernels captured through {api}")


def test_driver_api_captures_where_pycuda_would(small, monkeypatch):
    # the ctypes path even where this pycuda has its own graph API
    monkeypatch.setattr(cg, "graph_api_missing", lambda cuda: "pycuda's graph API ignored")
    module = _check_runs_through_a_graph(small, "driver")
    runner = module.cuda_graph
    runner.invalidate()  # cuGraphExecDestroy / cuGraphDestroy, then a fresh capture works
    module.run()
    assert runner.captures == 2 and runner.reason is None


def test_graph_replay_time_against_plain_launches(small):
    _, _, lib, dev = small
    x = np.random.default_rng(2).uniform(-1, 1, (1, 16, 16, 3)).astype("float32")
    times = {}
    for use_graph in (True, False):
        module = ansor.GraphModule(lib, dev, use_cuda_graph=use_graph)
        module.set_input("data", x)
        times[use_graph] = module.benchmark(dev, repeat=5, min_repeat_ms=50).median
    assert module.cuda_graph is None and all(t > 0 for t in times.values())
    print(
        f"\nsmall network ({len(lib.plan.calls)} calls): {times[True] * 1e6:.1f} us replaying a "
        f"CUDA graph, {times[False] * 1e6:.1f} us with plain launches"
    )
