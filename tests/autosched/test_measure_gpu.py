"""GPU measurement without a GPU: LocalRPCMeasureContext on OpenCL (PoCL), nvcc cubin builds.

The same on CUDA is in tests/gpu/test_measure_cuda.py.
"""

import shutil

import pytest

from autosched.manual import elementwise_gpu
from autosched.measure import (
    MAX_COST,
    LocalBuilder,
    LocalRPCMeasureContext,
    MeasureErrorNo,
    MeasureInput,
)
from autosched.workloads import matmul_relu
from tensorir.dag import ComputeDAG

E = MeasureErrorNo


class _Task:
    """The attributes measuring needs from a SearchTask (no hardware probing)."""

    def __init__(self, dag, target):
        self.compute_dag = dag
        self.workload_key = dag.workload_key
        self.target = target


def gpu_matmul_relu(dag, threads: int):
    """One thread per output element of C (k stays a serial loop), then the relu."""
    s = dag.get_init_state()
    i, j, _ = s["C"].iters
    bx, tx = s.split("C", s.fuse("C", [i, j]), [threads])
    s.bind("C", bx, "blockIdx.x")
    s.bind("C", tx, "threadIdx.x")
    return elementwise_gpu(s, "T_relu", threads)


def _opencl_is_gpu() -> bool:
    from runtime import device

    return bool(device("opencl").properties["is_gpu"])


@pytest.fixture(scope="module")
def dag():
    return ComputeDAG(matmul_relu(64, 64, 32))


@pytest.fixture(scope="module")
def opencl_ctx():
    pytest.importorskip("pyopencl")
    from runtime import device

    if not device("opencl").exists:
        pytest.skip("no usable OpenCL device")
    # min_repeat_ms=20 keeps the test short; timeout covers PoCL's program build on a busy box.
    with LocalRPCMeasureContext(min_repeat_ms=20, timeout=8, n_parallel=2) as ctx:
        yield ctx


def test_opencl_candidates_measure_and_faults_become_records(opencl_ctx, dag):
    task = _Task(dag, "opencl")
    threads = [32, 64, 128, 32, 64, 128, 256, 16]
    inputs = [MeasureInput(task, gpu_matmul_relu(dag, t)) for t in threads]
    built = opencl_ctx.builder.build(inputs)
    assert [b.error_no for b in built] == [E.NO_ERROR] * len(inputs)
    assert built[0].source["lang"] == "opencl" and "binary" not in built[0].source
    runner = opencl_ctx.runner
    runner.test_faults = {1: "raise", 3: "wrong", 4: "segfault", 5: "hang", 6: "device_fault"}
    pids = []
    try:
        results = []
        for inp, br in zip(inputs, built):  # one by one, to see which ones replace the worker
            results += runner.run([inp], [br])
            runner.test_faults = {i - 1: f for i, f in runner.test_faults.items() if i > 0}
            pids.append(runner._proc.proc.pid if runner._proc else None)
    finally:
        runner.test_faults = {}
    assert [r.error_no for r in results] == [
        E.NO_ERROR,
        E.RUNTIME_DEVICE,  # an exception: the OpenCL queue still works, the worker stays
        E.NO_ERROR,
        E.WRONG_ANSWER,
        E.RUNTIME_DEVICE,  # segfault: the worker died
        E.RUN_TIMEOUT,  # hang: killed after the timeout
        E.RUNTIME_DEVICE,  # an out-of-bounds kernel (PoCL runs it in-process: SIGSEGV)
        E.NO_ERROR,  # a fresh worker measures the next candidate
    ], [r.error_msg[:200] for r in results]
    assert pids[0] == pids[1] == pids[2] == pids[3] and pids[4] is None and pids[5] is None
    assert pids[7] is not None and pids[7] != pids[0]
    assert "RuntimeError: injected fault" in results[1].error_msg
    assert "'T_relu' differs" in results[3].error_msg
    assert "signal 11" in results[4].error_msg
    if not _opencl_is_gpu():  # PoCL runs kernels in-process: the bad write kills the worker
        assert pids[6] is None and "signal 11" in results[6].error_msg
    assert "did not finish within 8 s" in results[5].error_msg
    for r in results:
        if r.error_no == E.NO_ERROR:
            assert len(r.costs) == 1 and 0 < r.costs[0] < 0.1 and r.all_cost > 0
        else:
            assert r.costs == (MAX_COST,)


def test_context_plugs_into_a_measurer_and_closes(dag):
    pytest.importorskip("pyopencl")
    from autosched.tuning import TuningOptions
    from runtime import device

    if not device("opencl").exists:
        pytest.skip("no usable OpenCL device")
    task = _Task(dag, "opencl")
    ctx = LocalRPCMeasureContext(repeat=2, min_repeat_ms=5, timeout=60, n_parallel=1)
    opts = TuningOptions(runner=ctx.runner, builder=ctx.builder)
    measurer = opts.make_measurer()
    assert measurer.runner is ctx.runner and measurer.builder is ctx.builder
    res = measurer.measure([MeasureInput(task, gpu_matmul_relu(dag, 64))])
    assert res[0].error_no == E.NO_ERROR, res[0].error_msg
    # 2 repeats, and one again per tick-sized outlier among them (a busy machine)
    assert 2 <= len(res[0].costs) <= 4 and measurer.best_cost[dag.workload_key] < MAX_COST
    assert ctx.runner._proc is not None and ctx.builder._pool is not None
    ctx.close()
    assert ctx.runner._proc is None and ctx.builder._pool is None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_builder_compiles_cuda_to_a_cubin(dag):
    task = _Task(dag, "cuda -arch=sm_80")
    bad_arch = _Task(dag, "cuda -arch=sm_1")
    inputs = [
        MeasureInput(task, gpu_matmul_relu(dag, 64)),
        MeasureInput(bad_arch, gpu_matmul_relu(dag, 32)),
    ]
    with LocalBuilder(timeout=60, n_parallel=2) as b:
        good, bad = b.build(inputs)
    assert good.error_no == E.NO_ERROR, good.error_msg
    assert good.source["lang"] == "cuda" and good.source["binary"][:4] == b"\x7fELF"
    assert len(good.source["binary"]) > 1000
    assert bad.error_no == E.COMPILE_DEVICE and bad.source is None
    assert ("nvcc" in bad.error_msg or "NVRTC" in bad.error_msg) and "sm_1" in bad.error_msg
