"""Lesson 9: template tuning with AutoTVM.

Before Ansor there was AutoTVM: a person writes the schedule once as a *template* and leaves
some choices open as *knobs* (a tile size, whether to vectorize). The knobs span a
``ConfigSpace``; a *tuner* measures configurations from it and keeps the fastest. The search
of lessons 6 to 8 needs no template but searches a much larger space; here the space is small
and hand-made. Templates schedule with the same ``State`` steps, so building, measuring and
record files are shared. Lines starting with ``~`` depend on measurements.
"""

import os
import tempfile
from pathlib import Path

import numpy as np

import autosched as ansor
from autosched import autotvm, te
from autosched.autotvm.tuner import RandomTuner, XGBTuner


@autotvm.template("lesson/matmul")
def matmul(N, L, M, dtype):
    """C = A @ B, tiled: how to tile rows and columns and whether to vectorize are knobs."""
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = ansor.ComputeDAG([A, B, C]).get_init_state()
    cfg = autotvm.get_config()  # the configuration being defined, tuned or applied
    y, x, kk = s[C].iters
    cfg.define_split("tile_y", y, num_outputs=2)  # [-1, f]: every divisor f of N
    cfg.define_split("tile_x", x, num_outputs=2)
    cfg.define_knob("vec", [True, False])
    yo, yi = cfg["tile_y"].apply(s, C, y)  # s.split(C, y, [f])
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s.reorder(C, [yo, xo, kk, yi, xi])
    if cfg["vec"].val:
        s.vectorize(C, xi)
    return s, [A, B, C]


# AUTOSCHED_LESSON_QUICK=1 (the test suite): a small matrix and 8 trials per tuner.
quick = bool(os.environ.get("AUTOSCHED_LESSON_QUICK"))
N = 64 if quick else 256
trials = 8 if quick else 48
task = autotvm.task.create("lesson/matmul", args=(N, N, N, "float32"), target="llvm")
print(f"== the task: workload {task.workload}, {task.flop:.0f} FLOPs")
print(task.config_space)

# A configuration is a number; each knob is one digit of it (the first knob varies fastest).
# A ConfigEntity prints as TVM prints it: the knobs, the template key (None), the index.
config = task.config_space.get(17)
print(f"== configuration 17 = knob indices {task.config_space.knob_indices(17)}: {config}")
state, _ = task.instantiate(config)
print(state)

# Tune: each tuner proposes configurations, measures them (built and run in worker processes,
# each output checked against the reference interpreter) and keeps the best. RandomTuner tries
# configurations in a random order; XGBTuner trains a cost model (LightGBM) on every
# ``plan_size`` measurements and measures what it predicts fastest next.
log = Path(tempfile.mkdtemp()) / "matmul.log"
measure_option = autotvm.measure_option(
    builder=autotvm.LocalBuilder(n_parallel=2),  # also the batch size: 2 configurations a time
    runner=autotvm.LocalRunner(number=2, repeat=2, timeout=20),
)
tuners = {
    "random": RandomTuner(task, seed=0),
    # feature_type="knob": the model reads the knob values ("itervar", the default, reads the
    # lowered loops: better across templates, slower to compute).
    "xgb": XGBTuner(task, plan_size=4 if quick else 16, feature_type="knob", seed=1),
}
for name, tuner in tuners.items():
    tuner.tune(trials, measure_option=measure_option,
               callbacks=[autotvm.callback.log_to_file(log)])  # fmt: skip
    print(f"== {name}: {len(tuner.trace)} trials, all in {log.name}")
    print(f"~ {name}: best {tuner.best_flops / 1e9:.2f} GFLOP/s at trial {tuner.best_iter + 1}"
          f" with {tuner.best_config}")  # fmt: skip
measure_option["builder"].close()
measure_option["runner"].close()

indices = [inp.config.index for inp, _ in autotvm.record.load_from_file(log)]
random_order, xgb_order = indices[:trials], indices[trials:]
plan = tuners["xgb"].plan_size
# RandomTuner's order depends only on its seed, and XGBTuner's first plan is random too (before
# any measurement there is no model); after it, the model trained on the measurements picks.
print("== the random tuner measured configurations", random_order)
print("== the xgb tuner's first plan (random, seed 1):", xgb_order[:plan])
print("~ then its model picked", xgb_order[plan:])

# Keep the best record per workload, and let the template answer with it.
best_log = log.with_name("matmul.best.log")
print(f"== pick_best kept {autotvm.record.pick_best(log, best_log)} record (one workload)")
with autotvm.apply_history_best(best_log), ansor.Target("llvm"):
    best_state, tensors = matmul(N, N, N, "float32")  # the template, with the best config
print("~ the best configuration's loop nest:")
for line in str(best_state).splitlines():
    print(f"~   {line}")

func = ansor.build(best_state, "llvm")
rng = np.random.default_rng(0)
a = rng.standard_normal((N, N)).astype("float32")
b = rng.standard_normal((N, N)).astype("float32")
c = np.full((N, N), np.nan, dtype="float32")
func(a, b, c)
print(f"== built with the best configuration; matches numpy: {np.allclose(c, a @ b, atol=1e-3)}")
seconds = func.time_evaluator(number=3, repeat=3)(a, b, c).mean
print(f"~ best: {seconds * 1e3:.3f} ms, {2 * N**3 / seconds / 1e9:.1f} GFLOP/s")
