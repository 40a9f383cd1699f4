"""Remote candidates are built once, by the server (issue 29): which runners skip the local
build, how the server classifies a failed build or run and reports its build, how the runner
turns that report into build results, and how the timing ledger charges the servers' builds.
No processes: the server's device process and the runner's servers are stand-ins here;
tests/autosched/test_rpc.py runs the same paths against real servers."""

import math

import pytest

import autosched as ansor
from autosched import workloads
from autosched.measure import MeasureErrorNo
from autosched.measure.data import BuildResult, MeasureInput, MeasureResult
from autosched.measure.local import LocalBuilder, LocalRunner, ProgramMeasurer, runner_builds
from autosched.measure.timing import TimeLedger
from autosched.rpc import server
from autosched.rpc.runner import RPCRunner, check_build_report
from autosched.rpc.wire import BadReply

E = MeasureErrorNo
PHASES = {"lower": 0.02, "codegen": 0.01, "compile": 0.2}


@pytest.fixture(scope="module")
def task():
    return ansor.SearchTask(ansor.ComputeDAG(workloads.matmul(16, 16, 16)), target="llvm")


def _runner() -> RPCRunner:  # never connects in these tests
    return RPCRunner("unit", "127.0.0.1", 1, timeout=5)


class _CustomBuilder:
    n_parallel = 1

    def build(self, inputs):
        raise AssertionError("not called in these tests")


def test_only_a_plain_local_builder_is_skipped_for_a_runner_that_builds():
    rpc = _runner()
    assert runner_builds("local", rpc) and runner_builds(LocalBuilder(n_parallel=1), rpc)
    assert runner_builds(ansor.autotvm.LocalBuilder(n_parallel=1), rpc)
    # A builder that also links each candidate with the board's toolchain checks something
    # the server does not: it still builds here. So does a builder of the user's own.
    assert not runner_builds(LocalBuilder(n_parallel=1, build_func="ndk"), rpc)
    assert not runner_builds(_CustomBuilder(), rpc)
    assert not runner_builds("local", LocalRunner()) and not runner_builds("local", "local")


# ----------------------------------------------------------------------------- the server


def _payload(task) -> dict:
    return _runner()._payload(MeasureInput(task, task.compute_dag.get_init_state()))


def _serve(monkeypatch, replies: list) -> list:
    """Make this process a CPU server whose device process answers ``replies`` in turn;
    returns the list of ops it was asked."""
    asked = []
    monkeypatch.setattr(server, "_server", {"key": "unit", "devices": ("cpu",), "workdir": None})
    monkeypatch.setattr(server, "_replace_device_process", lambda: asked.append("replaced"))

    def ask(op, kwargs, timeout):
        asked.append(op)
        return replies.pop(0)

    monkeypatch.setattr(server, "_ask", ask)
    return asked


BUILT = ("ok", {"error_no": 0, "error_msg": "", "build_s": 0.25, "phases": PHASES})


@pytest.mark.parametrize(
    ("replies", "code", "built", "words"),
    [
        # The build crashed or hung the device process: build errors, as a local build's.
        ([("died", "died of SIGSEGV")], E.COMPILE_HOST, False, "building on"),
        ([("timeout", None)], E.BUILD_TIMEOUT, False, "building the candidate did not finish"),
        ([("error", "build_candidate: KeyError: 'steps'")], E.INSTANTIATION_ERROR, False,
         "refuses the state"),
        # The build itself reported an error (here a step that does not replay).
        ([("ok", {"error_no": 1, "error_msg": "building on the server: replaying the steps",
                  "build_s": 0.01, "phases": {}})],
         E.INSTANTIATION_ERROR, False, "replaying the steps"),
        # Built; then the run crashed, hung, was wrong or ran.
        ([BUILT, ("died", "died of SIGSEGV")], E.RUNTIME_DEVICE, True, "died of SIGSEGV"),
        ([BUILT, ("timeout", None)], E.RUN_TIMEOUT, True, "did not finish within"),
        ([BUILT, ("ok", ((), 5, "C differs", False))], E.WRONG_ANSWER, True, "C differs"),
        ([BUILT, ("ok", ((1e-5, 2e-5), 0, "", False))], E.NO_ERROR, True, ""),
    ],
)  # fmt: skip
def test_server_says_whether_the_build_or_the_run_failed(
    task, monkeypatch, replies, code, built, words
):
    n_replies = len(replies)
    asked = _serve(monkeypatch, replies)
    reply = server._measure(_payload(task), timeout=5.0)
    assert asked[:n_replies] == ["build_candidate", "run_candidate"][:n_replies]
    assert reply["error_no"] == code and words in reply["error_msg"], reply
    assert reply["built"] is built and "replaced" not in asked
    assert set(reply["phases"]) <= set(PHASES)
    if built:
        assert reply["build_s"] == 0.25 and reply["phases"] == PHASES and reply["run_s"] >= 0
    report = (built, reply["build_s"], reply["run_s"], reply["phases"])
    assert check_build_report(reply, "s") == report


def test_measure_halves_are_not_operations_a_client_may_call(monkeypatch):
    _serve(monkeypatch, [])
    for op in ("build_candidate", "run_candidate"):
        text = server.device_call(op, {})
        assert b"unknown operation" in text, text


def test_server_refusal_is_a_failed_build_without_asking_the_device(task, monkeypatch):
    asked = _serve(monkeypatch, [])
    reply = server._measure(dict(_payload(task), target="cuda"), timeout=5.0)
    assert reply["error_no"] == E.COMPILE_DEVICE and "refuses" in reply["error_msg"]
    assert reply["built"] is False and asked == []


# ----------------------------------------------------------------------------- the runner


def _reply(**kw) -> dict:
    base = {"costs": [1e-4], "error_no": 0, "error_msg": "", "server": "s", "built": True,
            "build_s": 0.3, "phases": PHASES, "run_s": 0.1}  # fmt: skip
    return {**base, **kw}


def test_runner_turns_the_server_build_into_build_results():
    runner = _runner()
    res, build = runner._result(_reply(), 0.5, "tcp://s")
    assert res.error_no == 0 and res.costs == (1e-4,) and res.all_cost == 0.5
    assert build == BuildResult(None, 0, "", 0.3, PHASES)
    failed = _reply(costs=[], error_no=int(E.COMPILE_HOST), error_msg="building: LLVM",
                    built=False)  # fmt: skip
    res, build = runner._result(failed, 0.4, "tcp://s")
    assert res.error_no == build.error_no == E.COMPILE_HOST and res.mean_cost >= 1e9
    assert "building: LLVM" in build.error_msg and build.time_cost == 0.3
    # A run error is not a build error.
    res, build = runner._result(_reply(costs=[], error_no=int(E.WRONG_ANSWER)), 0.4, "tcp://s")
    assert res.error_no == E.WRONG_ANSWER and build.error_no == E.NO_ERROR
    # A reply without a report (an older server): no build result.
    old = {k: v for k, v in _reply().items() if k not in ("built", "build_s", "phases")}
    res, build = runner._result(old, 0.4, "tcp://s")
    assert build is None and res.error_no == 0


def test_build_and_run_returns_the_servers_builds_and_the_split(task, monkeypatch):
    runner = _runner()
    replies = [_reply(), _reply(costs=[], error_no=int(E.BUILD_TIMEOUT), built=False,
                                error_msg="build did not finish"), None]  # fmt: skip
    sent = []

    def run_jobs(op, todo, payload, finish, spent, results):  # the servers, answering
        for i in todo:
            sent.append(payload(i))
            if replies[i] is None:  # no reply: the runner's own error record
                results[i] = MeasureResult((1e10,), int(E.RUN_TIMEOUT), "no reply", 9.0)
            else:
                results[i] = finish(i, replies[i], 0.5, "tcp://s")

    monkeypatch.setattr(runner, "run_jobs", run_jobs)
    good = MeasureInput(task, task.compute_dag.get_init_state())

    class Unserialisable:
        dag = task.compute_dag
        steps = [object()]

    bad = MeasureInput(task, Unserialisable())
    builds, results = runner.build_and_run([good, good, good, bad])
    assert len(sent) == 3 and all(p["steps"] == [] and "dag" in p for p in sent)
    assert [r.error_no for r in results] == [0, E.BUILD_TIMEOUT, E.RUN_TIMEOUT,
                                             E.INSTANTIATION_ERROR]  # fmt: skip
    assert [b.error_no for b in builds] == [0, E.BUILD_TIMEOUT, 0, E.INSTANTIATION_ERROR]
    assert (results[0].build_s, results[0].run_s) == (0.3, pytest.approx(0.2))
    assert builds[0].phases == PHASES and builds[2].time_cost == 0.0
    assert "serialising the steps" in results[3].error_msg
    # What the servers said they spent, and the requests as seen here (transfer included).
    assert runner.server_seconds == {"build": 0.6, "run": 0.2, "request": 1.0}


@pytest.mark.parametrize(
    "bad",
    [{"built": "yes"}, {"build_s": -1.0}, {"build_s": math.nan}, {"run_s": "0.1"},
     {"phases": {"link": 0.1}}, {"phases": {"compile": math.inf}}, {"phases": [0.1]}],
)  # fmt: skip
def test_a_malformed_build_report_is_a_bad_reply_naming_the_server(bad):
    with pytest.raises(BadReply, match=r"malformed reply from tcp://h:1"):
        _runner()._result(_reply(**bad), 0.4, "tcp://h:1")


# ----------------------------------------------------------------------------- measurer


class _BuildingRunner:
    """A runner that builds its candidates itself, as RPCRunner's servers do."""

    builds_candidates = True

    def __init__(self):
        self.calls = 0

    def run(self, inputs, build_results):
        raise AssertionError("run() is for candidates built here")

    def build_and_run(self, inputs):
        self.calls += 1
        builds = [BuildResult(None, 0, "", 0.3, PHASES) for _ in inputs]
        results = [MeasureResult((1e-4,), 0, "", 0.5, 1.0, build_s=0.3, run_s=0.2)
                   for _ in inputs]  # fmt: skip
        return builds, results


def test_measurer_lets_a_building_runner_build_and_charges_its_builds(task, monkeypatch):
    builder = LocalBuilder(n_parallel=1)
    monkeypatch.setattr(builder, "build", _CustomBuilder().build)  # must not be called
    runner = _BuildingRunner()
    ledger = TimeLedger()
    inputs = [MeasureInput(task, task.compute_dag.get_init_state())] * 3
    with ledger.active():
        results = ProgramMeasurer(builder, runner).measure(inputs)
    assert runner.calls == 2 and len(results) == 3  # batches of 2 * n_parallel
    assert all(r.error_no == 0 and (r.build_s, r.run_s) == (0.3, 0.2) for r in results)
    sec = ledger.seconds
    # The servers' build stages are charged, in proportion; nothing waited for builders.
    assert sec["compile"] > sec["lower"] > sec["codegen"] > 0 and sec["wait"] == 0
    assert sum(sec.values()) <= ledger.wall()
    assert builder._pool is None  # no builder process was started
