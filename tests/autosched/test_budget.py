"""Automatic round sizes (issue 16 section 3): candidates per round and search effort chosen
from the budget when the user leaves them unset, kept when the user sets them."""

import numpy as np
import pytest

import autosched as ansor
from autosched import workloads
from autosched.search import budget
from autosched.search.budget import (
    CPU_COST,
    GPU_COST,
    RoundCost,
    measures_per_round,
    observed_cost,
    search_effort,
)


def test_the_first_pass_fits_a_quarter_of_the_budget():
    # A trial budget: 24 tasks x 4 passes of 20 = 1920 <= 2000 trials.
    assert measures_per_round(24, trials=2000) == 20
    # Large budgets keep TVM's 64, tiny ones the floor of 2 (default schedule + one searched).
    assert measures_per_round(24, trials=24 * 1000) == 64
    assert measures_per_round(24, trials=30) == 2
    assert measures_per_round(1) == 64  # no budget at all: TVM's value
    # A time budget: the predicted first pass is at most 1/4 of it.
    for n, seconds in ((24, 400), (24, 3600), (5, 120), (100, 20000)):
        for cost in (CPU_COST, GPU_COST, RoundCost(trial_s=3.0, round_s=10.0)):
            p = measures_per_round(n, seconds=seconds, cost=cost)
            assert 2 <= p <= 64
            if p > 2:  # above the floor the first pass fits; with one more it would not
                assert n * cost.seconds(p) <= seconds / 4 < n * cost.seconds(p + 1) or p == 64
    # Both budgets: the tighter one decides.
    assert measures_per_round(24, trials=100_000, seconds=400, cost=GPU_COST) == (
        measures_per_round(24, seconds=400, cost=GPU_COST)
    )
    assert measures_per_round(24, trials=200, seconds=1e6) == 2


def test_search_effort_scales_with_the_round():
    assert search_effort(2) == (64, 1)
    assert search_effort(8) == (128, 1)  # the expert's 400 s choice on 24 GPU tasks
    assert search_effort(32) == (512, 1)
    assert search_effort(64) == (512, 2)
    pops = [search_effort(k)[0] * search_effort(k)[1] for k in range(1, 65)]
    assert pops == sorted(pops) and max(pops) <= 2048 * 4


def test_a_search_that_shares_the_measurement_cores_spends_half_as_much_per_candidate():
    """Issue 29: on the local CPU the search takes the cores the candidates are built and
    timed on, so each of its seconds is one not measuring; there 8 states per candidate."""
    assert budget.STATES_PER_CANDIDATE_SHARED * 2 == budget.STATES_PER_CANDIDATE
    assert search_effort(2, shares_cores=True) == (64, 1)  # the population's floor
    assert search_effort(8, shares_cores=True) == (64, 1)
    assert search_effort(32, shares_cores=True) == (256, 1)
    assert search_effort(64, shares_cores=True) == (512, 1)
    for k in range(1, 65):
        shared, alone = search_effort(k, True), search_effort(k, False)
        assert shared[0] * shared[1] <= alone[0] * alone[1]
    params = ansor.SearchParams()
    assert params.for_round(32, shares_cores=True).evolutionary_search_population == 256
    assert params.for_round(32).evolutionary_search_population == 512
    # Values the user sets are kept either way.
    tvm = ansor.SearchParams(evolutionary_search_population=2048, evolutionary_search_num_iters=4)
    assert tvm.for_round(8, shares_cores=True) == tvm


def test_observed_cost_rescales_the_prior():
    cost = observed_cost(CPU_COST, 4, 2 * CPU_COST.seconds(4))
    assert cost.seconds(4) == pytest.approx(2 * CPU_COST.seconds(4))
    assert cost.trial_s / cost.round_s == pytest.approx(CPU_COST.trial_s / CPU_COST.round_s)
    assert observed_cost(CPU_COST, 4, 0.0) == CPU_COST


def test_readme_main_job_choice():
    """`python -m autosched tune --network resnet-18` (llvm, 48 trials, 24 tasks): 2 per round
    (the default schedule and one searched state per task), population 64 x 1 generation."""
    mod, params, _, _ = ansor.networks.get_network("resnet-18", batch_size=1, layout="NHWC")
    tasks, _ = ansor.extract_tasks(mod, params, "llvm")
    assert len(tasks) == 24
    per_round = measures_per_round(len(tasks), trials=48, cost=CPU_COST)
    assert per_round == 2
    params = ansor.SearchParams().for_round(per_round)
    assert (params.evolutionary_search_population, params.evolutionary_search_num_iters) == (64, 1)


def test_issue_gpu_case_choice():
    """The issue's H100 run: 24 tasks, max_tuning_seconds=400, everything else default. TVM's
    64 per round measured 5 tasks in 400 s; the automatic choice is near the expert's 8 per
    round, population 128, one generation, and the predicted first pass fits 100 s."""
    per_round = measures_per_round(24, seconds=400, cost=GPU_COST)
    assert 4 <= per_round <= 16, per_round
    assert 24 * GPU_COST.seconds(per_round) <= 100
    population, generations = search_effort(per_round)
    assert 64 <= population <= 256 and generations == 1


# ------------------------------------------------------------------ the search keeps user values


class _Model:
    def predict(self, task, states):
        return np.zeros(len(states))

    def update(self, inputs, results):
        pass


def _evolution_sizes(monkeypatch, params, num_measure, shares_cores=False):
    """The population and generations one search round of a policy evolves with."""
    import autosched.search.policy as policy_module

    seen = {}

    def fake_evolution(task, init, model, mutate, rng, *, out_size, num_iters, population_size,
                       mutation_prob, exclude, mutate_many=None):  # fmt: skip
        seen.update(population=population_size, generations=num_iters)
        return []

    monkeypatch.setattr(policy_module, "evolutionary_search", fake_evolution)
    task = ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(16, 16, 16)), target="llvm")
    pol = ansor.SketchPolicy(task, _Model(), params, seed=0, verbose=0)
    assert pol.search_shares_cores  # a CPU task, until a measurer says otherwise
    pol.search_shares_cores = shares_cores
    sampled = []
    monkeypatch.setattr(
        pol, "sample_initial_population",
        lambda p=None: sampled.append(p.evolutionary_search_population) or [task.compute_dag
                                                                             .get_init_state()],
    )  # fmt: skip
    pol.search_one_round(num_measure)
    assert sampled == [seen["population"]]
    return seen["population"], seen["generations"]


def test_explicit_population_and_generations_are_kept(monkeypatch):
    tvm = ansor.SearchParams(evolutionary_search_population=2048, evolutionary_search_num_iters=4)
    assert _evolution_sizes(monkeypatch, tvm, 8) == (2048, 4)
    assert _evolution_sizes(monkeypatch, ansor.SearchParams(), 8) == (128, 1)
    assert _evolution_sizes(monkeypatch, ansor.SearchParams(), 64) == (512, 2)
    # One set, the other automatic.
    mixed = ansor.SearchParams(evolutionary_search_num_iters=3)
    assert _evolution_sizes(monkeypatch, mixed, 8) == (128, 3)
    assert budget.TVM_MEASURES_PER_ROUND == 64
    # Sharing the cores with the measurement: half the automatic effort, user values kept.
    assert _evolution_sizes(monkeypatch, ansor.SearchParams(), 64, shares_cores=True) == (512, 1)
    assert _evolution_sizes(monkeypatch, tvm, 8, shares_cores=True) == (2048, 4)


def test_the_scheduler_halves_the_search_only_where_it_shares_the_measurement_cores(capsys):
    """The task scheduler tells its policies whether the search runs beside the measurement
    (GPUs, remote devices: ``full`` overlap) or on the cores the candidates are timed on (the
    local CPU), and the plan line shows the population that follows."""
    from autosched.network.scheduler_rounds import plan_line

    options = ansor.TuningOptions(max_tuning_seconds=300)
    shared = plan_line(options, 24, 32, None, "sketch", None, shares_cores=True)
    alone = plan_line(options, 24, 32, None, "sketch", None, shares_cores=False)
    assert "population 256 x 1 generations" in shared
    assert "population 512 x 1 generations" in alone

    dag = ansor.ComputeDAG(workloads.matmul(8, 8, 8))
    ts = ansor.TaskScheduler([ansor.SearchTask(dag, target="llvm")])
    ts.tune(ansor.TuningOptions(num_measure_trials=2, num_measures_per_round=2, verbose=1))
    assert ts.overlap == "off"
    assert [p.search_shares_cores for p in ts.search_policies] == [True]
    assert "population 64 x 1 generations (automatic)" in capsys.readouterr().out


def test_tuning_options_round_size_is_automatic_unless_set():
    assert ansor.TuningOptions().num_measures_per_round is None
    assert ansor.TuningOptions(num_measures_per_round=64).num_measures_per_round == 64
    with pytest.raises(ValueError, match="num_measures_per_round"):
        ansor.TuningOptions(num_measures_per_round=0)
    # 0 trials with a time budget: only the time limits (without one: no measuring at all).
    assert ansor.TuningOptions(max_tuning_seconds=10).trial_limit is None
    assert ansor.TuningOptions().trial_limit == 0


def _cli_tune_options(monkeypatch, tmp_path, *flags):
    """The TuningOptions and SearchParams `python -m autosched tune` hands the scheduler."""
    from autosched.cli import main

    seen = {}

    class Stop(Exception):
        pass

    def fake_tune(self, options, search_policy_params=None, **kw):
        seen.update(options=options, params=search_policy_params)
        raise Stop

    monkeypatch.setattr(ansor.TaskScheduler, "tune", fake_tune)
    with pytest.raises(Stop):
        main(["tune", "--network", "resnet-18", "--log", str(tmp_path / "log.json"), *flags])
    return seen["options"], seen["params"]


def test_cli_uses_the_automatic_rule_unless_flags_are_given(monkeypatch, tmp_path, capsys):
    options, params = _cli_tune_options(monkeypatch, tmp_path)
    assert options.num_measure_trials == 48 and options.num_measures_per_round is None
    assert params.evolutionary_search_population is None
    assert params.evolutionary_search_num_iters is None
    options, _ = _cli_tune_options(monkeypatch, tmp_path, "--max-seconds", "300")
    assert options.trial_limit is None and options.max_tuning_seconds == 300
    assert "Begin tuning (300 s)" in capsys.readouterr().out
    options, params = _cli_tune_options(
        monkeypatch, tmp_path, "--per-round", "64", "--population", "2048", "--generations", "4"
    )
    assert options.num_measures_per_round == 64
    assert params.for_round(8).evolutionary_search_population == 2048
    assert params.for_round(8).evolutionary_search_num_iters == 4


def test_a_short_budget_makes_the_first_pass_default_schedules_only():
    """Issue 29: with 120 s, resnet-18's 24 tasks (googlenet's 61) did not all get a round of
    the smallest searched size within the quarter; such a budget is 'short'. The issue's GPU
    run (400 s) and a 900 s CPU run are not."""
    from autosched.search.budget import first_pass_is_short

    assert first_pass_is_short(24, 120, CPU_COST) and first_pass_is_short(61, 120, CPU_COST)
    assert not first_pass_is_short(24, 900, CPU_COST)
    assert not first_pass_is_short(24, 400, GPU_COST)
    assert not first_pass_is_short(24, None, CPU_COST)  # a trial budget alone: never


def test_rounds_after_the_first_pass_keep_every_builder_busy():
    """Issue 29: on a 16-core host the round size fell to 2 after the first pass."""
    from types import SimpleNamespace

    from autosched.search.budget import TVM_MEASURES_PER_ROUND

    def adapted(builders):
        dag = ansor.ComputeDAG(workloads.matmul(8, 8, 8))
        ts = ansor.TaskScheduler([ansor.SearchTask(dag, target="llvm")] * 24)
        ts.tune_option = SimpleNamespace(max_tuning_seconds=120.0, num_measures_per_round=None,
                                         verbose=0)  # fmt: skip
        ts._trial_limit, ts._round_cost, ts.num_measures_per_round = None, CPU_COST, 2
        ts.measurer = SimpleNamespace(builder=SimpleNamespace(n_parallel=builders))
        ts._adapt_round_size(5.0, 2)
        return ts.num_measures_per_round

    assert adapted(2) == 2  # the budget's choice (24 tasks, 120 s) is already the floor
    assert adapted(16) == 16
    assert adapted(200) == TVM_MEASURES_PER_ROUND
