"""TVM MetaSchedule on a whole ONNX network: the TVM side of ``bench_vs_metaschedule.py``.

Standalone: it runs under TVM's own virtualenv and imports nothing from autosched (only its
sibling ``tvm_baseline.py``, for the build function and the target)::

    /work/tvm-venv/bin/python benchmarks/metaschedule_network.py tune \\
        --onnx resnet-18.onnx --work-dir /tmp/ms --threads 2
    /work/tvm-venv/bin/python benchmarks/metaschedule_network.py evaluate \\
        --onnx resnet-18.onnx --input x.npy --ref ref.npy --threads 2 --db /tmp/ms-at-60 ...

``tune`` imports the network with Relax's ONNX frontend, prepares it as
``relax.pipeline.static_shape_tuning_pipeline`` does (DecomposeOpsForInference,
CanonicalizeBindings, the zero pipeline: legalize and fuse) and tunes every fused task with
``meta_schedule.relax_integration.tune_relax`` (its defaults: gradient task scheduler,
evolutionary search, XGBoost cost model, 64 trials per task per iteration) into the JSON database
of ``--work-dir``, which MetaSchedule appends to as each measurement is committed. MetaSchedule
has no time budget: the caller stops it (SIGTERM) after its seconds and truncates the database
by the time each record line appeared.

``evaluate`` compiles the network with each database given (``compile_relax``: the best record
of every task, the default lowering for tasks without one), checks the output against ``--ref``
on ``--input`` and times the VM's ``main`` with TVM's own ``time_evaluator``. One JSON line per
database on stdout; TVM's logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

_HERE = str(Path(__file__).resolve().parent)
sys.path.insert(0, _HERE)
# MetaSchedule's build workers unpickle the build function by its module name: they need the
# directory of tvm_baseline on their path too (they inherit the environment).
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_HERE, os.environ.get("PYTHONPATH")]))

import tvm_baseline  # noqa: E402 - exits with a clear message when TVM is not importable
from tvm_baseline import (  # noqa: E402
    _build_without_tensor_intrin,
    _stdout_to_stderr,
    check_tuning_deps,
    host_cpu,
    target_config,
)

tvm = tvm_baseline.tvm
ms = tvm_baseline.ms


def prepared_module(onnx_path: str, input_name: str, input_shape: list[int], target):
    """The ONNX network as a Relax module, legalized and fused as before tuning."""
    import onnx
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    mod = from_onnx(onnx.load(onnx_path), shape_dict={input_name: input_shape})
    with target:
        return tvm.transform.Sequential(
            [
                relax.transform.DecomposeOpsForInference(),
                relax.transform.CanonicalizeBindings(),
                relax.get_pipeline("zero"),
            ]
        )(mod)


def tune(args, target) -> int:
    check_tuning_deps()
    mod = prepared_module(args.onnx, args.input_name, args.input_shape, target)
    tasks = ms.relax_integration.extract_tasks(mod, target)
    print(json.dumps({"event": "tasks", "tasks": len(tasks), "time": time.time()}), flush=True)
    builder = ms.builder.LocalBuilder(
        f_build=_build_without_tensor_intrin, timeout_sec=args.build_timeout
    )
    runner = ms.runner.LocalRunner(timeout_sec=args.run_timeout)
    with _stdout_to_stderr():
        ms.relax_integration.tune_relax(
            mod,
            {},
            target,
            args.work_dir,
            max_trials_global=args.max_trials,
            num_trials_per_iter=args.trials_per_iter,
            builder=builder,
            runner=runner,
            seed=args.seed,
        )
    print(json.dumps({"event": "done", "time": time.time()}), flush=True)
    return 0


def evaluate(args, target) -> int:
    from tvm import relax

    mod = prepared_module(args.onnx, args.input_name, args.input_shape, target)
    x = np.load(args.input)
    ref = np.load(args.ref)
    dev = tvm.cpu(0)
    x_tvm = tvm.runtime.tensor(x, dev)
    failed = False
    for db_dir in args.db:
        t0 = time.perf_counter()
        database = ms.database.JSONDatabase(work_dir=db_dir)
        with _stdout_to_stderr():
            exe = ms.relax_integration.compile_relax(database, mod, target, None)
        compile_s = time.perf_counter() - t0
        vm = relax.VirtualMachine(exe, dev)
        out = vm["main"](x_tvm)
        out = (out if hasattr(out, "numpy") else out[0]).numpy()
        err = float(np.max(np.abs(out.astype(np.float64) - ref)))
        ok = bool(np.allclose(out, ref, rtol=args.rtol, atol=args.atol))
        failed = failed or not ok
        res = vm.time_evaluator("main", dev, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms)(
            x_tvm
        )
        row = {
            "db": db_dir,
            "records": len(database.get_all_tuning_records()),
            "latency_ms": float(np.median(res.results)) * 1e3,
            "max_abs_err": err,
            "correct": ok,
            "compile_s": round(compile_s, 2),
            "tvm_version": tvm.__version__,
        }
        print(json.dumps(row), flush=True)
    return 1 if failed else 0


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["tune", "evaluate"])
    p.add_argument("--onnx", required=True)
    p.add_argument("--input-name", default="data")
    p.add_argument("--input-shape", default="1,3,224,224")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="target num-cores")
    p.add_argument("--mcpu", default=None, help="LLVM CPU name (default: the host's)")
    # tune
    p.add_argument("--work-dir", help="tune: where MetaSchedule writes its JSON database")
    p.add_argument("--max-trials", type=int, default=100000, help="tune: max_trials_global")
    p.add_argument("--trials-per-iter", type=int, default=64, help="tune: num_trials_per_iter")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--build-timeout", type=float, default=30.0)
    p.add_argument("--run-timeout", type=float, default=30.0)
    # evaluate
    p.add_argument("--db", action="append", default=[], help="evaluate: a database directory")
    p.add_argument("--input", help="evaluate: the input (.npy, the ONNX model's layout)")
    p.add_argument("--ref", help="evaluate: the reference output (.npy)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--min-repeat-ms", type=int, default=100)
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-5)
    args = p.parse_args(argv)
    args.input_shape = [int(d) for d in args.input_shape.split(",")]
    if args.command == "tune" and not args.work_dir:
        p.error("tune needs --work-dir")
    if args.command == "evaluate" and not (args.db and args.input and args.ref):
        p.error("evaluate needs --db (one or more), --input and --ref")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    target = tvm.target.Target(target_config(args.mcpu or host_cpu(), args.threads))
    return tune(args, target) if args.command == "tune" else evaluate(args, target)


if __name__ == "__main__":
    sys.exit(main())
