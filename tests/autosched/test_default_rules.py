"""One place decides which sketch rules a target gets: ``default_rules(target)``, used by
``generate_sketches`` and by ``PreloadCustomSketchRule``."""

from autosched import testing as W
from autosched.hardware import HardwareParams
from autosched.search.policy import PreloadCustomSketchRule, SketchPolicy
from autosched.search.sketch import default_rules, generate_sketches
from autosched.search.sketch_rules import SKIP, cpu_rules
from autosched.search.sketch_rules_gpu import gpu_rules
from autosched.task import SearchTask
from codegen.target import Target
from tensorir.dag import ComputeDAG


def _types(rules):
    return [type(r) for r in rules]


def test_default_rules_by_target():
    assert _types(default_rules(Target("llvm"))) == _types(cpu_rules())
    assert _types(default_rules(Target("cuda"))) == _types(gpu_rules())
    assert _types(default_rules(Target("opencl"))) == _types(gpu_rules())
    assert _types(cpu_rules()) != _types(gpu_rules())  # else the checks above prove nothing


def test_generate_sketches_defaults_to_default_rules():
    task = SearchTask(ComputeDAG(W.matmul(64, 64, 64)), target="llvm")
    got = generate_sketches(task)
    same = generate_sketches(task, rules=default_rules(task.target))
    assert [s.to_json() for s in got] == [s.to_json() for s in same]


def test_custom_rule_goes_before_the_targets_default_rules():
    def cond(ctx, state, sid):
        return SKIP

    for target, expected in (("llvm", cpu_rules()), ("cuda", gpu_rules())):
        hw = HardwareParams(num_cores=4)  # no device read
        task = SearchTask(ComputeDAG(W.matmul(64, 64, 64)), target=target, hardware_params=hw)
        policy = SketchPolicy(task, verbose=0)
        PreloadCustomSketchRule(cond, lambda ctx, state, sid: [], "noop").enter(policy)
        assert policy.sketch_rules[0].name == "noop"
        assert _types(policy.sketch_rules[1:]) == _types(expected)
