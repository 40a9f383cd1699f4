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
from tensorir.loops import For, stmt_children, walk_stmts
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


def _largest_unrolled_nest(stmt) -> int:
    """Stores the largest outermost unrolled loop nest of ``stmt`` expands to."""

    def stores(s) -> int:
        if isinstance(s, For):
            return (s.extent if s.kind == "unrolled" else 1) * stores(s.body)
        return 1 if type(s).__name__ == "Store" else sum(stores(c) for c in stmt_children(s))

    def visit(s) -> int:
        if isinstance(s, For) and s.kind == "unrolled":
            return stores(s)
        return max((visit(c) for c in stmt_children(s)), default=0)

    return visit(stmt)


@pytest.fixture(scope="module")
def resnet_conv_candidates():
    """GPU candidates of resnet-18's 1x1 stride-2 conv2d task, sampled as the search does."""
    import warnings

    from autosched import networks
    from autosched.hardware import GPU_DEFAULTS, HardwareParams
    from autosched.search.annotate import sample_init_population
    from autosched.search.sketch import generate_sketches

    mod, params, _, _ = networks.get_network("resnet-18", batch_size=1, layout="NHWC")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks, _ = ansor.extract_tasks(
            mod, params, "cuda", hardware_params=HardwareParams(**GPU_DEFAULTS)
        )
    task = tasks[3]  # fused_conv2d: the task of benchmarks/nvcc_build_times.py's 79 s candidate
    assert task.desc == "fused_conv2d"
    return sample_init_population(task, generate_sketches(task), 8, 3)


def test_vthread_copies_count_against_the_unroll_bound(resnet_conv_candidates):
    """Virtual-thread injection copies the register tile once per virtual thread; the unroll
    pass counts those copies (as TVM, which unrolls after injecting), so no unrolled nest of the
    generated kernel exceeds MAX_UNROLLED_SIZE stores. Before, a 2x14x7x2 accumulation nest
    under 8 virtual threads unrolled to 3136 statements on 1568 accumulators: over a minute of
    nvcc."""
    from tensorir.passes.inject_vthread import inject_virtual_threads_program

    sizes = []
    for state in resnet_conv_candidates:
        program = inject_virtual_threads_program(lower(state))
        sizes.append(_largest_unrolled_nest(program.body))
    assert max(sizes) <= MAX_UNROLLED_SIZE, sizes
    assert max(sizes) > 64  # the candidates do unroll (the bound is what is tested)
