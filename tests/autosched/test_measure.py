"""LocalBuilder / LocalRunner / measure: every failure becomes a result, the batch goes on."""

import numpy as np
import pytest

from autosched.measure import (
    MAX_COST,
    LocalBuilder,
    LocalRunner,
    MeasureErrorNo,
    MeasureInput,
    ProgramMeasurer,
    measure,
    worker,
)
from autosched.measure.records import RecordToFile, load_records
from autosched.workloads import matmul, matmul_relu
from tensorir.dag import ComputeDAG
from tensorir.schedule import State
from tensorir.steps import SplitStep

E = MeasureErrorNo


class _Task:
    """The attributes measuring needs from a SearchTask (no hardware probing)."""

    def __init__(self, dag, target="llvm"):
        self.compute_dag = dag
        self.workload_key = dag.workload_key
        self.target = target


@pytest.fixture(scope="module")
def builder():
    with LocalBuilder(timeout=20, n_parallel=2) as b:
        yield b


@pytest.fixture(scope="module")
def runner():
    # min_repeat_ms=0: on a loaded machine one lucky fast repeat would otherwise raise `number`
    # a thousandfold and the next, slow, repeat could run past the 2 s timeout.
    with LocalRunner(number=2, repeat=2, min_repeat_ms=0, timeout=2) as r:
        yield r


@pytest.fixture(scope="module")
def task():
    return _Task(ComputeDAG(matmul(64, 64, 64)))


@pytest.fixture(scope="module")
def relu_task():
    return _Task(ComputeDAG(matmul_relu(32, 48, 16)))


def tiled(dag, factor):
    s = dag.get_init_state()
    C = dag.compute_ops[0].name
    io, _ = s.split(C, 0, [factor])
    s.parallel(C, io)
    return s


def invalid(dag):
    # Steps are not checked until replayed: stage 9 does not exist.
    return State(dag, dag.get_init_state().stages, steps=(SplitStep(9, 0, 64, (8,), True),))


def test_worker_error_codes_match_the_enum():
    assert worker.INSTANTIATION_ERROR == E.INSTANTIATION_ERROR
    assert worker.COMPILE_HOST == E.COMPILE_HOST
    assert worker.COMPILE_DEVICE == E.COMPILE_DEVICE
    assert worker.RUNTIME_DEVICE == E.RUNTIME_DEVICE
    assert worker.WRONG_ANSWER == E.WRONG_ANSWER
    assert worker.BUILD_TIMEOUT == E.BUILD_TIMEOUT


def test_builder_builds_and_reports_invalid_steps(builder, task):
    dag = task.compute_dag
    inputs = [MeasureInput(task, s) for s in (tiled(dag, 8), invalid(dag), dag.get_init_state())]
    good, bad, plain = builder.build(inputs)
    assert good.error_no == E.NO_ERROR and plain.error_no == E.NO_ERROR
    assert good.source["lang"] == "llvm" and "define" in good.source["code"]
    assert [p[0] for p in good.source["params"]] == ["A", "B", "C"]
    assert good.time_cost > 0
    assert bad.error_no == E.INSTANTIATION_ERROR and bad.source is None
    assert "ScheduleError" in bad.error_msg and "stage id 9" in bad.error_msg


def test_builder_timeout():
    dag = ComputeDAG(matmul_relu(64, 64, 64))
    # 10 microseconds: the worker's alarm fires during replay or lowering, never after.
    with LocalBuilder(timeout=1e-5, n_parallel=1) as b:
        [res] = b.build([MeasureInput(_Task(dag), tiled(dag, 8))])
    assert res.error_no == E.BUILD_TIMEOUT and res.source is None
    assert "did not finish within" in res.error_msg


def test_faulty_candidates_become_errors_and_the_batch_goes_on(builder, runner, task, relu_task):
    dag = task.compute_dag
    states = [tiled(dag, 8), tiled(dag, 4), tiled(dag, 16), tiled(dag, 2), dag.get_init_state()]
    inputs = [MeasureInput(task, s) for s in states]
    inputs += [MeasureInput(relu_task, tiled(relu_task.compute_dag, 4))]
    inputs += [MeasureInput(task, invalid(dag)), MeasureInput(task, tiled(dag, 32))]
    built = builder.build(inputs)
    runner.test_faults = {1: "segfault", 2: "hang", 3: "wrong", 4: "raise"}
    try:
        results = runner.run(inputs, built)
    finally:
        runner.test_faults = {}
    codes = [r.error_no for r in results]
    assert codes == [
        E.NO_ERROR,
        E.RUNTIME_DEVICE,  # segfault: the worker died and was replaced
        E.RUN_TIMEOUT,  # hang: killed after 2 s
        E.WRONG_ANSWER,
        E.RUNTIME_DEVICE,  # a Python exception while running
        E.NO_ERROR,  # another workload, after two worker restarts
        E.INSTANTIATION_ERROR,  # passed through from the builder
        E.NO_ERROR,
    ]
    assert "measuring process died with signal 11 (SIGSEGV)" in results[1].error_msg
    assert "did not finish within 2 s" in results[2].error_msg
    assert "max abs error 1" in results[3].error_msg and "'C'" in results[3].error_msg
    assert "RuntimeError: injected fault" in results[4].error_msg
    for r in results:
        assert r.timestamp > 0 and r.all_cost > 0
        if r.error_no == E.NO_ERROR:
            # 2 repeats, and one again per tick-sized outlier among them
            assert 2 <= len(r.costs) <= 4 and all(0 < c < 1 for c in r.costs)
            assert r.mean_cost < MAX_COST
        else:
            assert r.costs == (MAX_COST,) and r.mean_cost == MAX_COST
    assert results[2].all_cost >= 2.0


def test_a_slow_first_compile_is_not_counted_against_the_run_timeout(builder, task):
    # A cold compiler on a busy machine (PoCL's first build was seen at 18 s): loading takes
    # longer than the run timeout, the candidate is still measured.
    inputs = [MeasureInput(task, tiled(task.compute_dag, 8))]
    slow = worker.SLOW_LOAD_S
    with LocalRunner(number=1, repeat=1, min_repeat_ms=0, timeout=slow / 2) as r:
        r.test_faults = {0: "slow_load"}
        [res] = r.run(inputs, builder.build(inputs))
    assert res.error_no == E.NO_ERROR, res.error_msg
    assert res.all_cost >= slow  # the load was really slower than the run timeout


def test_loading_past_compile_timeout_is_run_timeout_naming_it(builder, task):
    inputs = [MeasureInput(task, tiled(task.compute_dag, 8))]
    with LocalRunner(number=1, repeat=1, min_repeat_ms=0, compile_timeout=1) as r:
        r.test_faults = {0: "slow_load"}
        [res] = r.run(inputs, builder.build(inputs))
    assert res.error_no == E.RUN_TIMEOUT
    assert "compile_timeout=1 s" in res.error_msg and "loading" in res.error_msg
    with pytest.raises(ValueError, match="compile_timeout"):
        LocalRunner(compile_timeout=0)


def test_unknown_fault_name_is_rejected(runner, builder, task):
    inputs = [MeasureInput(task, tiled(task.compute_dag, 8))]
    runner.test_faults = {0: "explode"}
    try:
        with pytest.raises(ValueError, match="unknown test fault"):
            runner.run(inputs, builder.build(inputs))
    finally:
        runner.test_faults = {}


def test_cache_flush_times_one_cold_run_per_repeat(builder, task):
    inputs = [MeasureInput(task, tiled(task.compute_dag, 8))]
    with LocalRunner(repeat=3, timeout=10, enable_cpu_cache_flush=True) as r:
        [res] = r.run(inputs, builder.build(inputs))
    assert res.error_no == E.NO_ERROR, res.error_msg
    # 3 repeats, plus one again for each tick-sized outlier among them (a busy machine)
    assert 3 <= len(res.costs) <= 6 and all(c > 0 for c in res.costs)


def test_check_output_tolerance_and_message():
    ref = np.linspace(-50, 50, 12, dtype=np.float32).reshape(3, 4)
    assert worker.check_output("C", ref + 1e-3, ref) is None  # within atol scaled by |ref|
    bad = ref.copy()
    bad[2, 1] += 5
    msg = worker.check_output("C", bad, ref)
    assert "1 of 12 elements" in msg and "max abs error 5" in msg and "(2, 1)" in msg
    nan = ref.copy()
    nan[0, 0] = np.nan  # an output the kernel never wrote
    assert "at index (0, 0)" in worker.check_output("C", nan, ref)
    ints = np.arange(6, dtype=np.int32)
    assert worker.check_output("D", ints.copy(), ints) is None
    assert "max abs error 1" in worker.check_output("D", ints + (ints == 3), ints)


def test_random_inputs_are_reproducible_and_not_trivial():
    dag = ComputeDAG(matmul(8, 8, 8))
    a = worker.random_inputs(dag)
    b = worker.random_inputs(dag)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert all(x.min() < -0.5 and x.max() > 0.5 for x in a)
    ints = worker.random_inputs(ComputeDAG(matmul(8, 8, 8, dtype="int32")))
    assert all(x.dtype == np.int32 and x.min() >= 1 and len(np.unique(x)) > 2 for x in ints)


def test_measure_fills_results_records_and_time_split(tmp_path, builder, runner, task, relu_task):
    log = tmp_path / "log.json"
    inputs = [
        MeasureInput(task, tiled(task.compute_dag, 8)),
        MeasureInput(relu_task, tiled(relu_task.compute_dag, 4)),
        MeasureInput(task, invalid(task.compute_dag)),
    ]
    with RecordToFile(log) as rec:
        measurer = ProgramMeasurer(builder, runner, callbacks=[rec])
        results = measurer.measure(inputs)
    assert [r.error_no for r in results] == [E.NO_ERROR, E.NO_ERROR, E.INSTANTIATION_ERROR]
    stats = measurer.stats
    assert stats.measured == 3 and stats.errors == 1
    assert stats.build_s > 0 and stats.run_s > 0 and "3 measured (1 errors)" in str(stats)
    assert measurer.best_cost[task.workload_key] == results[0].mean_cost
    assert measurer.best_input[relu_task.workload_key] is inputs[1]
    loaded = list(load_records(log))
    assert [r for _, r in loaded] == results
    assert str(loaded[0][0].state.to_state()) == str(inputs[0].state)  # DAG registered on write
    # the one-shot helper gives the same kinds of results
    again = measure(inputs[:1], builder, runner)
    assert again[0].error_no == E.NO_ERROR and again[0].mean_cost > 0


def test_a_replacement_worker_gets_the_reference_from_the_runner(builder, runner, task):
    inputs = [MeasureInput(task, tiled(task.compute_dag, f)) for f in (8, 4, 16)]
    built = builder.build(inputs)
    runner.test_faults = {1: "segfault"}
    try:
        first, crashed = runner.run(inputs[:2], built[:2])
    finally:
        runner.test_faults = {}
    assert (first.error_no, crashed.error_no) == (E.NO_ERROR, E.RUNTIME_DEVICE)
    _, ref_outputs = runner._refs.get(task.workload_key)
    assert ref_outputs[0].shape == (64, 64)
    # Spoil the runner's copy: the fresh worker must use it rather than recompute it.
    ref_outputs[0][0, 0] += 100
    try:
        [after] = runner.run(inputs[2:], built[2:])
    finally:
        ref_outputs[0][0, 0] -= 100
    assert after.error_no == E.WRONG_ANSWER and "max abs error 100" in after.error_msg


def test_gpu_cache_flush_on_a_device_without_one_is_a_clear_error(builder, task):
    """The GPU flush is CUDA's: on the CPU each candidate fails with an error that says so,
    and tuning goes on."""
    inputs = [MeasureInput(task, tiled(task.compute_dag, 8))]
    with LocalRunner(repeat=2, timeout=10, enable_gpu_cache_flush=True) as r:
        [res] = r.run(inputs, builder.build(inputs))
    assert res.error_no != E.NO_ERROR
    assert "enable_gpu_cache_flush" in res.error_msg and "CUDA only" in res.error_msg


def test_gpu_cache_flush_evicts_before_each_cold_run():
    """With ``flush_device`` the worker calls the device backend's flush before each single
    timed run (not the host's), as the CPU flush does with its buffer."""
    from autosched.measure.worker import CandidateRunner

    calls = []

    class Backend:
        kind = "cuda"

        def flush_cache(self):
            calls.append("flush")

        def time_launches(self, fn, number):
            calls.append(("time", number))
            return 1e-5

    class Module:
        _backend = Backend()

        def _prepare(self, args):
            return {}, []

        def _bound_run(self, handles):
            return lambda: None

    runner = CandidateRunner()
    runner.flush_cache = lambda: calls.append("host flush")
    job = {"number": 1, "min_repeat_ms": 0.0, "flush": False, "flush_device": True}
    assert runner._time(Module(), [], job, 3) == [1e-5] * 3
    assert calls == [("time", 1)] + ["flush", ("time", 1)] * 3  # a warm-up, then cold runs


def test_local_rpc_measure_context_passes_the_gpu_cache_flush_on():
    from autosched.measure import LocalRPCMeasureContext

    with LocalRPCMeasureContext(enable_gpu_cache_flush=True, n_parallel=1) as ctx:
        assert ctx.runner.enable_gpu_cache_flush and not ctx.runner.enable_cpu_cache_flush
    with LocalRPCMeasureContext(n_parallel=1) as ctx:
        assert not ctx.runner.enable_gpu_cache_flush
