"""Build seconds per CPU candidate, by phase (issue 29: the builders' LLVM cost).

    python benchmarks/bench_build.py                   # 20 states per task, 3 resnet-18 tasks
    python benchmarks/bench_build.py --states 10       # fewer
    python benchmarks/bench_build.py --profile 30      # and cProfile's top 30 (cumulative)

The workload is fixed (seeded) as in ``bench_features.py``: for three resnet-18 tasks on
``llvm`` (the 3x3 conv2d at 56x56x64, task 2; a winograd conv2d, task 9; the dense layer,
task 22) the first ``--states`` states of that benchmark's workload (the initial population
sampled by the policy, then mutations of it). Each state is built as a builder worker builds
it (:func:`autosched.measure.worker.build_one`), with every phase timed apart:

- ``lower``: replay the steps and lower (``lower_for``, the layout rewrite on);
- ``codegen``: loop IR -> LLVM IR text (``emit_source``, codegen/llvm.py);
- ``parse``: llvmlite parses and verifies the text;
- ``optimize``: the O3 pass pipeline (runtime.cpu._optimize);
- ``emit``: machine code to an object file (TargetMachine.emit_object).

Seconds are CPU seconds of this process (``time.process_time``: less sensitive to a shared
machine's load than wall time; compare runs made side by side). The object code's size and a
hash of all objects are printed too, so that two versions of the compiler can be checked to
give the same machine code.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import os
import pstats
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_features import workload  # noqa: E402

import runtime.cpu as cpu  # noqa: E402
from autosched.kernel import emit_source, lower_for  # noqa: E402

PHASES = ("lower", "codegen", "parse", "optimize", "emit")


def build_phases(task, state, split: Counter) -> bytes:
    """Build ``state`` of ``task`` as a builder does; add each phase's CPU seconds to
    ``split``; return the object code."""
    clock = time.process_time
    t0 = clock()
    program = lower_for(state, task.target, "main", layout_rewrite=True)
    t1 = clock()
    code = emit_source(program, task.target).code
    t2 = clock()
    mod = cpu._parse(code)
    t3 = clock()
    tm = cpu._target_machine()
    cpu._optimize(mod, tm)
    t4 = clock()
    obj = bytes(tm.emit_object(mod))
    t5 = clock()
    for name, dt in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
        split[name] += dt
    split["ir_kb"] += len(code) / 1024
    split["obj_kb"] += len(obj) / 1024
    return obj


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--states", type=int, default=20, help="states per task")
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's top N")
    args = parser.parse_args(argv)
    work = workload(args.states)
    build_phases(*work[0][0:1], work[0][1][0], Counter())  # warm up: LLVM's one-time set-up
    prof = cProfile.Profile() if args.profile else None
    digest = hashlib.sha256()
    total: Counter = Counter()
    n_all = 0
    for task, states in work:
        split: Counter = Counter()
        if prof:
            prof.enable()
        for state in states:
            digest.update(build_phases(task, state, split))
        if prof:
            prof.disable()
        n = len(states)
        n_all += n
        total.update(split)
        per = sum(split[k] for k in PHASES) / n
        cells = ", ".join(f"{k} {1e3 * split[k] / n:.1f}" for k in PHASES)
        print(
            f"{task.desc}: {1e3 * per:.1f} ms/state ({cells}); "
            f"IR {split['ir_kb'] / n:.0f} KiB, object {split['obj_kb'] / n:.1f} KiB"
        )
    cells = ", ".join(f"{k} {total[k]:.2f}" for k in PHASES)
    print(f"total: {sum(total[k] for k in PHASES):.2f} CPU s for {n_all} states ({cells})")
    print(f"objects sha256: {digest.hexdigest()[:16]}")
    if prof:
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(args.profile)
        print(text.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
