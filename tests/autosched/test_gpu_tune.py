"""End-to-end ``task.tune`` for an OpenCL task (PoCL on the CPU here).

The LocalRunner measures on the CPU device only (the GPU runner is another engineer's work), so
this test measures with a small in-process builder / runner that loads the OpenCL module,
checks it against the reference interpreter and times it.
"""

import time

import numpy as np
import pytest

from autosched import testing as W
from autosched.annotate_gpu import gpu_state_errors
from autosched.build_module import generate_source
from autosched.measure import BuildResult, MeasureErrorNo, MeasureResult
from autosched.search_params import SearchParams
from autosched.search_policy import SketchPolicy
from autosched.task import SearchTask
from autosched.tuning import TuningOptions
from tensorir.dag import ComputeDAG
from tensorir.interp import eval_dag


def _opencl_device():
    try:
        import runtime

        return runtime.device("opencl")
    except Exception:  # noqa: BLE001 - no pyopencl / no platform
        return None


class InProcessBuilder:
    n_parallel = 1

    def build(self, inputs):
        out = []
        for inp in inputs:
            t0 = time.perf_counter()
            try:
                src = generate_source(inp.state, inp.task.target).as_dict()
            except Exception as exc:  # noqa: BLE001 - becomes a result like LocalBuilder's
                out.append(BuildResult(None, MeasureErrorNo.COMPILE_HOST, str(exc)))
                continue
            out.append(BuildResult(src, time_cost=time.perf_counter() - t0))
        return out


class InProcessOpenCLRunner:
    def __init__(self, dev):
        self.dev = dev
        self.checked = 0

    def run(self, inputs, built):
        from runtime import load_module

        out = []
        for inp, br in zip(inputs, built, strict=True):
            if br.source is None:
                out.append(MeasureResult((1e10,), br.error_no, br.error_msg))
                continue
            dag = inp.task.compute_dag
            rng = np.random.default_rng(0)
            ins = {t.name: rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in dag.input_tensors}
            refs = dict(zip([t.name for t in dag.output_tensors],
                            eval_dag(dag, list(ins.values()))))  # fmt: skip
            outs = {n: np.full(r.shape, np.nan, r.dtype) for n, r in refs.items()}
            mod = load_module(**br.source, device=self.dev)
            args = [ins[p[0]] if p[0] in ins else outs[p[0]] for p in mod.params]
            mod(*args)
            for n, r in refs.items():
                np.testing.assert_allclose(outs[n], r, rtol=1e-4, atol=1e-4)
            self.checked += 1
            costs = mod.time_evaluator(number=1, repeat=2)(*args).results
            out.append(MeasureResult(tuple(costs), timestamp=time.time()))
        return out


@pytest.mark.skipif(_opencl_device() is None, reason="no OpenCL device")
def test_tune_opencl_matmul_relu():
    task = SearchTask(ComputeDAG(W.matmul_relu(64, 64, 64)), target="opencl")
    params = SearchParams(evolutionary_search_population=32, evolutionary_search_num_iters=1,
                          sample_init_min_population=8)  # fmt: skip
    policy = SketchPolicy(task, params=params, seed=0, verbose=0)
    runner = InProcessOpenCLRunner(_opencl_device())
    opts = TuningOptions(num_measure_trials=6, num_measures_per_round=3, verbose=0,
                         builder=InProcessBuilder(), runner=runner)  # fmt: skip
    best = task.tune(opts, search_policy=policy)
    assert best is not None
    assert runner.checked == 6 and policy.num_trials == 6
    assert gpu_state_errors(task, best) == []
    assert any(it.annotation == "threadIdx.x" for it in best["T_relu"].iters)
    assert len(policy.measured) == 6
