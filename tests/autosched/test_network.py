"""Whole networks: task extraction, build with the history best, the graph executor."""

import numpy as np
import pytest

import autosched as ansor
from tensorir.graph import evaluate, nn, op
from tensorir.graph import ir as gir


def small_net(rng, n_blocks=2, hw=8, c=8):
    """data -> conv-bn-relu -> n identical residual blocks -> global pool -> dense -> softmax."""
    params = {}

    def weight(name, shape, scale=0.3):
        params[name] = (rng.standard_normal(shape) * scale).astype("float32")
        return op.var(name, shape)

    def bn(x, name):
        gamma = weight(f"{name}_gamma", (c,))
        beta = weight(f"{name}_beta", (c,))
        mean = weight(f"{name}_mean", (c,))
        var = op.var(f"{name}_var", (c,))
        params[f"{name}_var"] = rng.uniform(0.5, 1.5, (c,)).astype("float32")
        return nn.batch_norm(x, gamma, beta, mean, var, axis=3)

    data = op.var("data", (1, hw, hw, 3))
    x = nn.conv2d(data, weight("conv0_weight", (3, 3, 3, c)), padding=1, data_layout="NHWC")
    x = nn.relu(bn(x, "bn0"))
    for i in range(n_blocks):
        y = nn.conv2d(x, weight(f"b{i}_w", (3, 3, c, c)), padding=1, data_layout="NHWC")
        y = nn.relu(bn(y, f"b{i}_bn"))
        x = op.add(y, x)
    x = nn.batch_flatten(nn.global_avg_pool2d(x, layout="NHWC"))
    x = nn.bias_add(nn.dense(x, weight("fc_w", (10, c))), weight("fc_b", (10,)), axis=1)
    out = nn.softmax(x)
    func = gir.Function(tuple(gir.free_vars(out)), out)
    return func, params


def _run(lib, data):
    module = ansor.GraphModule(lib)
    module.set_input("data", data)
    module.run()
    return module, module.get_output(0).numpy()


@pytest.fixture
def net():
    rng = np.random.default_rng(7)
    func, params = small_net(rng)
    data = rng.uniform(-1, 1, (1, 8, 8, 3)).astype("float32")
    return func, params, data


def test_extract_tasks_dedups_identical_blocks(net):
    func, params, _ = net
    tasks, weights = ansor.extract_tasks(func, params, "llvm", use_winograd=False)
    assert len(tasks) == len({t.workload_key for t in tasks})
    # the two residual blocks are the same subgraph: one task of weight 2
    assert 2 in weights
    assert sum(weights) > len(tasks)
    for t in tasks:
        assert any(o.reduce_axes for o in t.compute_dag.compute_ops)
    all_tasks, _ = ansor.extract_tasks(
        func, params, "llvm", include_simple_tasks=True, use_winograd=False
    )
    assert len(all_tasks) >= len(tasks)


@pytest.mark.parametrize("use_winograd", [False, True])
def test_build_default_schedules_matches_reference(net, use_winograd):
    func, params, data = net
    with pytest.warns(UserWarning, match="default schedule"):
        lib = ansor.build(func, "llvm", params=params) if not use_winograd else None
    if use_winograd:
        from autosched.network import build_network

        with pytest.warns(UserWarning, match="default schedule"):
            lib = build_network(func, "llvm", params, use_winograd=True)
    _, out = _run(lib, data)
    ref = evaluate(func, {"data": data}, params)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-6)
    assert not np.allclose(out, out.mean())  # not a degenerate output


def test_export_and_load_library(net, tmp_path):
    func, params, data = net
    with pytest.warns(UserWarning):
        lib = ansor.build(func, "llvm", params=params)
    path = tmp_path / "net.json"
    lib.export_library(path)
    loaded = ansor.load_module(path)
    _, out = _run(loaded, data)
    np.testing.assert_allclose(out, evaluate(func, {"data": data}, params), rtol=1e-4, atol=1e-6)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        ansor.load_module(tmp_path / "bad.json")


def test_graph_module_input_errors(net):
    func, params, data = net
    with pytest.warns(UserWarning):
        module = ansor.GraphModule(ansor.build(func, "llvm", params=params))
    with pytest.raises(KeyError, match="data"):
        module.set_input("image", data)
    with pytest.raises(ValueError, match="shape"):
        module.set_input("data", data[:, :4])
    with pytest.raises(IndexError):
        module.get_output(3)
    assert module.benchmark(repeat=2, number=2).mean > 0


def test_build_uses_the_history_best(net, tmp_path):
    func, params, data = net
    tasks, _ = ansor.extract_tasks(func, params, "llvm", use_winograd=False)
    task = max(tasks, key=lambda t: t.compute_dag.flop_count())
    log = tmp_path / "log.json"
    policy = ansor.SketchPolicy(
        task,
        ansor.RandomModel(),
        params=ansor.SearchParams(
            evolutionary_search_population=32, evolutionary_search_num_iters=1
        ),
        verbose=0,
    )
    task.tune(
        ansor.TuningOptions(
            num_measure_trials=4,
            num_measures_per_round=4,
            verbose=0,
            measure_callbacks=[ansor.RecordToFile(log)],
        ),
        policy,
    )
    with ansor.ApplyHistoryBest(log) as ctx, pytest.warns(UserWarning, match="default schedule"):
        lib = ansor.build(func, "llvm", params=params)
    assert task.workload_key in ctx.hit_keys
    assert sum(lib.tuned.values()) >= 1
    _, out = _run(lib, data)
    np.testing.assert_allclose(out, evaluate(func, {"data": data}, params), rtol=1e-4, atol=1e-6)
