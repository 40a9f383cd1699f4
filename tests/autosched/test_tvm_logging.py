"""TVM's logging tips reach our loggers: ``logging.getLogger("autotvm")`` (seed 004's debug
tip) and ``logging.getLogger("auto_scheduler")`` get the tuners' messages (autosched/logs.py)."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import autosched as ansor
from autosched import autotvm
from autosched import workloads as W
from autosched.measure.data import BuildResult, MeasureResult

ROOT = Path(__file__).resolve().parents[2]


class _Builder:
    n_parallel = 2

    def build(self, inputs):
        return [BuildResult({}) for _ in inputs]


class _Runner:
    def run(self, inputs, build_results):
        return [MeasureResult((1e-3 * (1 + i),), 0, "", 0.0, 1.0) for i in range(len(inputs))]


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def handler_on():
    """``handler_on(name)``: a collecting handler on that logger at DEBUG, as the tips do."""
    added = []

    def attach(name):
        logger, handler = logging.getLogger(name), _Collect()
        added.append((logger, handler, logger.level))
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
        return handler

    yield attach
    for logger, handler, level in added:
        logger.removeHandler(handler)
        logger.setLevel(level)


@autotvm.template("test/logging_matmul")
def _logging_matmul(n):
    A = ansor.te.placeholder((n, n), name="A")
    B = ansor.te.placeholder((n, n), name="B")
    k = ansor.te.reduce_axis((0, n), name="k")
    C = ansor.te.compute((n, n), lambda i, j: ansor.te.sum(A[i, k] * B[k, j], axis=k), "C")
    s = ansor.ComputeDAG([A, B, C]).get_init_state()
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", s[C].iters[0], num_outputs=2)
    cfg["tile_y"].apply(s, C, s[C].iters[0])
    return s, [A, B, C]


def test_autotvm_logger_gets_every_measurement_of_the_tuner(handler_on):
    got = handler_on("autotvm")
    task = autotvm.task.create("test/logging_matmul", (64,), target="llvm")
    tuner = autotvm.tuner.RandomTuner(task)
    tuner.tune(n_trial=3, measure_option={"builder": _Builder(), "runner": _Runner()})
    lines = [r.getMessage() for r in got.records]
    # TVM's debug line per measurement: "No: 1	GFLOPS: ...	result: ...	config"
    assert sum(line.startswith("No: ") and "GFLOPS" in line for line in lines) == 3, lines
    assert any(line.startswith("tuning ") for line in lines)


def test_auto_scheduler_logger_gets_the_search_progress(handler_on):
    got = handler_on("auto_scheduler")
    task = ansor.SearchTask(ansor.ComputeDAG(W.matmul_relu(16, 16, 16)), target="llvm")
    opts = ansor.TuningOptions(num_measure_trials=2, num_measures_per_round=2, verbose=0,
                               builder=_Builder(), runner=_Runner())  # fmt: skip
    task.tune(opts)
    rounds = [r for r in got.records if "round 1: trials 2/2" in r.getMessage()]
    assert rounds and rounds[0].name == "autosched.search.policy"  # getLogger(__name__)


def test_tvm_loggers_are_children_of_autosched(handler_on):
    # Configuring the one "autosched" logger still sees both.
    got = handler_on("autosched")
    logging.getLogger("autotvm").debug("from autotvm")
    logging.getLogger("auto_scheduler.task_scheduler").debug("from the task scheduler")
    assert [r.getMessage() for r in got.records] == ["from autotvm", "from the task scheduler"]


def _run(script: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)  # fmt: skip


def test_seed_tip_at_the_top_of_the_script_prints_debug_lines():
    # Seed 004: the tip goes "at the beginning of your script", before importing anything,
    # and adds no handler; the debug lines still print (once), as in TVM.
    proc = _run(
        "import logging\n"
        "logging.getLogger('autotvm').setLevel(logging.DEBUG)\n"
        "import autosched\n"
        "logging.getLogger('autotvm').debug('a measurement line')\n"
        "logging.getLogger('autotvm').info('an info line')\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == ["a measurement line", "an info line"]


def test_tip_with_a_handler_prints_once_and_untouched_loggers_stay_quiet():
    proc = _run(
        "import logging, sys\n"
        "import autosched\n"
        "logging.getLogger('auto_scheduler').debug('not shown: level WARNING')\n"
        "logging.getLogger('autotvm').setLevel(logging.DEBUG)\n"
        "logging.getLogger('autotvm').addHandler(logging.StreamHandler(sys.stdout))\n"
        "logging.getLogger('autotvm').debug('a measurement line')\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["a measurement line"] and proc.stderr == ""


def test_tvm_names_are_the_parents_of_the_module_loggers(handler_on):
    # Modules log to getLogger(__name__); TVM's names sit between them and "autosched".
    tvm, search, ours = handler_on("autotvm"), handler_on("auto_scheduler"), handler_on("autosched")
    for name in ("autosched.autotvm.tuner.tuner", "autosched.search.policy",
                 "autosched.cost_model.feature_pool", "autosched.network.task_scheduler",
                 "autosched.tuning"):  # fmt: skip
        logging.getLogger(name).debug(name)
    assert [r.name for r in tvm.records] == ["autosched.autotvm.tuner.tuner"]
    assert [r.name for r in search.records] == [
        "autosched.search.policy", "autosched.cost_model.feature_pool",
        "autosched.network.task_scheduler",
    ]  # fmt: skip
    assert len(ours.records) == 5


def test_library_loggers_are_named_after_their_modules():
    # One rule, no hand-typed names: getLogger(__name__) (tensorir, codegen and runtime:
    # f"autosched.{__name__}", to stay under the one "autosched" root).
    import ast

    typed = []
    for pkg in ("autosched", "tensorir", "codegen", "runtime"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path.relative_to(ROOT).as_posix() == "autosched/logs.py":
                continue  # the TVM names themselves
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Call) and ast.unparse(node.func) == "logging.getLogger"
                        and node.args and isinstance(node.args[0], ast.Constant)):  # fmt: skip
                    typed.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not typed, f"hand-typed logger names: {typed}"


def test_tip_and_a_handler_below_it_print_once():
    proc = _run(
        "import logging, sys\n"
        "import autosched\n"
        "logging.getLogger('autotvm').setLevel(logging.DEBUG)\n"
        "logging.getLogger('autosched.autotvm').addHandler(logging.StreamHandler(sys.stdout))\n"
        "logging.getLogger('autosched.autotvm.tuner.tuner').debug('a measurement line')\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["a measurement line"] and proc.stderr == ""
