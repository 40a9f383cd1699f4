"""Builds that never finish: unrolling is bounded in lowering (tensorir/passes/unroll.py) and
the one-kernel compile path refuses kernels over a size limit (autosched/kernel.py)."""

import time

import numpy as np
import pytest

import autosched as ansor
from autosched import te
from autosched.kernel import MAX_KERNEL_SIZE_ENV, KernelSizeError, generate_source
from autosched.measure import MeasureInput, MeasureResult
from autosched.measure.records import save_records
from tensorir.loops import For, walk_stmts
from tensorir.lower import lower
from tensorir.passes.unroll import MAX_UNROLLED_SIZE

N = 64
BUILD_SECONDS = 20  # before the bound: over 6.5 minutes of LLVM for each of these


def _matmul(n=N):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return ansor.ComputeDAG([A, B, C])


def _unrolled_by_hand(dag):
    s = dag.get_init_state()
    for it in s.stages[-1].iters:
        s.unroll("C", it)
    return s


def _pragma_unroll(dag, step=10**9):
    s = dag.get_init_state()
    s.pragma("C", s.stages[-1].iters[0], f"auto_unroll_max_step${step}")
    return s


def _build_and_check(state, n=N):
    start = time.perf_counter()
    func = ansor.build(state, "llvm")
    assert time.perf_counter() - start < BUILD_SECONDS
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
    c = np.zeros((n, n), "float32")
    func(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def _loop_kinds(state) -> dict:
    return {s.var.name: s.kind for s in walk_stmts(lower(state).body) if isinstance(s, For)}


def test_unroll_by_hand_of_a_64_cubed_matmul_stays_bounded():
    state = _unrolled_by_hand(_matmul())
    kinds = _loop_kinds(state)
    # k (64 stores) is unrolled; j (64 * 65) and i would exceed MAX_UNROLLED_SIZE: loops.
    assert sorted(kinds.values()) == ["serial", "serial", "unrolled"], kinds
    assert 64 <= MAX_UNROLLED_SIZE < 64 * 65
    _build_and_check(state)


def test_small_unroll_by_hand_is_kept():
    kinds = _loop_kinds(_unrolled_by_hand(_matmul(4)))
    assert set(kinds.values()) == {"unrolled"}, kinds


def test_pragma_auto_unroll_max_step_of_a_billion_stays_bounded():
    state = _pragma_unroll(_matmul())
    assert "serial" in _loop_kinds(state).values()
    _build_and_check(state)


def test_log_record_with_a_huge_unroll_builds_in_seconds(tmp_path):
    dag = _matmul()
    task = ansor.SearchTask(compute_dag=dag, target="llvm")
    log = tmp_path / "unroll.json"
    save_records(log, [MeasureInput(task, _pragma_unroll(dag))], [MeasureResult(costs=(1e-3,))])
    _build_and_check(task.apply_best(str(log)))


def test_kernel_over_the_size_limit_is_refused_by_name(monkeypatch):
    state = _unrolled_by_hand(_matmul(16))
    with pytest.raises(KernelSizeError) as info:
        ansor.build(state, "llvm", max_kernel_size=1000)
    msg = str(info.value)
    assert "\n" not in msg and "kernel 'main'" in msg and "stage 'C'" in msg
    assert "exceed the limit 1000" in msg and MAX_KERNEL_SIZE_ENV in msg
    monkeypatch.setenv(MAX_KERNEL_SIZE_ENV, "1000")
    with pytest.raises(KernelSizeError, match="limit 1000"):
        generate_source(state, "llvm")
    monkeypatch.setenv(MAX_KERNEL_SIZE_ENV, "lots")
    with pytest.raises(
        ValueError, match=f"{MAX_KERNEL_SIZE_ENV}='lots' is invalid: expected a positive int"
    ):
        generate_source(state, "llvm")
    monkeypatch.delenv(MAX_KERNEL_SIZE_ENV)
    generate_source(state, "llvm")  # the default limit leaves room for it
