"""Whole networks on GPU targets without a GPU: OpenCL through PoCL on the CPU (the CUDA graph
runner's control flow is tested in tests/runtime/test_cuda_graph.py)."""

import warnings

import numpy as np
import pytest
from test_network import small_net

import autosched as ansor
from autosched.network.build import build_network
from autosched.network.default_schedules import default_gpu_schedule, pick_num_threads
from autosched.network.partition import partition
from codegen.target import Target
from runtime import array, device
from tensorir.graph import evaluate
from tensorir.graph import ir as gir


def _opencl():
    dev = device("opencl")
    if not dev.exists:
        pytest.skip("no OpenCL platform")
    return dev


@pytest.fixture
def net():
    rng = np.random.default_rng(11)
    func, params = small_net(rng)
    data = rng.uniform(-1, 1, (1, 8, 8, 3)).astype("float32")
    return func, params, data


def _run(lib, data, dev):
    module = ansor.GraphModule(lib, dev)
    module.set_input("data", data)
    module.run()
    return module, module.get_output(0).numpy()


@pytest.mark.parametrize("use_winograd", [False, True])
def test_opencl_default_schedules_match_reference(net, use_winograd):
    dev = _opencl()
    func, params, data = net
    with pytest.warns(UserWarning, match="default schedule"):
        lib = build_network(func, "opencl", params, use_winograd=use_winograd, device=dev)
    assert lib.target.kind == "opencl" and all(m.lang == "opencl" for m in lib.modules)
    src = lib.get_source()
    assert "get_group_id(0)" in src and "get_local_id(0)" in src
    if not use_winograd:
        # conv2d + bias + relu is one kernel: the conv accumulates in a register of the thread
        conv = lib.modules[lib.plan.calls[0][0]]
        assert len(conv.launches) == 1 and "Conv2dOutput_local" in conv.code
    _, out = _run(lib, data, dev)
    ref = evaluate(func, {"data": data}, params)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-7)
    assert not np.allclose(out, out.mean())


def test_opencl_graph_module_runs_without_reallocating(net, monkeypatch):
    dev = _opencl()
    func, params, data = net
    with pytest.warns(UserWarning):
        lib = ansor.build(func, "opencl", params=params)
    module, first = _run(lib, data, dev)
    buffers = [b.handle for b in module._buffers]
    backend = dev.backend
    allocs = []
    real_alloc = backend.alloc
    monkeypatch.setattr(backend, "alloc", lambda n: allocs.append(n) or real_alloc(n))
    module.run()
    second = module.get_output(0).numpy()
    np.testing.assert_array_equal(first, second)
    res = module.benchmark(dev, repeat=2, number=2, min_repeat_ms=0)
    assert len(res.results) == 2 and all(t > 0 for t in res.results)
    other = np.random.default_rng(1).uniform(-1, 1, data.shape).astype("float32")
    module.set_input("data", other)
    module.run()
    out = module.get_output(0).numpy()
    np.testing.assert_allclose(out, evaluate(func, {"data": other}, params), rtol=1e-4, atol=1e-7)
    assert not np.allclose(out, first)
    assert allocs == [], f"run/benchmark/get_output allocated device memory: {allocs}"
    assert [b.handle for b in module._buffers] == buffers
    # intermediates share storages: fewer buffers than tensors written by the calls
    assert len(module.plan.storages) < len(module.plan.calls) + len(module.plan.constants) + 1


def test_opencl_zero_copy_input_rebinds(net):
    dev = _opencl()
    func, params, data = net
    with pytest.warns(UserWarning):
        lib = ansor.build(func, "opencl", params=params)
    module = ansor.GraphModule(lib, dev)
    x = np.random.default_rng(2).uniform(-1, 1, data.shape).astype("float32")
    module.set_input_zero_copy("data", array(x, dev))
    module.run()
    ref = evaluate(func, {"data": x}, params)
    np.testing.assert_allclose(module.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-7)
    with pytest.raises(ValueError, match="data"):
        module.set_input_zero_copy("data", array(x[:, :4], dev))


def test_default_gpu_schedule_respects_max_threads(net):
    dev = _opencl()
    func, params, data = net
    _, groups = partition(func, params, Target("opencl"), use_winograd=False)
    for gd in groups:
        state = default_gpu_schedule(gd.dag, max_threads_per_block=64)
        bound = [it for st in state.stages for it in st.iters if it.annotation == "threadIdx.x"]
        assert bound and all(it.extent <= 64 for it in bound), gd.name
    with pytest.warns(UserWarning):
        lib = build_network(
            func, "opencl", params, use_winograd=False, device=dev,
            hardware_params=ansor.HardwareParams(max_threads_per_block=64),
        )  # fmt: skip
    blocks = [la[3] for m in lib.modules for la in m.launches]
    assert blocks and max(int(np.prod(b)) for b in blocks) <= 64
    assert max(int(np.prod(b)) for b in blocks) > 1
    _, out = _run(lib, data, dev)
    np.testing.assert_allclose(out, evaluate(func, {"data": data}, params), rtol=1e-4, atol=1e-7)


def test_pick_num_threads():
    assert pick_num_threads(100) == 100
    assert pick_num_threads(512 * 49, 1024) == 256
    assert pick_num_threads(64 * 112 * 112, 64) == 64
    assert pick_num_threads(1000, 256) == 250  # a divisor: no guarded tail
    assert pick_num_threads(7 * 7 * 512, 128) == 128
    assert pick_num_threads(1009, 256) == 256  # a prime: guarded tail
    assert pick_num_threads(3000, 1024) == 250  # no multiple of 32 divides it
    assert pick_num_threads(9600, 1024) == 192  # a multiple of the warp before 240


def test_opencl_export_and_load(net, tmp_path):
    dev = _opencl()
    func, params, data = net
    with pytest.warns(UserWarning):
        lib = ansor.build(func, "opencl", params=params)
    path = tmp_path / "net_cl.json"
    lib.export_library(path)
    loaded = ansor.load_module(path)
    assert loaded.target.kind == "opencl" and loaded.modules[0].device.kind == "opencl"
    _, out = _run(loaded, data, dev)
    np.testing.assert_allclose(out, evaluate(func, {"data": data}, params), rtol=1e-4, atol=1e-7)


def test_opencl_resnet18_small_input():
    """resnet-18 (NHWC, winograd 3x3 convs as TVM picks them) at 32x32 on PoCL."""
    dev = _opencl()
    from tensorir.graph.zoo import NetBuilder, resnet

    b = NetBuilder("NHWC", "float32")
    out = resnet(b, (1, 32, 32, 3), 18)
    func = gir.Function(tuple(gir.free_vars(out)), out)
    params = b.params(0)
    x = np.random.default_rng(4).uniform(-1, 1, (1, 32, 32, 3)).astype("float32")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib = build_network(func, "opencl", params, device=dev)
    assert any("default schedule" in str(w.message) for w in caught)
    assert any("winograd" in n for n in lib.plan.names)
    _, got = _run(lib, x, dev)
    ref = evaluate(func, {"data": x}, params)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-8)
    assert got.std() > 1e-6 * got.mean()  # not a constant output


def test_cli_runs_a_network_on_opencl(tmp_path, capsys, monkeypatch):
    _opencl()
    from autosched.cli import main
    from autosched.cli import network as network_cli

    def tiny(args):  # a small zoo-like network instead of a 224x224 one
        from tensorir.graph.zoo import NetBuilder, resnet

        b = NetBuilder("NHWC", "float32")
        out = resnet(b, (1, 16, 16, 3), 18)
        mod = gir.Module.from_function(gir.Function(tuple(gir.free_vars(out)), out))
        return mod, b.params(0), (1, 16, 16, 3), "data", "tiny"

    monkeypatch.setattr(network_cli, "_load_network", tiny)
    monkeypatch.chdir(tmp_path)  # no default log here: every kernel uses the default schedule
    lib = tmp_path / "tiny.json"
    with pytest.warns(UserWarning, match="default schedule"):
        assert main(["compile", "--target", "opencl", "-o", str(lib)]) == 0
    assert main(["run", "--target", "opencl", "--lib", str(lib), "--repeat", "1",
                 "--min-repeat-ms", "0"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "(OK)" in out and "Execution time summary" in out


def test_opencl_build_uses_gpu_records_and_drops_unfit_ones(net, tmp_path):
    from autosched.measure import MeasureInput, MeasureResult
    from autosched.measure.records import save_records

    dev = _opencl()
    func, params, data = net
    tasks, _ = ansor.extract_tasks(func, params, "opencl -device=pocl", use_winograd=False)
    task = max(tasks, key=lambda t: t.compute_dag.flop_count())
    log = tmp_path / "gpu.json"
    # a "tuned" record: the default schedule with 32 threads per block, on a target of the
    # same kind but another option string
    state = default_gpu_schedule(task.compute_dag, max_threads_per_block=32)
    save_records(log, [MeasureInput(task, state)], [MeasureResult(costs=(1e-4,))])
    with ansor.ApplyHistoryBest(log) as ctx, pytest.warns(UserWarning, match="default schedule"):
        lib = build_network(func, "opencl", params, use_winograd=False, device=dev)
    assert task.workload_key in ctx.hit_keys and sum(lib.tuned.values()) >= 1
    kernel = lib.modules[lib.plan.calls[[g for g in lib.plan.names].index(task.desc)][0]]
    assert {la[3] for la in kernel.launches} == {(32, 1, 1)}
    _, out = _run(lib, data, dev)
    np.testing.assert_allclose(out, evaluate(func, {"data": data}, params), rtol=1e-4, atol=1e-7)
    # the same record on a device allowing only 16 threads: replaced by the default schedule
    with ansor.ApplyHistoryBest(log), pytest.warns(UserWarning, match="do not fit"):
        small = build_network(
            func, "opencl", params, use_winograd=False, device=dev,
            hardware_params=ansor.HardwareParams(max_threads_per_block=16),
        )  # fmt: skip
    assert not any(small.tuned.values())
    assert max(int(np.prod(la[3])) for m in small.modules for la in m.launches) <= 16
    _, out = _run(small, data, dev)
    np.testing.assert_allclose(out, evaluate(func, {"data": data}, params), rtol=1e-4, atol=1e-7)
