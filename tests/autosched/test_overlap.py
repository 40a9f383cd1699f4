"""Issue 29: the next round's search overlapped with this round's measurement
(autosched/measure/overlap.py, TaskScheduler._tune_task): it happens, it changes no record,
errors on either side surface, and on the local CPU no candidate runs beside the search.

The builder and runner here are fakes (no compiling, costs from a hash of the steps), so the
order of events is forced with threading events, never read from wall-clock thresholds."""

import hashlib
import json
import threading

import pytest

import autosched as ansor
from autosched import workloads
from autosched.cost_model.model import RandomModel
from autosched.measure import MeasureResult
from autosched.measure.data import BuildResult, steps_json_of
from autosched.measure.local import LocalRunner
from autosched.measure.overlap import InFlight, MeasureGate, overlap_mode
from autosched.measure.timing import PHASES, TimeLedger
from autosched.search.policy import SketchPolicy

SMALL = ansor.SearchParams(
    evolutionary_search_population=16, evolutionary_search_num_iters=1,
    sample_init_min_population=8,
)  # fmt: skip
PATIENCE_S = 60.0  # only reached when the expected overlap never happens (a failure)


def _cost(inp) -> float:
    digest = hashlib.sha256(json.dumps(steps_json_of(inp.state)).encode()).digest()
    return 1e-4 * (1.0 + digest[0] / 255.0)


class _Builder:
    """Builds nothing; ``hook(inputs)`` runs first (in the measuring thread)."""

    n_parallel = 2  # batches of 4: one per round of 4

    def __init__(self, hook=None):
        self.hook = hook

    def build(self, inputs):
        if self.hook is not None:
            self.hook(inputs)
        return [BuildResult({"fake": True}, time_cost=0.001) for _ in inputs]


class _Runner:
    """Costs from a hash of the steps; ``hook(inputs)`` runs first."""

    def __init__(self, hook=None):
        self.hook = hook
        self.closed = False

    def run(self, inputs, build_results):
        if self.hook is not None:
            self.hook(inputs)
        return [MeasureResult((_cost(inp),), all_cost=0.002) for inp in inputs]

    def close(self):
        self.closed = True


class _Log:
    """A measure callback keeping (workload key, steps) of every record, in order."""

    def __init__(self):
        self.rows = []

    def callback(self, inputs, results):
        for inp, res in zip(inputs, results, strict=True):
            self.rows.append((inp.task.workload_key, json.dumps(steps_json_of(inp.state)),
                              res.mean_cost))  # fmt: skip


def _tasks():
    return [
        ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(16, 16, 16)), target="llvm"),
        ansor.SearchTask(ansor.ComputeDAG(workloads.dense_bias(8, 16, 8)), target="llvm"),
    ]


def _tune(monkeypatch, mode, trials=16, builder=None, runner=None, strategy="round-robin",
          log=None):  # fmt: skip
    monkeypatch.setenv("AUTOSCHED_OVERLAP", mode)
    tasks = _tasks()
    model = RandomModel(seed=7)
    policies = [SketchPolicy(t, model, SMALL, seed=11 + k, verbose=0) for k, t in enumerate(tasks)]
    log = log if log is not None else _Log()
    options = ansor.TuningOptions(
        num_measure_trials=trials, num_measures_per_round=4, verbose=0,
        builder=builder or _Builder(), runner=runner or _Runner(), measure_callbacks=[log],
    )  # fmt: skip
    ts = ansor.TaskScheduler(tasks, strategy=strategy, callbacks=[], retime_top=0)
    ts.tune(options, search_policy=policies)
    return ts, log


class _Ahead:
    """Counts the rounds searched while another is in flight; ``wait(n)``: until ``n`` were."""

    def __init__(self):
        self.count = 0
        self.cond = threading.Condition()

    def add(self):
        with self.cond:
            self.count += 1
            self.cond.notify_all()

    def wait(self, n: int) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.count >= n, PATIENCE_S)


def _watch_search(monkeypatch):
    """Patch prepare_round: ``ahead`` counts the rounds searched while another is in flight;
    ``searching`` is set during every search."""
    ahead, searching = _Ahead(), threading.Event()
    original = SketchPolicy.prepare_round

    def prepare_round(self, num, population=None, in_flight=()):
        if in_flight:
            ahead.add()
        searching.set()
        try:
            return original(self, num, population, in_flight)
        finally:
            searching.clear()

    monkeypatch.setattr(SketchPolicy, "prepare_round", prepare_round)
    return ahead, searching


def _measure_threads():
    return [t for t in threading.enumerate() if t.name == "autosched-measure"]


# ------------------------------------------------------------------ the ledger and the mode


def test_merged_measurement_counts_its_hidden_seconds_once():
    now = [0.0]
    ledger = TimeLedger(lambda: now[0])
    with ledger.active(), ledger.phase("evolve"):
        now[0] += 3.0  # searching while the background measured 4 s
    sub = TimeLedger(lambda: now[0])
    sub.add("compile", 1.5)
    sub.add("run", 2.5)
    now[0] += 1.0  # then waited 1 s for the rest of it
    ledger.merge(sub, waited=1.0)
    assert ledger.seconds["run"] == 2.5 and ledger.seconds["compile"] == 1.5
    assert ledger.overlap == pytest.approx(3.0)  # 4 s of work, 1 s of it waited for
    row = ledger.end_round(trials=4)
    assert row["overlap"] == pytest.approx(3.0) and row["wall"] == pytest.approx(4.0)
    line = ledger.line()
    assert "overlap -3.0" in line and line.split("other ")[1].startswith("0.0 s")
    # The phases less the overlap never exceed the wall time.
    assert sum(ledger.seconds[k] for k in PHASES) - ledger.overlap <= ledger.wall() + 1e-9


def test_overlap_mode_follows_where_the_runner_times(monkeypatch):
    monkeypatch.delenv("AUTOSCHED_OVERLAP", raising=False)
    runner = LocalRunner()
    assert overlap_mode(["llvm"], runner) == "off"  # timed on the host's cores
    assert overlap_mode(["cuda", "opencl"], "local") == "full"  # timed on the device
    assert overlap_mode(["llvm", "cuda"], runner) == "off"
    remote = type("Remote", (), {"measures_remotely": True})()
    assert overlap_mode(["llvm"], remote) == "full"
    assert overlap_mode(["cuda"], _Runner()) == "off"  # a custom runner: unknown
    monkeypatch.setenv("AUTOSCHED_OVERLAP", "0")
    assert overlap_mode(["cuda"], "local") == "off"
    monkeypatch.setenv("AUTOSCHED_OVERLAP", "build")
    assert overlap_mode(["llvm"], runner) == "build"
    monkeypatch.setenv("AUTOSCHED_OVERLAP", "sometimes")
    with pytest.raises(ValueError, match="AUTOSCHED_OVERLAP='sometimes' is invalid"):
        overlap_mode(["cuda"], "local")


def test_closed_gate_holds_runs_until_opened_and_cancel_stops():
    gate = MeasureGate(run_beside_search=False)
    assert not gate.may_run()
    gate.open()
    assert gate.may_run()
    gate.check()
    gate.cancel()
    with pytest.raises(Exception, match="cancelled"):
        gate.check()
    with pytest.raises(ValueError, match="mode must be 'full' or 'build'"):
        InFlight(None, [], "off")


# ------------------------------------------------------------------ the task scheduler


def test_next_round_is_searched_while_this_one_is_measured(monkeypatch):
    ahead, _ = _watch_search(monkeypatch)
    seen = []

    def run_waits(inputs):
        # Round k's run (of 4): round k + 1's search must start meanwhile (none after the last).
        if len(seen) < 3:
            seen.append(ahead.wait(len(seen) + 1))

    ts, log = _tune(monkeypatch, "full", runner=_Runner(run_waits))
    assert seen == [True, True, True]
    assert ts.overlap == "full" and ts.ct == 16 and len(log.rows) == 16
    # The events the scheduler recorded: each searched-ahead round started before the
    # measurement of the round it overlapped had ended.
    events = ts.overlap_events
    searches = [t for kind, _, t in events if kind == "search"]
    measured = [t for kind, _, t in events if kind == "measured"]
    assert len(searches) == 3 and len(measured) == 4
    assert all(s < m for s, m in zip(searches, measured))
    assert ts.speculation == {"hits": 3, "misses": 0}  # round-robin: always the right guess
    assert ts.ledger.overlap > 0 and sum(r["trials"] for r in ts.ledger.rounds) == 16


def test_overlapped_tune_gives_the_same_records_as_sequential(monkeypatch):
    # Round-robin over two tasks: each task's next round starts after its previous one was
    # learnt in both modes, so the same generators give the same candidates.
    ts_seq, seq = _tune(monkeypatch, "off", trials=24)
    ts_ovl, ovl = _tune(monkeypatch, "full", trials=24)
    assert ts_seq.overlap == "off" and ts_ovl.overlap == "full"
    assert ovl.rows == seq.rows and len(seq.rows) == 24
    assert ts_ovl.task_trials == ts_seq.task_trials == [12, 12]
    assert ts_ovl.task_cts == ts_seq.task_cts
    assert list(ts_ovl.best_costs) == list(ts_seq.best_costs)
    rounds = [[r["trials"] for r in ts.ledger.rounds] for ts in (ts_ovl, ts_seq)]
    assert rounds[0] == rounds[1]


def test_gradient_strategy_overlapped_measures_each_candidate_once(monkeypatch):
    # Whatever the gradient picks, every trial is measured once and the counts add up.
    ts, log = _tune(monkeypatch, "full", trials=24, strategy="gradient")
    assert ts.ct == 24 == len(log.rows) == sum(ts.task_trials)
    assert len({row[:2] for row in log.rows}) == 24  # never a candidate measured twice
    assert sum(ts.speculation.values()) >= 1
    assert ts._prepared is None


def test_a_round_searched_ahead_and_not_taken_gives_its_seed_back():
    from autosched.network.default_schedules import default_schedule
    from autosched.search.evolution import state_key
    from autosched.search.policy import SeedStates

    task = _tasks()[0]
    seed = default_schedule(task.compute_dag, task.target)
    policy = SketchPolicy(task, RandomModel(seed=1), SMALL, seed=2, verbose=0,
                          init_search_callbacks=[SeedStates([seed])])  # fmt: skip
    prepared = policy.prepare_round(4)
    assert prepared.seeds == 1 and state_key(prepared.inputs[0].state) == state_key(seed)
    assert not policy.pending_seeds and state_key(seed) in policy.measured_keys
    # The scheduler picked another task: the seed is pending again, no pick stays "measured".
    policy.release_round(prepared)
    assert [state_key(s) for s in policy.pending_seeds] == [state_key(seed)]
    assert not {state_key(inp.state) for inp in prepared.inputs} & policy.measured_keys
    first = policy.prepare_round(4)
    assert state_key(first.inputs[0].state) == state_key(seed)
    # Searched while ``first`` is measured: none of it is picked again.
    again = policy.prepare_round(4, in_flight=first.inputs)
    assert again.seeds == 0 and len(again.inputs) == 4
    in_flight = {state_key(inp.state) for inp in first.inputs}
    assert not in_flight & {state_key(inp.state) for inp in again.inputs}


def test_local_cpu_overlaps_the_search_with_building_only(monkeypatch):
    ahead, searching = _watch_search(monkeypatch)
    built_beside, ran_beside = [], []

    def build(inputs):
        if not built_beside:
            ahead.wait(1)  # the first build goes on while the next round is searched
        built_beside.append(searching.is_set())

    runner = _Runner(lambda inputs: ran_beside.append(searching.is_set()))
    ts, log = _tune(monkeypatch, "build", builder=_Builder(build), runner=runner)
    assert ts.overlap == "build" and len(log.rows) == 16
    assert any(built_beside)  # a build overlapped a search
    assert ran_beside and not any(ran_beside)  # no run ever did


def test_single_task_search_overlaps_its_consecutive_rounds(monkeypatch):
    from autosched.measure.local import ProgramMeasurer

    ahead, _ = _watch_search(monkeypatch)
    seen = []

    def run_waits(inputs):
        if len(seen) < 3:  # rounds 1-3 of 4: the next round's search starts meanwhile
            seen.append(ahead.wait(len(seen) + 1))

    monkeypatch.setenv("AUTOSCHED_OVERLAP", "full")
    task = _tasks()[0]
    policy = SketchPolicy(task, RandomModel(seed=3), SMALL, seed=4, verbose=0)
    log = _Log()
    measurer = ProgramMeasurer(_Builder(), _Runner(run_waits), [log])
    policy.search(16, None, 4, measurer)
    assert seen == [True, True, True]
    assert policy.num_trials == 16 == len(log.rows) == len({row[1] for row in log.rows})
    assert [r["trials"] for r in policy.ledger.rounds] == [4, 4, 4, 4]
    assert policy.ledger.overlap > 0 and policy._ahead is None


def test_error_in_the_measurement_surfaces_in_the_tuning_thread(monkeypatch):
    calls = []

    def boom(inputs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("runner bug")

    runner = _Runner(boom)
    with pytest.raises(RuntimeError, match="runner bug"):
        _tune(monkeypatch, "full", runner=runner)
    assert runner.closed and not _measure_threads()


def test_error_in_the_search_ahead_stops_the_measurement_cleanly(monkeypatch):
    original = SketchPolicy.prepare_round

    def prepare_round(self, num, population=None, in_flight=()):
        if in_flight:
            raise ValueError("search bug")
        return original(self, num, population, in_flight)

    monkeypatch.setattr(SketchPolicy, "prepare_round", prepare_round)
    runner = _Runner()
    with pytest.raises(ValueError, match="search bug"):
        _tune(monkeypatch, "full", runner=runner)
    assert runner.closed and not _measure_threads()


def test_interrupt_during_the_search_ahead_keeps_whole_batches(monkeypatch):
    from autosched.workers import TuningInterrupted

    original = SketchPolicy.prepare_round

    def prepare_round(self, num, population=None, in_flight=()):
        if in_flight:
            raise KeyboardInterrupt("SIGINT")  # Ctrl-C while the next round is searched
        return original(self, num, population, in_flight)

    monkeypatch.setattr(SketchPolicy, "prepare_round", prepare_round)
    runner = _Runner()
    log = _Log()
    with pytest.raises(TuningInterrupted, match="tuning stopped by SIGINT"):
        _tune(monkeypatch, "full", runner=runner, log=log)
    assert runner.closed and not _measure_threads()
    assert len(log.rows) in (0, 4)  # the round in flight: recorded whole or not at all
