"""The AutoTVM tuners, records and dispatch on a model landscape (no real measurement).

The "device" here is a deterministic cost function of a configuration's State (read from its
split steps), so the tuners can be compared quickly and reproducibly: the fastest
configuration is tile_y = 8, tile_x = 16, vectorized, and the cost grows with the distance
from it (log scale) plus a little deterministic noise.
"""

import json
import math

import numpy as np
import pytest

import autosched as ansor
from autosched import autotvm
from autosched.autotvm.tuner import GATuner, GridSearchTuner, RandomTuner, XGBTuner
from autosched.measure.data import BuildResult, MeasureResult
from tensorir.steps import AnnotationStep, SplitStep


@autotvm.template("test/tuner_matmul")
def tuner_matmul(n, red, m):
    A = ansor.te.placeholder((n, red), name="A")
    B = ansor.te.placeholder((red, m), name="B")
    k = ansor.te.reduce_axis((0, red), name="k")
    C = ansor.te.compute((n, m), lambda i, j: ansor.te.sum(A[i, k] * B[k, j], axis=k), "C")
    s = ansor.ComputeDAG([A, B, C]).get_init_state()
    cfg = autotvm.get_config()
    y, x, kk = s[C].iters
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    cfg.define_knob("vec", [False, True])
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s.reorder(C, [yo, xo, kk, yi, xi])
    if cfg["vec"].val:
        s.vectorize(C, xi)
    return s, [A, B, C]


def model_cost(state) -> float:
    """Seconds the model device takes for a configuration's State."""
    splits = [st.lengths[0] for st in state.steps if isinstance(st, SplitStep)]
    vec = any(isinstance(st, AnnotationStep) for st in state.steps)
    yi, xi = splits
    dist = (math.log2(yi) - 3) ** 2 + (math.log2(xi) - 4) ** 2 + (0 if vec else 1.5)
    noise = (yi * 7 + xi * 13 + vec * 5) % 11 / 100
    return 1e-3 * (1 + dist + noise)


class ModelBuilder:
    n_parallel = 4

    def build(self, inputs):
        return [BuildResult({}) for _ in inputs]


class ModelRunner:
    def run(self, inputs, build_results):
        return [MeasureResult((model_cost(inp.state),), 0, "", 0.0, 1.0) for inp in inputs]


OPTION = {"builder": ModelBuilder(), "runner": ModelRunner()}
ARGS = (256, 64, 256)


def _task():
    return autotvm.task.create("test/tuner_matmul", ARGS, target="llvm")


def _best_cost(tuner, n_trial):
    tuner.tune(n_trial, measure_option=OPTION)
    return tuner.task.flop / tuner.best_flops


def _random_best(n_trial, seeds=(0, 1, 2)):
    """The median best of random search over a few seeds: the bar every tuner must clear."""
    return float(np.median([_best_cost(RandomTuner(_task(), seed=s), n_trial) for s in seeds]))


def test_space_of_the_model_task():
    assert len(_task().config_space) == 9 * 9 * 2


def test_xgb_knob_tuner_beats_random():
    task = _task()
    best = _best_cost(XGBTuner(task, plan_size=12, feature_type="knob", seed=0), 36)
    optimum = min(model_cost(task.instantiate(task.config_space.get(i))[0])
                  for i in range(len(task.config_space)))  # fmt: skip
    assert best <= _random_best(36)
    assert best <= optimum * 1.05  # the model finds (nearly) the optimum in 36 of 162 trials


def test_xgb_itervar_tuner_beats_random():
    task = _task()
    tuner = XGBTuner(task, plan_size=12, feature_type="itervar", seed=0)
    tuner.optimizer = autotvm.tuner.SimulatedAnnealingOptimizer(
        task, n_iter=8, parallel_size=24, early_stop=4, seed=0
    )
    assert _best_cost(tuner, 36) <= _random_best(36)


def test_ga_tuner_beats_random():
    best = _best_cost(GATuner(_task(), pop_size=12, elite_num=2, mutation_prob=0.2, seed=0), 48)
    assert best <= _random_best(48)


def test_grid_search_covers_the_space_and_finds_the_optimum():
    task = _task()
    tuner = GridSearchTuner(task)
    best = _best_cost(tuner, len(task.config_space) + 10)
    assert len(tuner.visited) == len(task.config_space)
    assert not tuner.has_next()
    optimum = min(model_cost(task.instantiate(task.config_space.get(i))[0])
                  for i in range(len(task.config_space)))  # fmt: skip
    assert best == pytest.approx(optimum)
    assert tuner.best_config["tile_y"].size == [-1, 8]
    assert tuner.best_config["tile_x"].size == [-1, 16]
    assert tuner.best_config["vec"].val is True


def test_random_tuner_measures_each_config_once():
    task = _task()
    tuner = RandomTuner(task, seed=3)
    tuner.tune(40, measure_option=OPTION)
    assert len(tuner.visited) == 40 and len(tuner.trace) == 40
    assert tuner.trace == sorted(tuner.trace)  # best-so-far never falls


def test_early_stopping_stops():
    tuner = RandomTuner(_task(), seed=0)
    tuner.tune(160, measure_option=OPTION, early_stopping=8)
    assert len(tuner.trace) < 160
    assert len(tuner.trace) - 1 - tuner.best_iter <= 8 + ModelBuilder.n_parallel


def test_records_pick_best_and_apply_history_best(tmp_path):
    task = _task()
    log, best_log = tmp_path / "t.log", tmp_path / "best.log"
    tuner = RandomTuner(task, seed=1)
    tuner.tune(20, measure_option=OPTION, callbacks=[autotvm.callback.log_to_file(log)])
    lines = log.read_text().splitlines()
    assert len(lines) == 20
    first = json.loads(lines[0])
    assert first["kind"] == "autotvm" and first["config"]["task"] == "test/tuner_matmul"
    # the auto-scheduler's loader reads the same lines: same DAG key, replayable steps
    shared = list(ansor.load_records(log, dags=[task.compute_dag]))
    assert len(shared) == 20
    assert {inp.task.workload_key for inp, _ in shared} == {task.compute_dag.workload_key}
    state = shared[0][0].state.to_state()
    assert model_cost(state) == pytest.approx(shared[0][1].costs[0])

    loaded = list(autotvm.record.load_from_file(log))
    assert [inp.config.index for inp, _ in loaded] == [
        json.loads(x)["config"]["index"] for x in lines
    ]
    # a loaded record encodes back to the same line (steps included)
    assert autotvm.record.encode(*loaded[0]) == lines[0]
    assert autotvm.record.pick_best(log, best_log) == 1
    ((best_inp, best_res),) = autotvm.record.load_from_file(best_log)
    assert best_inp.config == tuner.best_config
    assert best_res.mean_cost == pytest.approx(task.flop / tuner.best_flops)

    with autotvm.apply_history_best(best_log) as ctx, ansor.Target("llvm"):
        s, tensors = tuner_matmul(*ARGS)
    assert ctx.hits == 1
    assert model_cost(s) == pytest.approx(best_res.mean_cost)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (256, 64)).astype("float32")
    b = rng.uniform(-1, 1, (64, 256)).astype("float32")
    c = np.full((256, 256), np.nan, "float32")
    ansor.build(s, "llvm")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_tophub_context_applies_extra_files(tmp_path):
    log = tmp_path / "t.log"
    tuner = RandomTuner(_task(), seed=4)
    tuner.tune(6, measure_option=OPTION, callbacks=[autotvm.callback.log_to_file(log)])
    autotvm.task.TaskExtractEnv()  # the seed calls it before registering templates
    target = ansor.Target("llvm")
    with autotvm.tophub.context(target, extra_files=[str(log)]) as ctx, target:
        s, _ = tuner_matmul(*ARGS)
    assert ctx.hits == 1
    assert model_cost(s) == pytest.approx(_task().flop / tuner.best_flops)


def test_apply_history_best_falls_back_once_for_a_missing_workload(tmp_path):
    log = tmp_path / "t.log"
    RandomTuner(_task(), seed=1).tune(
        4, measure_option=OPTION, callbacks=[autotvm.callback.log_to_file(log)]
    )
    with (
        autotvm.apply_history_best(log),
        ansor.Target("llvm"),
        pytest.warns(UserWarning, match="fallback") as caught,
    ):
        tuner_matmul(128, 64, 32)
        tuner_matmul(128, 64, 32)
    assert len([w for w in caught if "fallback" in str(w.message)]) == 1


def test_load_history_warm_start_speeds_up_a_second_task():
    """A model trained on the first task's records finds the second task's optimum sooner."""
    first = autotvm.task.create("test/tuner_matmul", (256, 32, 256), "llvm")
    history = []

    class Keep:
        def __call__(self, tuner, inputs, results):
            history.extend(zip(inputs, results, strict=True))

    GridSearchTuner(first).tune(len(first.config_space), measure_option=OPTION,
                                callbacks=[Keep()])  # fmt: skip

    def trials_to_optimum(warm: bool) -> int:
        tuner = XGBTuner(_task(), plan_size=8, feature_type="curve", seed=0)
        tuner.optimizer = autotvm.tuner.SimulatedAnnealingOptimizer(
            tuner.task, n_iter=10, parallel_size=32, early_stop=5, seed=0
        )
        if warm:
            tuner.load_history(history, min_seed_records=50)
            assert tuner.model.base is not None
        tuner.tune(48, measure_option=OPTION)
        best = max(tuner.trace)
        return next(k for k, v in enumerate(tuner.trace) if v == best) + 1

    cold, warm = trials_to_optimum(False), trials_to_optimum(True)
    assert warm < cold
    assert warm <= 8  # the first plan, made by the transferred model, holds the optimum


def test_load_history_needs_enough_records():
    tuner = XGBTuner(_task(), feature_type="knob")
    tuner.load_history([], min_seed_records=1)
    assert tuner.model.base is None


def test_tuner_errors_name_the_argument():
    with pytest.raises(ValueError, match="feature_type"):
        XGBTuner(_task(), feature_type="nope")
    with pytest.raises(ValueError, match="pop_size"):
        GATuner(_task(), pop_size=0)
    with pytest.raises(ValueError, match="n_trial"):
        RandomTuner(_task()).tune(-1, measure_option=OPTION)
    with pytest.raises(TypeError, match="measure_option"):
        RandomTuner(_task()).tune(4, measure_option={"runner": ModelRunner()})
    with pytest.raises(TypeError, match="mod must be a network"):
        autotvm.task.extract_from_program("resnet-18", None, target="llvm")
