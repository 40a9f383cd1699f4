"""The TVM spellings seeds 001 and 004 use, one by one (tests/test_seeds_as_written.py runs
the seeds' own lines): ``LocalBuilder(build_func=...)``, ``export_library(path,
ndk.create_shared)`` for an OpenCL network, the ``tvm.contrib`` / ``auto_scheduler.utils``
aliases, ``vta.build`` / ``build_config`` / ``graphlib.tar`` / ``rpc.LocalSession`` and their
errors."""

from __future__ import annotations

import functools
import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest
from test_network import small_net

import autosched as ansor
from autosched import workloads
from autosched.measure import MeasureErrorNo
from autosched.measure.data import MeasureInput
from runtime.errors import CompileError
from runtime.shared_library import elf_machine, read_meta, run_linker
from tensorir.graph import evaluate

EM_AARCH64 = 183
HAS_ZIG = importlib.util.find_spec("ziglang") is not None
needs_zig = pytest.mark.skipif(not HAS_ZIG, reason="ziglang (the cross extra) is not installed")


# ----------------------------------------------------------------------------- aliases


def test_tvm_contrib_and_utils_names_are_aliases_not_copies(tmp_path):
    import autosched.contrib.graph_executor
    import autosched.contrib.ndk
    import autosched.contrib.utils
    import autosched.utils
    from autosched.autotvm.measure import request_remote

    assert autosched.utils.request_remote is request_remote
    assert autosched.utils.tempdir is autosched.contrib.utils.tempdir
    assert autosched.contrib.graph_executor.GraphModule is ansor.GraphModule
    assert callable(autosched.contrib.ndk.create_shared)
    temp = autosched.utils.tempdir()
    path = Path(temp.relpath("deploy_lib.so"))
    path.write_bytes(b"x")
    assert temp.listdir() == ["deploy_lib.so"]
    temp.remove()
    assert not path.exists()
    kept = autosched.utils.tempdir(str(tmp_path / "mine"))
    kept.remove()  # a directory the caller named is kept
    assert (tmp_path / "mine").is_dir()


# ----------------------------------------------------------------------------- build_func


def _matmul_inputs(target: str) -> list:
    task = ansor.SearchTask(
        compute_dag=ansor.ComputeDAG(workloads.matmul(16, 16, 16)), target=target
    )
    return [MeasureInput(task, task.compute_dag.get_init_state())]


def test_build_func_is_checked_when_the_builder_is_made():
    with pytest.raises(ValueError, match=r"build_func='tar'; use 'default', 'ndk' or a function"):
        ansor.LocalBuilder(build_func="tar")
    with pytest.raises(ValueError, match=r"cannot be sent to the build workers"):
        ansor.LocalBuilder(build_func=lambda output, objects, options: None)
    with pytest.raises(TypeError, match=r"build_func must be a str or a function"):
        ansor.LocalBuilder(build_func=3)


def test_build_func_links_cpu_candidates_and_a_link_failure_is_compile_host():
    # a linker that always fails ("false"): a module-level function, so the workers get it
    failing = functools.partial(run_linker, ["false"])
    with ansor.LocalBuilder(n_parallel=1, build_func=failing) as builder:
        (result,) = builder.build(_matmul_inputs("llvm"))
    assert result.error_no == MeasureErrorNo.COMPILE_HOST
    assert result.error_msg.startswith("linking with build_func: CompileError: linking ")
    with ansor.LocalBuilder(n_parallel=1, build_func="default") as builder:
        (result,) = builder.build(_matmul_inputs("llvm"))
    assert result.error_no == MeasureErrorNo.NO_ERROR


@needs_zig
def test_build_func_ndk_links_for_the_targets_triple():
    with ansor.LocalBuilder(n_parallel=1, timeout=120, build_func="ndk") as builder:
        (result,) = builder.build(_matmul_inputs("llvm -mtriple=aarch64-linux-gnu"))
    assert result.error_no == MeasureErrorNo.NO_ERROR, result.error_msg


# ----------------------------------------------------------------------------- ndk export


def _mali_lib():
    rng = np.random.default_rng(21)
    func, params = small_net(rng, n_blocks=1)
    target = ansor.Target("opencl -device=mali", host="llvm -mtriple=aarch64-linux-gnu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tuning records: default schedules
        lib = ansor.build(func, target, params=params, device=_opencl_or_skip())
    return func, params, lib


def _opencl_or_skip():
    pytest.importorskip("pyopencl")
    dev = ansor.device("opencl", 0)
    if not dev.exists:
        pytest.skip("no OpenCL device")
    return dev


@needs_zig
def test_opencl_network_exports_one_aarch64_library_and_runs_from_it(tmp_path, monkeypatch):
    from autosched.contrib import ndk

    func, params, lib = _mali_lib()
    # the seed's TVM_NDK_CC: a cross g++ that is not installed here, so zig links instead
    monkeypatch.setenv("TVM_NDK_CC", str(tmp_path / "no-such-g++"))
    path = tmp_path / "deploy_lib.so"
    lib.export_library(str(path), ndk.create_shared)
    assert elf_machine(path.read_bytes()[:64]) == EM_AARCH64
    meta = read_meta(path)  # read from the file, not loaded: any architecture
    assert meta["triple"] == "aarch64-linux-gnu"
    assert {k["lang"] for k in meta["kernels"]} == {"opencl"}
    assert all("__kernel" in k["code"] for k in meta["kernels"])  # the OpenCL source, as data

    loaded = ansor.load_module(path)  # on this machine's OpenCL device
    module = ansor.GraphModule(loaded["default"](ansor.device("opencl", 0)))
    data = np.random.default_rng(22).uniform(-1, 1, (1, 8, 8, 3)).astype("float32")
    module.set_input("data", data)
    module.run()
    expected = evaluate(func, {"data": data}, params)
    np.testing.assert_allclose(module.get_output(0).numpy(), expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"network's opencl kernels run on the opencl device"):
        ansor.load_module(path, "cpu")


@needs_zig
def test_ndk_create_shared_links_for_android(tmp_path):
    from autosched.contrib import ndk
    from runtime.shared_library import export_shared_library

    path = tmp_path / "k.so"
    export_shared_library(path, [], {"kind": "kernel"}, triple="aarch64-linux-android",
                          fcompile=ndk.create_shared)  # fmt: skip
    assert elf_machine(path.read_bytes()[:64]) == EM_AARCH64
    assert read_meta(path)["triple"] == "aarch64-linux-android"


def test_without_ndk_or_zig_the_error_names_both(tmp_path, monkeypatch):
    import runtime.shared_library as sl
    from autosched.contrib import ndk

    monkeypatch.setattr(sl, "zig_cc", lambda: None)
    monkeypatch.setattr(ndk, "zig_cc", lambda: None)
    monkeypatch.setenv("TVM_NDK_CC", "/nonexistent/aarch64-linux-android-clang++")
    with pytest.raises(CompileError, match=r"TVM_NDK_CC=.* is not installed.*autosched\[cross\]"):
        ndk.create_shared(str(tmp_path / "x.so"), [], triple="aarch64-linux-android")
    monkeypatch.setattr(sl.shutil, "which", lambda name: None)
    names_all = r"no linker for aarch64-linux-gnu: set TVM_NDK_CC.*-gcc.*autosched\[cross\]"
    with pytest.raises(CompileError, match=names_all):
        sl.cross_linker("aarch64-linux-gnu")


# ----------------------------------------------------------------------------- VTA


def _packed_vta_net():
    from test_vta_graph_pack import _int8_net, _values

    from autosched import vta

    func = _int8_net()
    packed = vta.top.graph_pack(func, 1, 16, 8, "nn.max_pool2d", "nn.global_avg_pool2d")
    values = _values(func, np.random.default_rng(23))
    return func, packed, values


def test_vta_library_round_trip_through_a_local_session(tmp_path):
    from autosched import rpc, vta
    from autosched.contrib import graph_executor
    from autosched.vta.testing import simulator

    func, packed, values = _packed_vta_net()
    env = vta.get_env()
    weights = {k: v for k, v in values.items() if k != "data"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned workloads take the fallback config
        with vta.build_config(opt_level=3, disabled_pass={"AlterOpLayout"}):
            lib = vta.build(ansor.IRModule.from_expr(packed), target=env.target, params=weights,
                            target_host=env.target_host)  # fmt: skip
    lib.export_library(tmp_path / "graphlib.tar")
    remote = rpc.LocalSession()
    remote.upload(tmp_path / "graphlib.tar")
    loaded = remote.load_module("graphlib.tar")
    ctx = remote.ext_dev(0)
    m = graph_executor.GraphModule(loaded["default"](ctx))
    m.set_input("data", ansor.nd.array(values["data"]))
    simulator.clear_stats()
    m.run()
    np.testing.assert_array_equal(m.get_output(0), evaluate(func, values))
    one = simulator.stats()
    assert one["gemm_counter"] == m.stats["gemm_counter"] > 0
    simulator.clear_stats()
    result = m.module.time_evaluator("run", ctx, number=2, repeat=2)()
    assert len(result.results) == 2 and min(result.results) > 0
    assert simulator.stats() == {k: 5 * v for k, v in one.items()}  # 2 x 2 runs + a warm-up


def test_vta_errors_are_one_line(tmp_path):
    from autosched import rpc, vta

    _, packed, _ = _packed_vta_net()
    with pytest.raises(ValueError, match=r"vta.build: target 'llvm' is not VTA's; pass env.target"):
        vta.build(packed, target="llvm")
    with pytest.raises(ValueError, match=r"opt_level must be 0..4"), vta.build_config(opt_level=9):
        pass
    junk = tmp_path / "graphlib.tar"
    junk.write_text("not a tar")
    with pytest.raises(ValueError, match=r"graphlib.tar: not a VTA library written by export_lib"):
        vta.load_library(junk)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = vta.build(packed)
    lib.export_library(junk)
    other = vta.get_env({"LOG_BLOCK": 5})
    with pytest.raises(ValueError, match=r"compiled for another VTA configuration .*LOG_BLOCK"):
        vta.load_library(junk, other)
    with pytest.raises(FileNotFoundError, match=r"'lib.tar' was not uploaded"):
        rpc.LocalSession().load_module("lib.tar")
    with pytest.raises(TypeError, match=r"IRModule.from_expr: expected a network Function"):
        ansor.IRModule.from_expr("main")
    with pytest.raises(KeyError, match=r"unknown op 'nn.conv9d'"):
        ansor.relay.op.get("nn.conv9d")
