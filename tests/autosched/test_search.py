"""The search loop: evolution, eps-greedy picking, end-to-end tuning, resume, faults mid-search."""

import numpy as np
import pytest

import autosched as ansor
from autosched import workloads
from autosched.measure import MeasureErrorNo
from autosched.measure.records import load_records, log_ended_cleanly
from autosched.search.evolution import evolutionary_search, pick_states_eps_greedy, state_key
from tensorir.interp import eval_dag

# Small populations keep a round to a few seconds on 2 cores; the defaults are TVM's.
SMALL = ansor.SearchParams(evolutionary_search_population=128, evolutionary_search_num_iters=2)


@pytest.fixture(scope="module")
def task():
    return ansor.SearchTask(ansor.ComputeDAG(workloads.matmul_relu(128, 256, 128)), target="llvm")


class _ScoreBySplit:
    """A model that prefers states whose first split's innermost length is larger."""

    def predict(self, task, states):
        out = []
        for s in states:
            splits = [st for st in s.steps if type(st).__name__ == "SplitStep"]
            out.append(float(splits[0].lengths[-1]) if splits else 0.0)
        return np.array(out)

    def update(self, inputs, results):
        pass


def _policy(task, **kw):
    return ansor.SketchPolicy(task, kw.pop("model", ansor.RandomModel(0)), SMALL, seed=0,
                              verbose=0, **kw)  # fmt: skip


def test_evolution_returns_best_predicted_and_skips_excluded(task):
    pol = _policy(task)
    init = pol.sample_initial_population()
    model = _ScoreBySplit()
    scores = model.predict(task, init)
    exclude = {state_key(init[int(np.argmax(scores))])}
    rng = np.random.default_rng(1)
    best = evolutionary_search(
        task, init, model, pol._mutate, rng, out_size=16, num_iters=2,
        population_size=64, mutation_prob=0.85, exclude=exclude,
    )  # fmt: skip
    assert 0 < len(best) <= 16
    keys = [state_key(s) for s in best]
    assert len(set(keys)) == len(keys) and not exclude & set(keys)
    got = model.predict(task, best)
    assert list(got) == sorted(got, reverse=True)
    # Every returned state scores at least as well as the best non-excluded initial one.
    allowed = [sc for s, sc in zip(init, scores, strict=True) if state_key(s) not in exclude]
    assert got[0] >= max(allowed)


def test_eps_greedy_pick_mixes_random_and_never_repeats(task):
    pol = _policy(task)
    states = pol.sample_initial_population()
    good, rand = states[:20], states[20:40]
    measured = {state_key(good[0])}
    picked = pick_states_eps_greedy(good, rand, 10, eps=0.2, measured=measured)
    keys = [state_key(s) for s in picked]
    assert len(picked) == 10 and len(set(keys)) == 10
    assert state_key(good[0]) not in keys[:1]
    assert sum(k in {state_key(s) for s in rand} for k in keys) == 2
    assert set(keys) <= measured
    assert pick_states_eps_greedy(good[:1], [], 5, 0.0, measured) == []


def _time(func, args):
    # The minimum over repeats: other processes on a 2-core machine only ever add time.
    return min(func.time_evaluator(number=5, repeat=7)(*args).results)


def test_tune_end_to_end_faster_than_unscheduled_and_right(task, tmp_path):
    log = tmp_path / "log.json"
    options = ansor.TuningOptions(
        num_measure_trials=32, num_measures_per_round=16, verbose=0,
        runner=ansor.LocalRunner(number=2, repeat=2, min_repeat_ms=0, timeout=10),
        measure_callbacks=[ansor.RecordToFile(log)],
    )  # fmt: skip
    policy = _policy(task, model=ansor.LGBModel(num_warmup_sample=8))
    best = task.tune(options, policy)
    assert best is not None and policy.num_trials == 32
    records = list(load_records(log))
    assert len(records) == 32 and log_ended_cleanly(log)
    assert len({tuple(map(str, i.state.steps)) for i, _ in records}) == 32  # no re-measuring
    assert sum(r.error_no == MeasureErrorNo.NO_ERROR for _, r in records) >= 24
    assert policy.time_split.search > 0 and policy.time_split.run > 0

    sch = task.apply_best(log)
    dag = task.compute_dag
    rng = np.random.default_rng(5)
    args = [rng.uniform(-1, 1, t.shape).astype("float32") for t in dag.input_tensors]
    out = np.full(dag.output_tensors[0].shape, np.nan, "float32")
    tuned = ansor.build(sch, "llvm")
    tuned(*args, out)
    np.testing.assert_allclose(out, eval_dag(dag, args)[0], rtol=1e-4, atol=1e-4)
    naive = ansor.build(dag, "llvm")
    assert _time(tuned, (*args, out)) < _time(naive, (*args, out))
    code = task.print_best(log)
    assert "split" in code and "s[" in code


def test_resume_preloads_and_never_remeasures(task, tmp_path):
    log = tmp_path / "log.json"

    def run(n, callbacks=()):
        options = ansor.TuningOptions(
            num_measure_trials=n, num_measures_per_round=8, verbose=0,
            runner=ansor.LocalRunner(number=1, repeat=1, min_repeat_ms=0, timeout=10),
            measure_callbacks=[ansor.RecordToFile(log)],
        )  # fmt: skip
        policy = _policy(task, init_search_callbacks=list(callbacks))
        return policy, task.tune(options, policy)

    run(8)
    first = {tuple(map(str, i.state.steps)) for i, _ in load_records(log)}
    policy, _ = run(8, [ansor.PreloadMeasuredStates(log)])
    assert policy.num_trials == 8
    records = list(load_records(log))
    assert len(records) == 16
    second = [tuple(map(str, i.state.steps)) for i, _ in records[8:]]
    assert not first & set(second)


def test_crashing_hanging_and_wrong_kernels_do_not_stop_the_search(task, tmp_path):
    log = tmp_path / "log.json"
    runner = ansor.LocalRunner(number=1, repeat=1, min_repeat_ms=0, timeout=2)
    runner.test_faults = {0: "segfault", 1: "hang", 2: "wrong"}
    options = ansor.TuningOptions(
        num_measure_trials=8, num_measures_per_round=8, verbose=0, runner=runner,
        builder=ansor.LocalBuilder(n_parallel=4), measure_callbacks=[ansor.RecordToFile(log)],
    )  # fmt: skip
    policy = _policy(task)
    best = task.tune(options, policy)
    errors = [r.error_no for _, r in load_records(log)]
    assert len(errors) == 8
    for code in (MeasureErrorNo.RUNTIME_DEVICE, MeasureErrorNo.RUN_TIMEOUT,
                 MeasureErrorNo.WRONG_ANSWER):  # fmt: skip
        assert code in errors
    assert best is not None and policy.best_cost < 1.0
    # The best record is never a faulty one.
    best_inp, best_res = ansor.load_best_record(log, task.workload_key)
    assert best_res.error_no == MeasureErrorNo.NO_ERROR


def test_zero_trials_returns_the_best_predicted_state(task):
    state = ansor.auto_schedule(task, _policy(task), ansor.TuningOptions(verbose=0))
    assert state is not None and state.concrete


def test_short_last_round_searches_a_proportional_population(task):
    # 20 trials at 16 per round: the second round measures 4 and evolves 128 * 4 / 16 = 32.
    class _Spy(_ScoreBySplit):
        sizes: list = []

        def predict(self, task, states):
            self.sizes.append(len(states))
            return super().predict(task, states)

    class _FakeMeasurer:
        class stats:
            build_s = run_s = 0.0

        def measure(self, inputs):
            return [ansor.MeasureResult((1e-3,), 0, "", 0.0, 0.0) for _ in inputs]

    params = ansor.SearchParams(
        evolutionary_search_population=128, evolutionary_search_num_iters=1,
        sample_init_min_population=8,
    )  # fmt: skip
    spy = _Spy()
    pol = ansor.SketchPolicy(task, spy, params, seed=0, verbose=0)
    pol.search(20, None, 16, _FakeMeasurer())
    assert pol.num_trials == 20
    # Generation 1 of each round is the sampled population (plus seeds); generation 2 is exact.
    assert spy.sizes[1] == 128 and spy.sizes[3] == 32
    assert pol._round_population(16, 16) is None and pol._round_population(1, 64) == 8


def test_time_budget_stops_the_search_between_rounds(task, monkeypatch):
    """``max_seconds``: the round in flight finishes, no new one starts (a fake clock that
    advances one second per reading)."""
    import autosched.search.policy as sp

    ticks = iter(range(10**6))
    monkeypatch.setattr(sp, "time", type("Clock", (), {"perf_counter": lambda: next(ticks)}))

    class _FakeMeasurer:
        class stats:
            build_s = run_s = 0.0

        def measure(self, inputs):
            return [ansor.MeasureResult((1e-3,), 0, "", 0.0, 0.0) for _ in inputs]

    params = ansor.SearchParams(evolutionary_search_population=16, sample_init_min_population=8)
    pol = ansor.SketchPolicy(task, _ScoreBySplit(), params, seed=0, verbose=0)
    pol.search(64, None, 4, _FakeMeasurer(), max_seconds=1.5)
    assert pol.num_trials == 4  # one round: the check before the second finds the budget spent


def test_warming_up_model_skips_the_evolution(task):
    # While the model's scores are random, a round measures fresh random samples: no predict
    # calls, no already-measured state, and enough states for the batch.
    class _Warming(_ScoreBySplit):
        warming_up = True
        calls = 0

        def predict(self, task, states):
            self.calls += 1
            return super().predict(task, states)

    model = _Warming()
    pol = ansor.SketchPolicy(task, model, SMALL, seed=0, verbose=0)
    first, _ = pol.search_one_round(8)
    pol.measured_keys.update(state_key(s) for s in first)
    best, rand = pol.search_one_round(8)
    assert model.calls == 0
    assert len(best) == 16 and rand
    assert len(best) + len(rand) <= 4 * 8  # sampled what the round uses, not a population
    assert not {state_key(s) for s in best} & pol.measured_keys
    assert ansor.LGBModel().warming_up and not ansor.RandomModel(0).warming_up


def test_seed_states_are_measured_first_and_once(task):
    class _Recorder:
        class stats:
            build_s = run_s = 0.0

        def __init__(self):
            self.batches = []

        def measure(self, inputs):
            self.batches.append([inp.state for inp in inputs])
            return [ansor.MeasureResult((1e-3,), 0, "", 0.0, 0.0) for _ in inputs]

    seed = task.compute_dag.get_init_state()
    pol = ansor.SketchPolicy(task, ansor.RandomModel(0), SMALL, seed=0, verbose=0,
                             init_search_callbacks=[ansor.SeedStates([seed, seed])])  # fmt: skip
    rec = _Recorder()
    pol.search(8, None, 4, rec)
    assert state_key(rec.batches[0][0]) == state_key(seed)
    flat = [state_key(s) for batch in rec.batches for s in batch]
    assert flat.count(state_key(seed)) == 1 and len(flat) == 8


def test_every_task_is_seeded_with_the_default_schedule():
    from autosched.network.task_scheduler import _default_schedule_seed
    from autosched.search.annotate_gpu import gpu_state_errors

    dag = ansor.ComputeDAG(workloads.conv2d_nhwc_bias_relu(1, 8, 8, 16, 16, 3, 3, 1, 1))
    gpu = ansor.SearchTask(dag, target="cuda")
    seed = _default_schedule_seed(gpu)
    assert seed is not None and gpu_state_errors(gpu, seed) == []
    assert any(it.annotation == "threadIdx.x" for st in seed.stages for it in st.iters)
    # CPU tasks too (issue 16): the default schedule, parallel outer loops, correct.
    cpu_seed = _default_schedule_seed(ansor.SearchTask(dag, target="llvm"))
    assert cpu_seed is not None
    assert any(it.annotation == "parallel" for st in cpu_seed.stages for it in st.iters)
    rng = np.random.default_rng(3)
    args = [rng.uniform(-1, 1, t.shape).astype("float32") for t in dag.input_tensors]
    out = np.full(dag.output_tensors[0].shape, np.nan, "float32")
    ansor.build(cpu_seed, "llvm")(*args, out)
    np.testing.assert_allclose(out, eval_dag(dag, args)[0], rtol=1e-4, atol=1e-4)
