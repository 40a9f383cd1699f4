"""GraphModule timing as the seed tutorials use it: ``module.module.time_evaluator`` and
``print(module.benchmark(...))`` (TVM's "Execution time summary" table)."""

import re

import numpy as np
import pytest

import runtime
from runtime.graph_executor import GraphModule, GraphPlan, TensorSpec
from runtime.timer import TimingResult

N = 64
# c[i] = a[i] + b[i] for i < 64
ADD = """
define i32 @add(ptr noalias %a, ptr noalias %b, ptr noalias %c) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %pa = getelementptr float, ptr %a, i64 %i
  %x = load float, ptr %pa
  %pb = getelementptr float, ptr %b, i64 %i
  %y = load float, ptr %pb
  %s = fadd float %x, %y
  %pc = getelementptr float, ptr %c, i64 %i
  store float %s, ptr %pc
  %i1 = add i64 %i, 1
  %d = icmp eq i64 %i1, 64
  br i1 %d, label %done, label %loop
done:
  ret i32 0
}
"""


@pytest.fixture(scope="module")
def module():
    kernel = {
        "lang": "llvm",
        "code": ADD,
        "params": [["a", "float32", N], ["b", "float32", N], ["c", "float32", N]],
        "workspaces": [],
        "launches": [["add", ["a", "b", "c"], [1, 1, 1], [1, 1, 1]]],
    }
    plan = GraphPlan(
        kernels=(kernel,),
        storages=(("float32", N), ("float32", N), ("float32", N)),
        inputs={"a": TensorSpec(0, (N,), "float32"), "b": TensorSpec(1, (N,), "float32")},
        outputs=(TensorSpec(2, (N,), "float32"),),
        constants={},
        calls=((0, (0, 1, 2)),),
    )
    return GraphModule(plan, runtime.device("cpu"))


def test_module_time_evaluator_runs_the_graph(module):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(N).astype("float32"), rng.standard_normal(N).astype("float32")
    module.set_input("a", a)
    module.set_input("b", b)
    dev = runtime.device("cpu")
    ftimer = module.module.time_evaluator("run", dev, repeat=3, min_repeat_ms=5)
    result = ftimer()
    prof_res = np.array(ftimer().results) * 1e3  # the seed's line
    assert prof_res.shape == (3,) and (prof_res > 0).all()
    assert len(result.results) == 3 and result.mean > 0
    # The timed runs are the graph's: its output is the sum.
    np.testing.assert_array_equal(module.get_output(0).numpy(), a + b)
    # The named functions, as TVM's module["run"].
    module.module["run"]()
    with pytest.raises(ValueError, match="only the graph's 'run'"):
        module.module.time_evaluator("get_output", dev)
    with pytest.raises(ValueError, match="no function 'execute'"):
        module.module["execute"]


def test_time_evaluator_refuses_another_device(module):
    with pytest.raises(ValueError, match="runs on device"):
        module.module.time_evaluator("run", runtime.device("opencl"))


def test_benchmark_prints_tvms_summary_table(module):
    result = module.benchmark(runtime.device("cpu"), repeat=3, min_repeat_ms=5)
    assert isinstance(result, TimingResult) and len(result.results) == 3
    lines = str(result).split("\n")
    assert lines[0] == "Execution time summary:"
    assert lines[1] == " mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)  "
    row = [float(x) for x in lines[2].split()]
    ms = np.array(result.results) * 1e3
    expected = [ms.mean(), np.median(ms), ms.max(), ms.min(), ms.std()]
    np.testing.assert_allclose(row, expected, atol=1e-4)
    # Each value centred in a 12-wide column, one space apart, as TVM prints it.
    assert re.fullmatch(r"( {1,}\d+\.\d{4} {1,}){1}( {1,}\d+\.\d{4} {1,}){4}", lines[2])
    assert len(lines[2]) == 5 * 12 + 4


def test_timing_result_statistics():
    r = TimingResult(mean=0.002, median=0.002, results=(0.001, 0.002, 0.003))
    assert (r.max, r.min) == (0.003, 0.001)
    assert r.std == pytest.approx(np.std([0.001, 0.002, 0.003]))
    row = "   2.0000       2.0000       3.0000       1.0000       0.8165   "
    assert str(r).split("\n")[2] == row
