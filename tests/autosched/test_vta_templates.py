"""conv2d_packed.vta / dense_packed.vta as AutoTVM templates, measured by the simulator."""

import re
import warnings

import numpy as np
import pytest

from autosched import autotvm, vta
from autosched.autotvm.space import InstantiationError
from autosched.measure.data import MAX_COST
from autosched.vta.top import tile_config

ENV = vta.get_env()
# A seed task (resnet-18's last stage, 1x1 stride 2), scaled down in space to stay fast.
CONV_ARGS = (
    ("TENSOR", (1, 4, 8, 8, 1, 16), "int8"),
    ("TENSOR", (4, 4, 3, 3, 16, 16), "int8"),
    (1, 1), (1, 1), (1, 1), "NCHW1n16c", "int32",
)  # fmt: skip


def test_conv2d_task_has_the_seeds_knobs_and_measures_in_cycles():
    task = autotvm.task.create("conv2d_packed.vta", CONV_ARGS, target=ENV.target)
    space = task.config_space
    assert list(space.space_map) == list(vta.top.templates.KNOBS)
    # splits of 1, 8, 8, 4, 4 into [-1, inner] exact factors, and two 2-way knobs
    assert len(space) == 1 * 4 * 4 * 3 * 3 * 2 * 2
    runner = vta.SimulatorRunner(check_correctness=True)
    rng = np.random.default_rng(1)
    picks = [space.get(int(i)) for i in rng.choice(len(space), 6, replace=False)]
    results = runner.run(task, picks)
    ok = [r for r in results if r.error_no == 0]
    assert ok, [r.error_msg for r in results]
    for r in results:
        if r.error_no:
            assert r.error_no == 1 and "does not divide" in r.error_msg or "buffer" in r.error_msg
            continue
        assert r.costs[0] == pytest.approx(r.cycles / (ENV.timing.clock_mhz * 1e6))
        assert r.counters["gemm_counter"] == 8 * 8 * 4 * 4 * 9
        assert r.cycles >= r.counters["gemm_counter"]


def test_invalid_threads_are_an_instantiation_error_not_a_crash():
    task = autotvm.task.create("conv2d_packed.vta", CONV_ARGS, target=ENV.target)
    space = task.config_space
    bad = next(
        space.get(i) for i in range(len(space))
        if space.get(i)["tile_co"].size[-1] == 1 and space.get(i)["oc_threading"].val == 2
    )  # fmt: skip
    with pytest.raises(InstantiationError, match="oc_threading=2 does not divide its tile of 1"):
        task.instantiate(bad)
    (result,) = vta.SimulatorRunner().run(task, [bad])
    assert result.error_no == 1 and result.costs == (MAX_COST,)


def test_fallback_config_runs_and_matches_reference():
    task = autotvm.task.create("conv2d_packed.vta", CONV_ARGS, target=ENV.target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ENV.target:
            cfg = autotvm.FallbackContext().query(ENV.target, task.workload)
            task.instantiate(cfg)
    assert tile_config(cfg).tile_h > 1
    (result,) = vta.SimulatorRunner(check_correctness=True).run(task, [cfg])
    assert result.error_no == 0, result.error_msg


def test_dense_packed_template():
    args = (("TENSOR", (1, 8, 1, 16), "int8"), ("TENSOR", (6, 8, 16, 16), "int8"), "int32")
    task = autotvm.task.create("dense_packed.vta", args, target=ENV.target)
    results = vta.SimulatorRunner(check_correctness=True).run(
        task, [task.config_space.get(i) for i in range(len(task.config_space))]
    )
    assert list(task.config_space.space_map) == ["tile_b", "tile_ci", "tile_co", "oc_threading"]
    assert all(r.error_no == 0 for r in results if r.error_no != 1)
    # ci tiles 1, 2, 4, 8; co tiles 1, 2, 3, 6, of which 1 and 3 cannot take oc_threading=2
    assert sum(r.error_no == 0 for r in results) == 4 * (4 * 2 - 2)
    cycles = {r.cycles for r in results if r.error_no == 0}
    assert len(cycles) > 1  # the knobs change the schedule


@pytest.mark.parametrize("tuner_name", ["xgb", "ga", "random", "gridsearch"])
def test_autotvm_tuners_tune_a_vta_task_on_the_simulator(tuner_name, tmp_path):
    from autosched.autotvm import tuner as tuners

    task = autotvm.task.create("conv2d_packed.vta", CONV_ARGS, target=ENV.target)
    make = {
        "xgb": lambda t: tuners.XGBTuner(t, loss_type="rank"),
        "ga": lambda t: tuners.GATuner(t, pop_size=8),
        "random": tuners.RandomTuner,
        "gridsearch": tuners.GridSearchTuner,
    }[tuner_name]
    tuner = make(task)
    log, best_log = tmp_path / "vta.log", tmp_path / "best.log"
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2),
                                    runner=vta.SimulatorRunner())  # fmt: skip
    tuner.tune(6, measure_option=option, callbacks=[autotvm.callback.log_to_file(str(log))])
    assert len(log.read_text().splitlines()) == 6
    autotvm.record.pick_best(str(log), str(best_log))
    with autotvm.apply_history_best(str(best_log)):
        cfg = autotvm.DispatchContext.current.query(ENV.target, task.workload)
    assert cfg == tuner.best_config
    (result,) = vta.SimulatorRunner().run(task, [cfg])
    assert result.cycles == pytest.approx(task.flop / tuner.best_flops * 100e6)


def test_a_program_over_the_memory_limit_is_refused_before_it_runs():
    task = autotvm.task.create("conv2d_packed.vta", CONV_ARGS, target=ENV.target)
    cfg = task.config_space.get(0)
    (refused,) = vta.SimulatorRunner(max_memory=1 << 20).run(task, [cfg])
    assert refused.error_no == 3 and refused.costs == (MAX_COST,) and refused.cycles == 0
    message = r"the program needs about \d+ MiB to simulate, over the limit of 1 MiB "
    assert re.fullmatch(message + r"\(max_memory / AUTOSCHED_VTA_MAX_MEMORY\)", refused.error_msg)
    (ran,) = vta.SimulatorRunner().run(task, [cfg])
    assert ran.error_no == 0 and ran.cycles > 0
