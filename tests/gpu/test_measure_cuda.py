"""CUDA measurement: device hardware params, cubins from the builder, LocalRPCMeasureContext,
and a device fault that becomes a record while the next candidate still measures."""

import numpy as np
import pytest

from autosched import hardware, manual
from autosched.hardware import HardwareParams
from autosched.measure import (
    MAX_COST,
    LocalRPCMeasureContext,
    MeasureErrorNo,
    MeasureInput,
)
from autosched.workloads import matmul, matmul_relu
from tensorir.dag import ComputeDAG

E = MeasureErrorNo


class _Task:
    def __init__(self, dag, target="cuda"):
        self.compute_dag = dag
        self.workload_key = dag.workload_key
        self.target = target


def gpu_matmul_relu(dag, threads: int):
    s = dag.get_init_state()
    i, j, _ = s["C"].iters
    bx, tx = s.split("C", s.fuse("C", [i, j]), [threads])
    s.bind("C", bx, "blockIdx.x")
    s.bind("C", tx, "threadIdx.x")
    return manual.elementwise_gpu(s, "T_relu", threads)


@pytest.fixture(scope="module")
def ctx(cuda_backend):
    with LocalRPCMeasureContext(min_repeat_ms=100, timeout=20, n_parallel=4) as c:
        yield c


def test_hardware_params_and_arch_come_from_the_device(cuda_backend):
    from runtime.cuda import query_properties

    hardware.device_properties.cache_clear()
    props = query_properties(0)
    assert props == cuda_backend.properties()  # no context needed for the same answer
    hw = HardwareParams.for_target("cuda")
    assert hw.num_cores == props["multi_processor_count"] > 0
    assert hw.warp_size == 32 and hw.max_vthread_extent == 8
    assert hw.max_threads_per_block == 1024 and hw.max_shared_memory_per_block == 48 * 1024
    assert hardware.cuda_arch("cuda") == cuda_backend.arch
    assert str(hardware.with_device_arch("cuda")) == f"cuda -arch={cuda_backend.arch}"


def matmul_relu_module(m, n, k, seed, arch=None):
    """A loaded CUDA matmul + relu kernel (a cubin for ``arch``, else NVRTC / nvcc's choice)
    with random inputs, checked once against numpy: ``(module, a, b, out)``."""
    from autosched.kernel import generate_source
    from runtime import device, load_module
    from runtime.cuda import compile_cubin

    dag = ComputeDAG(matmul_relu(m, n, k))
    src = generate_source(gpu_matmul_relu(dag, 64), "cuda").as_dict()
    if arch is not None:
        src["binary"] = compile_cubin(src["code"], arch)
    mod = load_module(**src, device=device("cuda"))
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype("float32")
    b = rng.uniform(-1, 1, (k, n)).astype("float32")
    out = np.full((m, n), np.nan, "float32")
    mod(a, b, out)
    np.testing.assert_allclose(out, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)
    return mod, a, b, out


def test_cubin_loads_and_runs_through_bound_launches(cuda_backend):
    mod, a, b, out = matmul_relu_module(128, 96, 64, seed=3, arch=cuda_backend.arch)
    t = mod.time_evaluator(number=20, repeat=3, min_repeat_ms=10)(a, b, out)
    assert all(0 < r < 1e-2 for r in t.results)


def test_a_short_kernel_is_timed_below_the_hosts_launch_rate(cuda_backend):
    """A kernel of a few microseconds, launched back to back from Python, reads as the host's
    issue rate (about 5 us on an H100's host); time_evaluator replays a CUDA graph of runs
    instead, as the network does, and reads the kernel."""
    from runtime.timer import SHORT_RUN_S

    mod, a, b, out = matmul_relu_module(32, 32, 16, seed=4)
    handles, _ = mod._prepare([a, b, out])
    run = mod._bound_run(handles)
    one_by_one = min(mod._backend.time_launches(run, 200) for _ in range(3))
    graphed = mod.time_evaluator(number=20, repeat=3, min_repeat_ms=10)(a, b, out)
    assert one_by_one < SHORT_RUN_S
    assert 0 < graphed.min < one_by_one, (graphed.results, one_by_one)


def test_cuda_candidates_measure_and_a_device_fault_is_a_record(ctx):
    dag = ComputeDAG(matmul_relu(256, 256, 128))
    task = _Task(dag)
    threads = [64, 128, 256, 32, 128, 64]
    inputs = [MeasureInput(task, gpu_matmul_relu(dag, t)) for t in threads]
    built = ctx.builder.build(inputs)
    assert [b.error_no for b in built] == [E.NO_ERROR] * len(inputs), built[0].error_msg
    assert all(b.source["binary"][:4] == b"\x7fELF" for b in built)
    ctx.runner.test_faults = {1: "device_fault", 3: "wrong", 4: "segfault"}
    try:
        results = ctx.runner.run(inputs, built)
    finally:
        ctx.runner.test_faults = {}
    codes = [r.error_no for r in results]
    assert codes == [
        E.NO_ERROR,
        E.RUNTIME_DEVICE,  # illegal address: sticky, the worker is replaced
        E.NO_ERROR,  # ... and the fresh worker measures the next candidate
        E.WRONG_ANSWER,
        E.RUNTIME_DEVICE,  # segfault
        E.NO_ERROR,
    ], [r.error_msg[:300] for r in results]
    assert "illegal" in results[1].error_msg.lower() or "700" in results[1].error_msg
    for r in results:
        if r.error_no == E.NO_ERROR:
            assert len(r.costs) == 1 and 0 < r.costs[0] < 1e-2
        else:
            assert r.costs == (MAX_COST,)
    print("costs (us):", [round(r.costs[0] * 1e6, 2) for r in results if r.error_no == 0])


def test_per_trial_cost(ctx):
    """The measured wall time per candidate (printed; asserted loosely)."""
    import time

    dag = ComputeDAG(matmul(512, 512, 512))
    task = _Task(dag)
    states = []
    for t in (32, 64, 128, 256, 512, 1024, 64, 128):
        s = dag.get_init_state()
        i, j, _ = s["C"].iters
        bx, tx = s.split("C", s.fuse("C", [i, j]), [t])
        s.bind("C", bx, "blockIdx.x")
        s.bind("C", tx, "threadIdx.x")
        states.append(s)
    inputs = [MeasureInput(task, s) for s in states]
    t0 = time.perf_counter()
    built = ctx.builder.build(inputs)
    t1 = time.perf_counter()
    ctx.runner.run(inputs[:1], built[:1])  # the reference for this workload
    t2 = time.perf_counter()
    results = ctx.runner.run(inputs[1:], built[1:])
    t3 = time.perf_counter()
    assert all(r.error_no == E.NO_ERROR for r in results), [r.error_msg for r in results]
    per_trial = (t3 - t2) / len(results)
    print(
        f"build {(t1 - t0) / len(inputs):.3f} s/candidate (parallel), first run {t2 - t1:.2f} s, "
        f"run {per_trial:.3f} s/candidate with min_repeat_ms={ctx.runner.min_repeat_ms:g}"
    )
    assert per_trial < 1.0 + ctx.runner.min_repeat_ms / 1e3


def test_gpu_cache_flush_times_cold_runs_slower_than_warm_ones(ctx):
    """``enable_gpu_cache_flush`` writes twice the L2 before each run: a kernel streaming a
    16 MB weight it reads once per output tile (a GEMV) times slower cold than warm, where
    the warm runs find it in L2."""
    from autosched.measure import LocalRunner

    dag = ComputeDAG(matmul(1, 4096, 1024))  # (1 x 1024) x (1024 x 4096): 16 MB of B
    task = _Task(dag)
    s = dag.get_init_state()
    i, j, _ = s["C"].iters
    bx, tx = s.split("C", s.fuse("C", [i, j]), [128])
    s.bind("C", bx, "blockIdx.x")
    s.bind("C", tx, "threadIdx.x")
    inputs = [MeasureInput(task, s)]
    built = ctx.builder.build(inputs)
    with LocalRunner(number=10, repeat=3, min_repeat_ms=50) as warm_runner:
        [warm] = warm_runner.run(inputs, built)
    with LocalRunner(repeat=5, enable_gpu_cache_flush=True) as cold_runner:
        [cold] = cold_runner.run(inputs, built)
    assert warm.error_no == E.NO_ERROR and cold.error_no == E.NO_ERROR, cold.error_msg
    assert len(cold.costs) >= 5
    print(f"warm {min(warm.costs) * 1e6:.1f} us, cold {min(cold.costs) * 1e6:.1f} us")
    assert min(cold.costs) > min(warm.costs)
