"""``remote.load_module(name)`` without ``trust``: the server rebuilds every kernel from the
state the library records, compares, and runs its own builds (issue 27 section 1, issue 30
section 2; autosched/rpc/rebuild.py).

A tracker and one server on 127.0.0.1 (the CPU and, where there is one, the OpenCL device).
Libraries whose kernel code was edited after export, or that record no states (the old
format), are refused without ``trust`` naming the kernel, and their code does not run; with
``trust=True`` they load as they are (which shows the edits are real).
"""

import warnings
from dataclasses import replace

import numpy as np
import pytest
from test_network import small_net

import autosched as ansor
import runtime
from runtime.library_file import _TRAILER_SIZE, seal
from tensorir.graph import evaluate

pytest.importorskip("distributed")
from test_rpc import (  # noqa: E402
    Processes,
    _connect,
    _free_port,
    _server_args,
    _wait_for_servers,
)
from test_rpc_trust import _evil_ir  # noqa: E402

from autosched.network.build import NetworkLib  # noqa: E402


def _has_opencl() -> bool:
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return False
    return runtime.device("opencl", 0).exists


OPENCL = _has_opencl()
needs_opencl = pytest.mark.skipif(not OPENCL, reason="no OpenCL device (pyopencl + PoCL)")


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    """A session on a server of key "lib" serving the CPU (and OpenCL, where there is one)."""
    logdir = tmp_path_factory.mktemp("rpc-rebuild")
    procs = Processes(logdir)
    port = _free_port()
    devices = ["--device", "cpu"] + (["--device", "opencl"] if OPENCL else [])
    try:
        procs.start("tracker", "autosched.exec.rpc_tracker", "--port", str(port))
        server = procs.start("server", *_server_args(port, "lib", *devices))
        tracker = _connect(port, procs.procs[0])
        _wait_for_servers(tracker, {"lib": 1}, [server])
        yield tracker.request("lib", timeout=30)
        tracker.close()
    finally:
        procs.close()


@pytest.fixture(scope="module")
def net():
    rng = np.random.default_rng(5)
    func, params = small_net(rng, n_blocks=1)
    data = rng.uniform(-1, 1, (1, 8, 8, 3)).astype("float32")
    return func, params, data, evaluate(func, {"data": data}, params)


def _build(net, target) -> NetworkLib:
    func, params, _, _ = net
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tuning records: default schedules
        return ansor.build(func, target, params=params)


def _run(remote, name, dev, data, trust=False):
    lib = remote.load_module(name, trust=trust)
    module = ansor.GraphModule(lib["default"](dev))
    module.set_input("data", data)
    module.run()
    return module.get_output(0).numpy()


def test_cpu_network_library_loads_without_trust_by_rebuilding(remote, net, tmp_path):
    lib = _build(net, "llvm")
    assert len(lib.plan.states) == len(lib.plan.kernels)
    assert all(s is not None and s["target"] == "llvm" for s in lib.plan.states)
    path = tmp_path / "cpu_net.so"
    lib.export_library(path)
    remote.upload(path)
    out = _run(remote, "cpu_net.so", remote.cpu(), net[2])
    np.testing.assert_allclose(out, net[3], rtol=1e-4, atol=1e-5)
    # The JSON form (what CUDA networks use) is rebuilt the same way.
    lib.export_library(tmp_path / "cpu_net.json")
    remote.upload(tmp_path / "cpu_net.json")
    out = _run(remote, "cpu_net.json", remote.cpu(), net[2])
    np.testing.assert_allclose(out, net[3], rtol=1e-4, atol=1e-5)


def test_cpu_library_with_edited_ir_is_refused_and_its_code_never_runs(remote, net, tmp_path):
    """A kernel whose IR (and so object code) calls ``system()``: refused without trust, the
    marker absent; with ``trust=True`` the library's own code runs and writes it."""
    marker = tmp_path / "edited-code-ran"
    lib = _build(net, "llvm")
    kernels = list(lib.plan.kernels)
    kernels[4] = dict(kernels[4], code=_evil_ir(kernels[4]["code"], marker))
    evil = NetworkLib(replace(lib.plan, kernels=tuple(kernels)), [], lib.target)
    evil.export_library(tmp_path / "evil_net.so")
    remote.upload(tmp_path / "evil_net.so")
    with pytest.raises(RuntimeError) as info:
        remote.load_module("evil_net.so")
    msg = str(info.value)
    assert "kernel 4 (fused_dense_add)" in msg and "LLVM IR differs" in msg, msg
    assert "trust=True" in msg and "\n" not in msg
    assert not marker.exists(), "the server ran code of a library it was not told to trust"
    _run(remote, "evil_net.so", remote.cpu(), net[2], trust=True)
    assert marker.exists()  # the edit was real: trusted, the library's own code ran


@needs_opencl
def test_opencl_library_with_edited_source_is_refused(remote, net, tmp_path):
    """The OpenCL source embedded in the library edited in place (``+ bias`` -> ``- bias``)
    and the file sealed again, so that its size and sha256 check pass."""
    lib = _build(net, "opencl")
    path = tmp_path / "cl_net.so"
    lib.export_library(path)
    data = path.read_bytes()[:-_TRAILER_SIZE]
    old = b"(T_dense_local[0] + placeholder_2"
    assert data.count(old) == 1
    path.write_bytes(data.replace(old, b"(T_dense_local[0] - placeholder_2"))
    seal(path)
    remote.upload(path)
    with pytest.raises(RuntimeError) as info:
        remote.load_module("cl_net.so")
    msg = str(info.value)
    assert "kernel 4 (fused_dense_add)" in msg and "OpenCL source differs" in msg, msg
    assert "trust=True" in msg and "\n" not in msg
    # Trusted, the edited kernel is what runs: its output is not the network's.
    out = _run(remote, "cl_net.so", remote.cl(), net[2], trust=True)
    assert not np.allclose(out, net[3], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("target", ["llvm", "opencl"])
def test_library_without_recorded_states_needs_trust(remote, net, tmp_path, target):
    if target == "opencl" and not OPENCL:
        pytest.skip("no OpenCL device (pyopencl + PoCL)")
    lib = _build(net, target)
    old = NetworkLib(replace(lib.plan, states=()), lib.modules, lib.target)
    name = f"old_{target}.so"
    old.export_library(tmp_path / name)
    remote.upload(tmp_path / name)
    with pytest.raises(RuntimeError) as info:
        remote.load_module(name)
    msg = str(info.value)
    assert "records no state" in msg and "trust=True" in msg and "\n" not in msg, msg
    dev = remote.cpu() if target == "llvm" else remote.cl()
    out = _run(remote, name, dev, net[2], trust=True)
    np.testing.assert_allclose(out, net[3], rtol=1e-4, atol=1e-5)


def test_old_libraries_load_locally(net, tmp_path):
    lib = _build(net, "llvm")
    old = NetworkLib(replace(lib.plan, states=()), lib.modules, lib.target)
    old.export_library(tmp_path / "old.so")
    loaded = ansor.load_module(tmp_path / "old.so")
    assert loaded.plan.states == ()
    module = ansor.GraphModule(loaded)
    module.set_input("data", net[2])
    module.run()
    np.testing.assert_allclose(module.get_output(0).numpy(), net[3], rtol=1e-4, atol=1e-5)


def test_malformed_states_are_refused_before_anything_is_built(tmp_path, net):
    from autosched.rpc.rebuild import read_description, recorded_states

    lib = _build(net, "llvm")
    states = list(lib.plan.states)
    bad = {
        "missing key": dict(states[0], dag=None) | {"extra": 1},
        "steps not a list": dict(states[0], steps="rm -rf /"),
        "layout_rewrite not bool": dict(states[0], layout_rewrite="yes"),
    }
    for why, state in bad.items():
        plan = replace(lib.plan, states=(state, *states[1:]))
        path = tmp_path / f"bad_{why.replace(' ', '_')}.so"
        NetworkLib(plan, [], lib.target).export_library(path)
        meta, _ = read_description(path)
        with pytest.raises(ValueError, match=r"kernel 0 .*malformed.*trust=True"):
            recorded_states(path, meta)
    # A truncated copy is refused by the size / ELF checks, before its description is read.
    path = tmp_path / "cut.so"
    lib.export_library(path)
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(ValueError, match="damaged"):
        read_description(path)


def test_one_kernel_library_loads_without_trust_by_rebuilding(remote, tmp_path):
    from autosched import workloads

    dag = ansor.ComputeDAG(workloads.matmul(16, 24, 8))
    state = dag.get_init_state()
    mod = ansor.build(state, "llvm")
    assert mod.state is not None and mod.state["steps"] == []
    mod.export_library(tmp_path / "k.so")
    remote.upload(tmp_path / "k.so")
    kernel = remote.load_module("k.so")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 8)).astype("float32")
    b = rng.standard_normal((8, 24)).astype("float32")
    c = np.full((16, 24), np.nan, "float32")
    kernel(a, b, c)  # numpy outputs are written back
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)
