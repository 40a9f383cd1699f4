"""The task scheduler: gradient / round-robin choice, dead tasks, early stopping, a real tune of
three small tasks with the seed's progress table, and resuming from the log."""

import contextlib
import io
import re
import shutil
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

import autosched as ansor
from autosched import workloads
from autosched.cost_model.features import state_features
from autosched.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.measure.records import load_records, log_ended_cleanly
from autosched.network.task_scheduler import derive_similarity_tag

# ------------------------------------------------------------------ fakes (no measuring)

TAG = "auto_scheduler_task_scheduler_tag"


class _FakeDag:
    def __init__(self, flop=1e6, tag=None):
        self.flop = flop
        self.ops = [SimpleNamespace(attrs={TAG: tag} if tag else {})]

    def flop_count(self):
        return self.flop


def _fake_task(k, flop=1e6, tag=None):
    return SimpleNamespace(
        compute_dag=_FakeDag(flop, tag), workload_key=f"wk{k}", target="llvm", desc=f"fake{k}"
    )


def _scheduler(n=2, weights=None, costs=None, cts=None, histories=None, **kw):
    ts = ansor.TaskScheduler([_fake_task(k) for k in range(n)], weights, **kw)
    ts.best_costs = np.array(costs if costs is not None else [1e-3] * n, dtype=float)
    ts.task_cts = list(cts if cts is not None else [2] * n)
    ts.task_costs_history = histories or [[c] * t for c, t in zip(ts.best_costs, ts.task_cts)]
    ts.cur_score = ts._compute_score(ts.best_costs)
    return ts


def test_gradient_picks_the_largest_weighted_expected_gain():
    # Equal latencies and progress: the weight decides.
    assert _scheduler(weights=[1, 3])._choose_task() == 1
    assert _scheduler(weights=[3, 1])._choose_task() == 0
    # Equal weights: the slower task has more to gain (forward estimate best / t).
    assert _scheduler(costs=[1e-3, 4e-3])._choose_task() == 1
    # A task tuned in fewer rounds is expected to improve more in its next round.
    assert _scheduler(cts=[8, 2])._choose_task() == 1
    # The gradient is w * (alpha * backward + (1 - alpha) * (-best / t)).
    ts = _scheduler(weights=[2, 1], costs=[2e-3, 1e-3], cts=[4, 1],
                    histories=[[5e-3, 4e-3, 3e-3, 2e-3], [1e-3]])  # fmt: skip
    g = ts._gradients()
    backward = (2e-3 - 5e-3) / 3
    assert g[0] == pytest.approx(2 * (0.2 * backward + 0.8 * (-2e-3 / 4)), rel=1e-3)
    assert g[1] == pytest.approx(1 * 0.8 * (-1e-3 / 1), rel=1e-3)
    # A steep recent improvement (backward window 3) beats a flat history at equal cost.
    flat, steep = [1e-3] * 6, [9e-3, 9e-3, 9e-3, 5e-3, 3e-3, 1e-3]
    ts = _scheduler(cts=[6, 6], histories=[flat, steep])
    assert ts._choose_task() == 1
    # A task without any valid result yet (cost 1e10) comes first.
    assert _scheduler(n=3, weights=[5, 5, 1], costs=[1e-3, 1e-3, 1e10])._choose_task() == 2


def test_custom_objective_drives_the_choice():
    # Minimise the max latency: only the slowest task has a non-zero chain gradient.
    ts = _scheduler(n=3, costs=[3e-3, 1e-3, 2e-3], objective_func=max)
    assert ts._choose_task() == 0
    assert ts._gradients()[1] == 0 and ts._gradients()[2] == 0


def test_dead_tasks_are_never_picked():
    ts = _scheduler(n=3, weights=[1, 10, 1])
    ts.dead_tasks = {1}
    assert ts._gradients()[1] == 0
    assert ts._choose_task() != 1
    # All live gradients equal: a uniform random live task, never the dead one.
    ts = _scheduler(n=3)
    ts.dead_tasks = {0}
    ts.rng = np.random.default_rng(0)
    picks = Counter(ts._choose_task() for _ in range(60))
    assert set(picks) == {1, 2}


def test_round_robin_cycles_and_skips_dead_tasks():
    ts = _scheduler(n=3, weights=[1, 100, 1], strategy="round-robin")
    assert [ts._choose_task() for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    ts.dead_tasks = {1}
    assert [ts._choose_task() for _ in range(4)] == [0, 2, 0, 2]


def test_similarity_group_bounds_the_forward_estimate():
    assert derive_similarity_tag(ansor.ComputeDAG(workloads.matmul(8, 8, 8))) == ""  # dormant
    tasks = [_fake_task(0, 1e6, "conv"), _fake_task(1, 1e6, "conv"), _fake_task(2, 1e6)]
    assert derive_similarity_tag(tasks[0].compute_dag).startswith("conv_")
    ts = ansor.TaskScheduler(tasks)
    assert ts.group_task_ids == [[0, 1]]
    ts.best_costs = np.array([1e-3, 10e-3, 10e-3])
    ts.task_cts = [100, 100, 100]
    ts.task_costs_history = [[c] * 100 for c in ts.best_costs]
    g = ts._gradients()
    # Task 1 may reach beta x its group's best time (2 ms), task 2 only improves by best / t.
    assert g[1] == pytest.approx(0.8 * (2e-3 - 10e-3), rel=1e-3)
    assert g[2] == pytest.approx(0.8 * (-10e-3 / 100), rel=1e-3)
    assert ts._choose_task() == 1


# ------------------------------------------------------------------ tune() with fake policies


class _FakePolicy:
    """Measures nothing: round k returns ``num`` results of cost ``costs[k]``; None = empty."""

    def __init__(self, task, costs, calls=None):
        self.task, self.costs, self.rounds = task, list(costs), 0
        self.calls = calls if calls is not None else []

    def continue_search_one_round(self, num, measurer):
        self.calls.append(self.task.desc)
        cost = self.costs[self.rounds] if self.rounds < len(self.costs) else None
        self.rounds += 1
        if cost is None:
            return [], []
        res = MeasureResult((cost,)) if cost < 1e10 else MeasureResult((cost,), error_no=4)
        return [MeasureInput(self.task, None)] * num, [res] * num


def _fake_tune(costs, trials, per_round=4, early_stopping=None, per_task=None, calls=None,
               restored_cts=None, **kw):  # fmt: skip
    tasks = [_fake_task(k) for k in range(len(costs))]
    ts = ansor.TaskScheduler(tasks, callbacks=[], **kw)
    if restored_cts:  # as if restored from a log: these tasks have rounds and a best cost
        ts.task_cts = list(restored_cts)
        ts.best_costs = np.array([1e-3 if n else 1e10 for n in restored_cts])
        ts.task_costs_history = [[1e-3] * n for n in restored_cts]
    policies = [_FakePolicy(t, c, calls) for t, c in zip(tasks, costs)]
    options = ansor.TuningOptions(num_measure_trials=trials, num_measures_per_round=per_round,
                                  early_stopping=early_stopping, verbose=0)  # fmt: skip
    ts.tune(options, search_policy=policies, per_task_early_stopping=per_task)
    return ts, policies


def test_exhausted_and_stalled_tasks_die_and_the_budget_is_kept():
    # Task 1's space is exhausted after one round; task 0 keeps improving.
    ts, pols = _fake_tune([[8e-3, 4e-3, 2e-3, 1e-3, 5e-4], [1e-3]], trials=20, per_round=4)
    assert 1 in ts.dead_tasks and pols[1].rounds == 2  # the round that measured nothing
    assert ts.ct == 20 and ts.task_trials == [16, 4] and ts.task_cts[0] == 4
    assert ts.task_costs_history[0] == [8e-3, 4e-3, 2e-3, 1e-3]
    assert list(ts.best_costs) == [1e-3, 1e-3]
    # Per-task early stopping: no improvement for more than 4 trials (one round) -> dead.
    ts, pols = _fake_tune([[1e-3] * 10, [9e-3, 8e-3, 7e-3, 6e-3, 5e-3]], trials=40,
                          per_round=4, per_task=4, strategy="round-robin")  # fmt: skip
    assert 0 in ts.dead_tasks and pols[0].rounds == 3
    assert ts.task_trials[1] > ts.task_trials[0]


def test_warm_up_in_order_skips_tasks_with_history():
    calls = []
    _fake_tune([[1e-3] * 9] * 3, trials=12, per_round=4, strategy="round-robin", calls=calls)
    assert calls == ["fake0", "fake1", "fake2"]
    calls.clear()
    _fake_tune([[1e-3] * 9] * 3, trials=12, per_round=4, calls=calls, restored_cts=[3, 0, 2])
    assert calls[0] == "fake1" and len(calls) == 3  # no warm-up for tasks 0 and 2


def test_global_early_stopping():
    ts, _ = _fake_tune([[1e-3] * 50, [1e-3] * 50], trials=400, per_round=4, early_stopping=8)
    assert ts.ct == 8 + 8  # warm-up, then two rounds without improvement of the objective
    # A task without a valid result keeps the search going.
    ts, _ = _fake_tune([[1e-3] * 8, [1e10] * 8], trials=40, per_round=4, early_stopping=4)
    assert ts.ct == 40


def test_time_budget_stops_before_the_next_round(monkeypatch):
    """max_tuning_seconds: no round starts once the budget is spent (a fake clock: each round
    takes 10 s)."""
    import autosched.network.task_scheduler as ts_module

    clock = [0.0]
    fake_time = SimpleNamespace(time=lambda: clock[0], perf_counter=lambda: clock[0])
    monkeypatch.setattr(ts_module, "time", fake_time)

    class SlowPolicy(_FakePolicy):
        def continue_search_one_round(self, num, measurer):
            clock[0] += 10.0
            return super().continue_search_one_round(num, measurer)

    tasks = [_fake_task(k) for k in range(2)]
    policies = [SlowPolicy(t, [1e-3 / (r + 1) for r in range(50)]) for t in tasks]
    options = ansor.TuningOptions(num_measure_trials=400, num_measures_per_round=4,
                                  verbose=0, max_tuning_seconds=35)  # fmt: skip
    ts = ansor.TaskScheduler(tasks, callbacks=[])
    ts.tune(options, search_policy=policies)
    assert sum(p.rounds for p in policies) == 4 and ts.ct == 16  # rounds start at 0, 10, 20, 30
    with pytest.raises(ValueError, match="max_tuning_seconds"):
        ansor.TuningOptions(num_measure_trials=4, max_tuning_seconds=0)


def test_table_is_printed_after_the_warm_up_then_at_most_every_interval(monkeypatch, tmp_path):
    """Output to a file: a fake clock where each round takes 10 s; 2 tasks, 12 rounds. The
    table comes once every task had a round (round 2, t=20 s), then at most every 30 s (rounds
    5, 8, 11) and at the end; the last line names the log and what to do with it."""
    import autosched.network.progress as progress_module

    clock = [0.0]

    class SlowPolicy(_FakePolicy):
        def continue_search_one_round(self, num, measurer):
            clock[0] += 10.0
            return super().continue_search_one_round(num, measurer)

    monkeypatch.setattr(progress_module, "TABLE_INTERVAL_S", 30.0)
    tasks = [_fake_task(k) for k in range(2)]
    policies = [SlowPolicy(t, [1e-3 / (r + 1) for r in range(50)]) for t in tasks]
    log = tmp_path / "log.json"
    options = ansor.TuningOptions(num_measure_trials=48, num_measures_per_round=4, verbose=1,
                                  measure_callbacks=[ansor.RecordToFile(log)])  # fmt: skip
    table = ansor.PrintTableInfo(live=False, clock=lambda: clock[0])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ansor.TaskScheduler(tasks, callbacks=[table]).tune(options, search_policy=policies)
    lines = out.getvalue().splitlines()
    assert sum(p.rounds for p in policies) == 12
    assert lines.count("|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |") == 5
    assert [int(m.group(2)) for m in map(TOTAL.match, lines) if m] == [8, 20, 32, 44]
    assert lines[-2].startswith("Estimated total latency: ") and lines[-2].endswith("Done")
    assert lines[-1].startswith(f"Records: {log}. Next: with autosched.ApplyHistoryBest(")


def test_live_output_shows_a_bar_and_one_table_at_the_end(capsys):
    """On a terminal / in a notebook: a tqdm bar during tuning, the table once at the end."""
    tasks = [_fake_task(k) for k in range(2)]
    policies = [_FakePolicy(t, [1e-3 / (r + 1) for r in range(50)]) for t in tasks]
    options = ansor.TuningOptions(num_measure_trials=24, num_measures_per_round=4, verbose=1)
    table = ansor.PrintTableInfo(live=True)
    ansor.TaskScheduler(tasks, callbacks=[table]).tune(options, search_policy=policies)
    out, err = capsys.readouterr()
    assert out.count("|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |") == 1
    assert "Next ID" not in out and out.strip().endswith("Done")
    assert "24/24" in err and "est. latency" in err  # the bar, on stderr


def test_too_few_trials_is_a_clear_error():
    tasks = [_fake_task(k) for k in range(3)]
    with pytest.raises(ValueError, match=r"num_measure_trials=2 is too small for 3 tasks.*>= 3"):
        ansor.TaskScheduler(tasks).tune(ansor.TuningOptions(num_measure_trials=2, verbose=0))
    with pytest.raises(ValueError, match="2 task weights for 3 tasks"):
        ansor.TaskScheduler(tasks, task_weights=[1, 2])
    with pytest.raises(ValueError, match="strategy"):
        ansor.TaskScheduler(tasks, strategy="greedy")
    options = ansor.TuningOptions(num_measure_trials=30, verbose=0)
    for bad in ("beam.xgb", "sketch.tree"):
        with pytest.raises(ValueError, match="search.policy|cost model"):
            ansor.TaskScheduler(tasks, callbacks=[]).tune(options, search_policy=bad)


def test_policies_share_one_cost_model(monkeypatch):
    ts = ansor.TaskScheduler(_tasks())
    ts.tune_option, ts.num_measures_per_round = ansor.TuningOptions(verbose=0), 4
    pols = ts._make_policies("sketch.random", {"evolutionary_search_population": 32}, False, None)
    assert all(isinstance(p.model, ansor.RandomModel) and p.model is pols[0].model for p in pols)
    assert [p.task for p in pols] == ts.tasks
    assert pols[2].params.evolutionary_search_population == 32
    pols = ts._make_policies("default", None, False, None)
    model = pols[0].model
    assert isinstance(model, ansor.LGBModel) and all(p.model is model for p in pols)
    assert model.num_warmup_sample == 3 * 4  # the warm-up round of every task is random
    # adaptive_training: retrain only once the data grew by 20% since the last training.
    model = ts._make_policies("sketch.xgb", None, True, None)[0].model
    trained = []
    monkeypatch.setattr(ansor.LGBModel, "train", lambda self: trained.append(len(self.features)))
    for n in (10, 11, 12, 13, 14, 15):
        model.features = [None] * n
        model.train()
    assert trained == [10, 12, 15]


# ------------------------------------------------------------------ real tuning

SMALL = ansor.SearchParams(
    evolutionary_search_population=64, evolutionary_search_num_iters=1,
    sample_init_min_population=16,
)  # fmt: skip
WEIGHTS = [2, 1, 3]
ROW = re.compile(r"^\| +(\d+) \| +([\d.]+) \| +([\d.]+) \| +(\d+) \|$")
TOTAL = re.compile(
    r"^Estimated total latency: ([\d.]+|-) ms  Trials: (\d+)  Used time : \d+ s  Next ID: (\d+)$"
)


def _tasks():
    return [
        ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(32, 32, 32)), target="llvm"),
        ansor.SearchTask(ansor.ComputeDAG(workloads.softmax(16, 64)), target="llvm"),
        ansor.SearchTask(ansor.ComputeDAG(workloads.dense_bias(8, 32, 16)), target="llvm"),
    ]


def _tune(log, trials, **kw):
    options = ansor.TuningOptions(
        num_measure_trials=trials, num_measures_per_round=8, verbose=1,
        runner=ansor.LocalRunner(number=1, repeat=1, min_repeat_ms=0, timeout=10),
        measure_callbacks=[ansor.RecordToFile(log)],
    )  # fmt: skip
    kw.setdefault("retime_top", 0)  # the bookkeeping of the search alone (re-timing: below)
    ts = ansor.TaskScheduler(_tasks(), WEIGHTS, **kw)
    out = io.StringIO()
    # A slow machine must not add tables on the interval (tested with a fake clock below).
    with contextlib.redirect_stdout(out), pytest.MonkeyPatch.context() as mp:
        mp.setattr("autosched.network.progress.TABLE_INTERVAL_S", 1e9)
        ts.tune(options, search_policy_params=SMALL)
    return ts, out.getvalue()


def _per_task_records(log, tasks):
    keys = [t.workload_key for t in tasks]
    by_task = [[] for _ in tasks]
    for inp, res in load_records(log):
        by_task[keys.index(inp.task.workload_key)].append((inp, res))
    return by_task


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    log = tmp_path_factory.mktemp("tune") / "log.json"
    ts, out = _tune(log, 3 * 2 * 8)
    return log, ts, out


def test_tune_three_tasks_prints_the_table_and_logs(tuned):
    log, ts, out = tuned
    assert ts.ct == 48 and sum(ts.task_trials) == 48
    assert all(n >= 8 for n in ts.task_trials) and sum(ts.task_cts) == 6
    assert np.all(np.isfinite(ts.best_costs)) and np.all(ts.best_costs < 1.0)
    by_task = _per_task_records(log, ts.tasks)
    assert [len(r) for r in by_task] == ts.task_trials and log_ended_cleanly(log)
    for i, recs in enumerate(by_task):
        ok = [r.mean_cost for _, r in recs if r.error_no == MeasureErrorNo.NO_ERROR]
        assert ok and min(ok) == ts.best_costs[i]
        assert ts.task_costs_history[i][-1] == ts.best_costs[i]
    # The seed's table once every task had its warm-up round, and a final one (not a table
    # before each of the 6 rounds).
    lines = out.splitlines()
    assert lines.count("-" * 30 + "  [ Task Scheduler ]") == 2
    assert lines.count("|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |") == 2
    totals = [m for m in map(TOTAL.match, lines) if m]
    assert len(totals) == 1 and totals[0].group(2) == "24"  # after the warm-up of 3 x 8
    warm_rows = [m for m in map(ROW.match, lines) if m][:3]
    assert [int(m.group(4)) for m in warm_rows] == [8, 8, 8]
    assert lines[-1] == (
        f"Records: {log}. Next: with autosched.ApplyHistoryBest({str(log)!r}): "
        "lib = autosched.build(mod, target, params=params)"
    )
    rows = [m for m in map(ROW.match, lines) if m]
    final = rows[-3:]
    assert [int(m.group(4)) for m in final] == ts.task_trials
    for i, m in enumerate(final):
        assert float(m.group(2)) == pytest.approx(ts.best_costs[i] * 1e3, abs=1e-3)
        gflops = ts.tasks[i].compute_dag.flop_count() / ts.best_costs[i] / 1e9
        assert float(m.group(3)) == pytest.approx(gflops, abs=0.01)
    estimated = float(np.dot(WEIGHTS, ts.best_costs)) * 1e3
    assert re.search(rf"Estimated total latency: {estimated:.3f} ms  Trials: 48 .*Done", out)
    tsv = (log.parent / "total_latency.tsv").read_text().splitlines()
    assert len(tsv) == 6 and tsv[-1].split("\t")[-2:] == ["Trials", "48"]
    assert tsv[-1].split("\t")[3] == f"{estimated:.3f}"


def test_resume_continues_counts_and_never_remeasures(tuned, tmp_path):
    first_log, first, _ = tuned
    log = tmp_path / "log.json"
    shutil.copy(first_log, log)
    ts, out = _tune(log, 24, load_log_file=str(log))
    # Restored: counts and best costs of the first run, no warm-up round.
    assert ts.ct == 24 and sum(ts.task_trials) == 72
    assert all(a >= b for a, b in zip(ts.task_trials, first.task_trials))
    assert sum(ts.task_cts) == 6 + 3
    assert np.all(ts.best_costs <= first.best_costs)
    first_rows = [m for m in map(ROW.match, out.splitlines()) if m][:3]
    assert [int(m.group(4)) for m in first_rows] == first.task_trials
    # Every state was measured once; the policies knew the old ones.
    by_task = _per_task_records(log, ts.tasks)
    assert [len(r) for r in by_task] == ts.task_trials
    for i, recs in enumerate(by_task):
        steps = Counter(tuple(map(str, inp.state.steps)) for inp, _ in recs)
        assert max(steps.values()) == 1, f"task {i} measured a state twice"
        assert len(ts.search_policies[i].measured_keys) == ts.task_trials[i]
    # The shared cost model learned from the log too.
    model = ts.search_policies[0].model
    assert all(p.model is model for p in ts.search_policies) and len(model.features) == 72


def test_resume_with_fewer_trials_than_tasks_when_all_are_tuned(tuned, tmp_path):
    first_log, first, _ = tuned
    log = tmp_path / "log.json"
    shutil.copy(first_log, log)
    ts, _ = _tune(log, 2, load_log_file=str(log))  # 2 trials, 3 tasks: none needs a warm-up
    assert ts.ct == 2 and sum(ts.task_trials) == sum(first.task_trials) + 2
    assert sum(ts.task_cts) == sum(first.task_cts) + 1


# ------------------------------------------------------------------ automatic round sizes


class _Estimates(ansor.TaskSchedulerCallback):
    """Records the estimated total latency after every round."""

    def __init__(self):
        self.after_round = []

    def post_tune(self, task_scheduler, task_id):
        self.after_round.append(task_scheduler.estimated_latency_ms())


def _timed_tune(monkeypatch, options, n=24, seconds_per_round=None, target="llvm"):
    """Tune ``n`` fake tasks under a fake clock: a round measuring k candidates takes
    ``seconds_per_round(k)`` s (default: the CPU prior, 1 + 0.75 k)."""
    import autosched.network.task_scheduler as ts_module
    from autosched.search.budget import CPU_COST

    clock = [0.0]
    monkeypatch.setattr(ts_module, "time", SimpleNamespace(time=lambda: clock[0]))
    cost = seconds_per_round or CPU_COST.seconds
    sizes = []

    class TimedPolicy(_FakePolicy):
        def continue_search_one_round(self, num, measurer):
            clock[0] += cost(num)
            sizes.append(num)
            return super().continue_search_one_round(num, measurer)

    tasks = [_fake_task(k) for k in range(n)]
    for task in tasks:
        task.target = target
    calls, estimates = [], _Estimates()
    policies = [TimedPolicy(t, [1e-3 / (r + 1) for r in range(500)], calls) for t in tasks]
    ts = ansor.TaskScheduler(tasks, callbacks=[estimates])
    ts.tune(options, search_policy=policies)
    return ts, calls, sizes, estimates.after_round, clock[0]


def test_seconds_only_budget_measures_every_task_in_the_first_pass(monkeypatch):
    """24 tasks, max_tuning_seconds=400 and nothing else: the first pass measures every task
    within a quarter of the budget, the estimate is known right after it, and the rest of
    the budget goes on (no trial limit)."""
    options = ansor.TuningOptions(max_tuning_seconds=400, verbose=0)
    ts, calls, sizes, estimates, end = _timed_tune(monkeypatch, options)
    assert calls[:24] == [f"fake{k}" for k in range(24)]
    assert estimates[:23] == [None] * 23 and estimates[23] is not None
    assert sum(1.0 + 0.75 * k for k in sizes[:24]) <= 400 / 4
    assert 2 <= sizes[0] <= 64 and len(set(sizes)) == 1  # the prior was right: no change
    assert 400 <= end < 400 + 1 + 0.75 * 64 and len(calls) > 24 * 3


def test_round_size_adapts_to_the_observed_cost(monkeypatch):
    """Rounds twice as slow as the prior: after the first pass the round size is chosen again
    from the observed cost (and rounds keep their size when it is set explicitly)."""
    from autosched.search.budget import CPU_COST, measures_per_round, observed_cost

    options = ansor.TuningOptions(max_tuning_seconds=400, verbose=0)
    slow = lambda k: 2 * CPU_COST.seconds(k)  # noqa: E731
    ts, calls, sizes, _, _ = _timed_tune(monkeypatch, options, seconds_per_round=slow)
    first = measures_per_round(24, seconds=400, cost=CPU_COST)
    then = measures_per_round(24, seconds=400, cost=observed_cost(CPU_COST, first, slow(first)))
    assert then < first and sizes[:24] == [first] * 24 and set(sizes[24:]) == {then}
    assert ts.num_measures_per_round == then
    options = ansor.TuningOptions(max_tuning_seconds=400, num_measures_per_round=5, verbose=0)
    ts, calls, sizes, _, _ = _timed_tune(monkeypatch, options, seconds_per_round=slow)
    assert set(sizes) == {5} and ts.num_measures_per_round == 5


def test_explicit_round_size_is_kept(monkeypatch):
    """TVM's 64 per round when the user sets it, even where it measures few tasks (the issue's
    H100 run); the automatic choice for the same 24 GPU tasks and 400 s measures all."""
    runner = SimpleNamespace()  # not a LocalRunner: no GPU needed to tune the fake tasks
    gpu_round = lambda k: 1.0 + 0.4 * k  # noqa: E731 - the GPU prior
    options = ansor.TuningOptions(num_measure_trials=24 * 64, num_measures_per_round=64,
                                  max_tuning_seconds=400, verbose=0, runner=runner)  # fmt: skip
    ts, calls, sizes, estimates, _ = _timed_tune(monkeypatch, options, 24, gpu_round, "cuda")
    assert set(sizes) == {64} and len(set(calls)) < 24 and estimates[-1] is None
    options = ansor.TuningOptions(max_tuning_seconds=400, verbose=0, runner=runner)
    ts, calls, sizes, estimates, _ = _timed_tune(monkeypatch, options, 24, gpu_round, "cuda")
    assert 4 <= sizes[0] <= 16 and set(calls[:24]) == {f"fake{k}" for k in range(24)}
    assert estimates[23] is not None


def test_cpu_tasks_measure_their_default_schedule_first():
    ts = ansor.TaskScheduler(_tasks())
    ts.tune_option, ts.num_measures_per_round = ansor.TuningOptions(verbose=0), 4
    for pol in ts._make_policies("sketch.random", None, False, None):
        assert len(pol.pending_seeds) == 1
        assert any(it.annotation == "parallel" for st in pol.pending_seeds[0].stages
                   for it in st.iters)  # fmt: skip


def _preload(log):
    """What ``tune`` does with ``load_log_file=log`` before its first round; the cost model."""
    ts = ansor.TaskScheduler(_tasks(), WEIGHTS, load_log_file=str(log))
    ts.tune_option = ansor.TuningOptions(measure_callbacks=[ansor.RecordToFile(log)])
    ts.num_measures_per_round = 8
    return ts._make_policies("default", SMALL, False, ts._restore_status(str(log)))[0].model


def test_resume_reads_the_feature_store_instead_of_lowering(tuned, tmp_path, monkeypatch):
    """The first tune left <log>.features.npz; resuming trains on the log's records with those
    rows (none lowered again), the same rows as lowering gives."""
    from autosched.cost_model import feature_pool
    from autosched.cost_model.feature_store import store_path

    first_log, first, _ = tuned
    log, bare = tmp_path / "log.json", tmp_path / "bare.json"
    shutil.copy(first_log, log)
    shutil.copy(store_path(first_log), store_path(log))
    shutil.copy(first_log, bare)  # the same log without its store
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "0")
    lowered = []

    def counted(task, state):
        lowered.append(state)
        return state_features(task, state)

    monkeypatch.setattr(feature_pool, "state_features", counted)
    feature_pool.DEFAULT_CACHE.clear()
    model = _preload(log)
    assert lowered == [] and len(model.features) == sum(first.task_trials)
    assert model.feature_store.hits == len(model.features)
    feature_pool.DEFAULT_CACHE.clear()
    lowered_again = _preload(bare)
    assert len(lowered) == len(model.features) and lowered_again.feature_store.hits == 0
    assert [f.tobytes() for f in model.features] == [f.tobytes() for f in lowered_again.features]
    assert store_path(bare).exists()  # written for the next resume


def test_a_resumed_run_with_every_task_tuned_fills_the_builders(tuned, tmp_path):
    """Session 24: the last 204 s of a 20-minute GPU tune, resumed from its log, got rounds of
    2 from that remainder (sized for a first pass it no longer has) and measured half the
    trials a minute of the earlier runs. Resumed with every task tuned, rounds start at one
    candidate per builder."""
    first_log, first, _ = tuned
    log = tmp_path / "log.json"
    shutil.copy(first_log, log)
    options = ansor.TuningOptions(
        max_tuning_seconds=1, verbose=1, builder=ansor.LocalBuilder(n_parallel=3),
        runner=ansor.LocalRunner(number=1, repeat=1, min_repeat_ms=0, timeout=10),
        measure_callbacks=[ansor.RecordToFile(log)],
    )  # fmt: skip
    ts = ansor.TaskScheduler(_tasks(), WEIGHTS, load_log_file=str(log), retime_top=0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ts.tune(options, search_policy_params=SMALL)
    assert "3 candidates per round (automatic: every task has records in the log" in out.getvalue()
    assert ts.num_measures_per_round == 3
    added = [a - b for a, b in zip(ts.task_trials, first.task_trials)]
    assert sum(added) >= 3 and all(k % 3 == 0 for k in added), added


def test_resumed_round_size_rule():
    from autosched.network.scheduler_rounds import resumed_round_size

    def measurer(builders):
        return SimpleNamespace(builder=SimpleNamespace(n_parallel=builders))

    assert resumed_round_size(2, 24, None, measurer(16))[0] == 16
    assert resumed_round_size(2, 24, None, measurer(200))[0] == 64  # TVM's ceiling
    assert resumed_round_size(2, 3, 24, measurer(16))[0] == 8  # the trials give each task 8
    assert resumed_round_size(20, 24, None, measurer(16)) == (20, None)  # already larger
    assert resumed_round_size(2, 24, None, SimpleNamespace(builder=None)) == (2, None)  # RPC
