"""Thread count: the cores this process may use (affinity, cgroup v2/v1 quota of its own cgroup
and its ancestors), AUTOSCHED_NUM_THREADS, and per-call counts."""

from __future__ import annotations

import os

import numpy as np
import pytest
from test_cpu import heavy_parallel

import runtime
import runtime.cpu as cpu
from codegen.llvm import build_llvm
from runtime import environment


def _cgroups(monkeypatch, tmp_path, own: str, files: dict) -> None:
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (tmp_path / "self").write_text(own)
    monkeypatch.setattr(environment, "CGROUP_ROOT", str(root))
    monkeypatch.setattr(environment, "PROC_SELF_CGROUP", str(tmp_path / "self"))


def test_cgroup_v2_quota_of_own_cgroup_and_its_parents(monkeypatch, tmp_path):
    files = {
        "cpu.max": "max 100000\n",
        "a/cpu.max": "max 100000\n",
        "a/b/cpu.max": "250000 100000\n",
    }
    _cgroups(monkeypatch, tmp_path, "0::/a/b\n", files)
    assert environment._cgroup_quota_cores() == 3  # 2.5 cores of quota: 3 threads
    (tmp_path / "cgroup/a/cpu.max").write_text("100000 100000\n")  # the parent caps the child
    assert environment._cgroup_quota_cores() == 1


def test_cgroup_v1_quota(monkeypatch, tmp_path):
    files = {
        "cpu,cpuacct/x/cpu.cfs_quota_us": "200000\n",
        "cpu,cpuacct/x/cpu.cfs_period_us": "100000\n",
        "cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
        "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
    }
    _cgroups(monkeypatch, tmp_path, "4:memory:/x\n2:cpu,cpuacct:/x\n", files)
    assert environment._cgroup_quota_cores() == 2
    _cgroups(monkeypatch, tmp_path, "2:cpu,cpuacct:/\n", files)  # the root has no quota
    assert environment._cgroup_quota_cores() is None


def test_default_threads_are_the_usable_cores(monkeypatch):
    monkeypatch.delenv("AUTOSCHED_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5})
    monkeypatch.setattr(environment, "_cgroup_quota_cores", lambda: None)
    assert cpu.default_num_threads() == 3
    monkeypatch.setattr(environment, "_cgroup_quota_cores", lambda: 2)
    assert cpu.default_num_threads() == 2
    monkeypatch.setenv("AUTOSCHED_NUM_THREADS", "5")
    assert cpu.default_num_threads() == 5


@pytest.fixture
def seen_counts(monkeypatch):
    """Every thread count set from now on (the pool is set up first, with the current one)."""
    before = cpu.get_num_threads()
    seen = []
    real = cpu._set_threads

    def record(n):
        seen.append(n)
        real(n)

    monkeypatch.setattr(cpu, "_set_threads", record)
    yield seen
    real(before)


def test_time_evaluator_runs_with_the_threads_asked_for(seen_counts):
    cpu.set_num_threads(2)
    seen_counts.clear()
    mod = runtime.load_module(**build_llvm(heavy_parallel(16, 3)).as_dict())
    a = np.random.default_rng(3).standard_normal(16).astype("float32")
    res = mod.time_evaluator(number=1, repeat=2, num_threads=1)(a, np.zeros(16, "float32"))
    assert len(res.results) == 2
    assert seen_counts == [1, 2] and cpu.get_num_threads() == 2  # set for the call, restored
    with pytest.raises(ValueError, match="num_threads must be a positive int"):
        mod.time_evaluator(num_threads=0)


def test_graph_module_runs_with_its_threads(seen_counts):
    from runtime.graph_executor import GraphModule, GraphPlan, TensorSpec

    src = build_llvm(heavy_parallel(32, 2)).as_dict()
    kernel = {k: src[k] for k in ("lang", "code", "params", "workspaces", "launches")}
    plan = GraphPlan(
        kernels=(kernel,),
        storages=(("float32", 32), ("float32", 32)),
        inputs={"A": TensorSpec(0, (32,), "float32"), "B": TensorSpec(1, (32,), "float32")},
        outputs=(TensorSpec(1, (32,), "float32"),),
        constants={},
        calls=((0, (0, 1)),),
    )
    cpu.set_num_threads(2)
    seen_counts.clear()
    module = GraphModule(plan, runtime.device("cpu"), num_threads=1)
    a = np.random.default_rng(5).standard_normal(32).astype("float32")
    module.run(A=a, B=np.zeros(32, "float32"))
    np.testing.assert_allclose(module.get_output(0).numpy(), np.tanh(np.tanh(a) + a), atol=1e-5)
    module.benchmark(repeat=1, number=1)
    assert seen_counts == [1, 2, 1, 2] and cpu.get_num_threads() == 2


def test_thread_count_context_and_its_errors(seen_counts):
    from runtime.module import cpu_threads

    cpu.set_num_threads(2)
    seen_counts.clear()
    with cpu_threads(runtime.device("cpu"), 3)():
        assert cpu.get_num_threads() == 3
    assert seen_counts == [3, 2]
    with cpu_threads(runtime.device("cpu"), None)():
        assert cpu.get_num_threads() == 2
    with pytest.raises(ValueError, match="CPU parallel loops, not to"):
        cpu_threads(runtime.Device("cuda"), 2)
