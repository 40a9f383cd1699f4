"""resnet-18 tuned by autosched and by TVM MetaSchedule for the same seconds: both curves.

    python benchmarks/bench_vs_metaschedule.py --seconds 900 \\
        --figure docs/images/vs-metaschedule-resnet-18.png

One network, two tuners, one budget, the same threads (``--threads``, default 2), one after the
other on this machine:

1. the network: the zoo's resnet-18 batch 1. Ours tunes it in NHWC (the CLI's default);
   MetaSchedule gets the same network (the same weights: the zoo draws them
   layout-independently) exported to ONNX in NCHW, imported with Relax's ONNX frontend. Both
   compiled networks are checked against the same numpy reference on the same random input.
2. ours: ``python -m autosched tune --network resnet-18 --max-seconds S`` (the library's
   defaults, only a time budget), stopped with SIGTERM at S seconds after its start if it is
   still running.
3. MetaSchedule: ``metaschedule_network.py tune`` under TVM's virtualenv (``--tvm-python``;
   ``tune_relax`` with its defaults but ``--ms-trials-per-iter`` 16, and an unreachable trial
   count), stopped at S seconds after its start. Its records carry no time, so for both sides
   this script counts the complete lines of the record file every ``--poll`` seconds while the
   tuner runs: a record counts from when it is in the file.
4. at every checkpoint (``--every`` seconds, and S): ours' log cut to the lines it had by
   then, compiled with the history best and timed (``GraphModule.benchmark``: median of 3
   repeats of >= 100 ms); MetaSchedule's database cut the same way, compiled with
   ``compile_relax`` and timed with TVM's ``time_evaluator`` the same way. The clock of both
   starts when the tuning process is launched, so imports and task extraction count against
   each side's budget.

Writes ``curves.csv`` (side, seconds, records, latency_ms, max_abs_err), ``summary.json`` (the
final latencies, when ours first reached MetaSchedule's final latency) and the figure (both
curves in one plot; matplotlib, imported only then) into ``--work-dir``, the figure also to
``--figure``. The full run takes 2 x S plus the checkpoints' builds and timings;
run it on a quiet machine (both tuners measure on the same cores): about 40-45 min for 900 s.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NETWORK = "resnet-18"
MS_RECORDS = "database_tuning_record.json"
MS_WORKLOADS = "database_workload.json"
CSV_COLUMNS = ("side", "seconds", "records", "latency_ms", "max_abs_err")


# --------------------------------------------------------------------------------------------
# Pure parts: checkpoints, truncation by time, curves (tests/benchmarks/test_bench_vs_metaschedule)
# --------------------------------------------------------------------------------------------


def checkpoints(seconds: float, every: float) -> list[float]:
    """``every``, ``2 * every``, ... up to ``seconds``, and ``seconds`` itself."""
    if seconds <= 0 or every <= 0:
        raise ValueError(f"checkpoints: seconds ({seconds}) and every ({every}) must be > 0")
    points = [every * k for k in range(1, int(seconds // every) + 1)]
    if not points or not math.isclose(points[-1], seconds):
        points.append(float(seconds))
    return points


def complete_lines(text: str) -> int:
    """Lines ended by a newline: a line being appended while we read is not counted."""
    return text.count("\n")


def lines_at(progress: list[tuple[float, int]], seconds: float) -> int:
    """How many database lines existed ``seconds`` after the start, from the polled
    ``(seconds, lines)`` samples: the count of the last sample taken by then (0 before any).
    A line appended between two samples counts from the later one, so at most ``--poll``
    seconds late, never early."""
    n = 0
    for t, count in progress:
        if t > seconds:
            break
        n = max(n, count)
    return n


def head_lines(src: Path, dst: Path, n_lines: int) -> None:
    """Write the first ``n_lines`` complete lines of ``src`` to ``dst``."""
    lines = src.read_text().splitlines(keepends=True) if src.exists() else []
    complete = [line for line in lines if line.endswith("\n")]
    if n_lines > len(complete):
        raise ValueError(
            f"head_lines: {src} holds {len(complete)} complete lines, fewer than the "
            f"{n_lines} counted while tuning (was it rewritten?)"
        )
    dst.write_text("".join(complete[:n_lines]))


def truncate_ms_database(src: Path, dst: Path, n_records: int) -> None:
    """A copy of MetaSchedule's JSON database ``src`` in ``dst`` holding only its first
    ``n_records`` tuning records (all workloads: records refer to them by line number)."""
    dst.mkdir(parents=True, exist_ok=True)
    if (src / MS_WORKLOADS).exists():
        shutil.copyfile(src / MS_WORKLOADS, dst / MS_WORKLOADS)
    else:  # nothing committed yet
        (dst / MS_WORKLOADS).write_text("")
    head_lines(src / MS_RECORDS, dst / MS_RECORDS, n_records)


def time_to_reach(curve: list[tuple[float, float]], latency_ms: float) -> float | None:
    """The first checkpoint (seconds) of ``curve`` (``(seconds, latency_ms)`` pairs) whose
    latency is at most ``latency_ms``; None if it never gets there."""
    for seconds, value in sorted(curve):
        if value <= latency_ms:
            return seconds
    return None


def summarize(rows: list[dict]) -> dict:
    """Final latency of each side (at its last checkpoint) and when ours first reached
    MetaSchedule's final latency."""
    sides = {}
    for side in ("ours", "metaschedule"):
        curve = sorted((r["seconds"], r["latency_ms"]) for r in rows if r["side"] == side)
        if curve:
            sides[side] = curve
    out = {f"{side}_final_ms": curve[-1][1] for side, curve in sides.items()}
    for side in sides:
        out[f"{side}_final_records"] = max(r["records"] for r in rows if r["side"] == side)
    if "ours" in sides and "metaschedule" in sides:
        ms_final = sides["metaschedule"][-1][1]
        out["ms_over_ours"] = ms_final / sides["ours"][-1][1]
        out["ours_reaches_ms_final_at_s"] = time_to_reach(sides["ours"], ms_final)
        out["ms_reaches_ms_final_at_s"] = time_to_reach(sides["metaschedule"], ms_final)
    return out


def write_csv(rows: list[dict], path: Path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: (r["side"], r["seconds"])))


def plot(rows: list[dict], summary: dict, path: Path, title: str) -> None:
    """Both curves, latency against seconds, in one figure."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no figure: matplotlib is not installed (pip install matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    labels = {"ours": "autosched (python -m autosched tune)", "metaschedule": "TVM MetaSchedule"}
    for side, label in labels.items():
        pts = sorted((r["seconds"], r["latency_ms"]) for r in rows if r["side"] == side)
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=label)
    values = [r["latency_ms"] for r in rows]
    if values and max(values) > 20 * min(values):  # untuned starts are decades slower
        ax.set_yscale("log")
    if "metaschedule_final_ms" in summary:
        ax.axhline(summary["metaschedule_final_ms"], color="gray", ls=":", lw=1)
    ax.set_xlabel("seconds since the tuner started")
    ax.set_ylabel("network latency (ms, measured)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# Running the tuners
# --------------------------------------------------------------------------------------------


def _env(threads: int) -> dict:
    env = dict(os.environ)
    env["AUTOSCHED_NUM_THREADS"] = str(threads)
    env["TVM_NUM_THREADS"] = str(threads)
    return env


def _stop(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM the process group (the tuner and its build/run workers), SIGKILL after
    ``grace`` seconds."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_for(cmd: list[str], seconds: float, env: dict, log: Path, poll=None, every=1.0):
    """Run ``cmd`` (its own process group, output to ``log``) until it exits or ``seconds``
    pass; calls ``poll()`` every ``every`` seconds meanwhile. Returns (start Unix time, exit
    code or None when stopped)."""
    with open(log, "w") as out:
        start = time.time()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
        try:
            while proc.poll() is None and time.time() - start < seconds:
                if poll is not None:
                    poll(time.time() - start)
                time.sleep(min(every, max(0.0, seconds - (time.time() - start))))
        finally:
            stopped = proc.poll() is None
            if poll is not None:
                poll(time.time() - start)
            _stop(proc)
    return start, None if stopped else proc.returncode


def tune_watched(cmd, args, out: Path, watched: Path) -> list[tuple[float, int]]:
    """Run a tuner for ``args.seconds`` at most, counting the complete lines of the file it
    appends its records to every ``args.poll`` seconds: the ``(seconds, lines)`` samples (also
    written next to ``out`` as a .tsv). Both sides are measured by this one rule: a record
    counts from when it is in the file, as a user who stops the tuner then would have it."""
    progress: list[tuple[float, int]] = []

    def poll(elapsed: float) -> None:
        text = watched.read_text() if watched.exists() else ""
        progress.append((elapsed, complete_lines(text)))

    print(f"{' '.join(cmd)}  (stopped at {args.seconds:g} s)", flush=True)
    _, rc = run_for(cmd, args.seconds, _env(args.threads), out, poll, args.poll)
    if rc not in (None, 0):
        raise SystemExit(f"{cmd[0]} exited with {rc} before {args.seconds:g} s; see {out}")
    out.with_suffix(".tsv").write_text("".join(f"{t:.2f}\t{n}\n" for t, n in progress))
    return progress


def tune_ours(args, work: Path) -> tuple[list, Path]:
    log = work / "ours-records.json"
    log.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "autosched", "tune", "--network", NETWORK,
           "--max-seconds", str(args.seconds), "--log", str(log)]  # fmt: skip
    return tune_watched(cmd, args, work / "ours-tune.out", log), log


def tune_metaschedule(args, work: Path, onnx_path: Path) -> tuple[list, Path]:
    db = work / "ms-db"
    shutil.rmtree(db, ignore_errors=True)
    db.mkdir()
    cmd = [args.tvm_python, str(HERE / "metaschedule_network.py"), "tune", "--onnx",
           str(onnx_path), "--work-dir", str(db), "--threads", str(args.threads),
           "--trials-per-iter", str(args.ms_trials_per_iter)]  # fmt: skip
    return tune_watched(cmd, args, work / "ms-tune.out", db / MS_RECORDS), db


# --------------------------------------------------------------------------------------------
# Checkpoints: build and time each side's network from what it had found by then
# --------------------------------------------------------------------------------------------


def export_network(work: Path):
    """The ONNX file (NCHW) for MetaSchedule, and the random input and numpy reference (ours
    uses the same input in NHWC)."""
    import numpy as np

    from tensorir.graph import evaluate, get_network
    from tensorir.graph.onnx_export import to_onnx

    mod, params, shape, _ = get_network(NETWORK, batch_size=1, layout="NCHW")
    model = to_onnx(mod, params)
    onnx_path = work / f"{NETWORK}.onnx"
    onnx_path.write_bytes(model.SerializeToString())
    x_nchw = np.random.default_rng(0).uniform(-1, 1, shape).astype("float32")
    ref = evaluate(mod, {"data": x_nchw}, params)
    np.save(work / "input-nchw.npy", x_nchw)
    np.save(work / "reference.npy", ref)
    return onnx_path, x_nchw, ref


def evaluate_ours(args, progress, log: Path, work: Path, x_nchw, ref) -> list[dict]:
    import numpy as np
    from bench_network_cpu import ours_ms

    import autosched as ansor
    from tensorir.graph import get_network

    mod, params, _, _ = get_network(NETWORK, batch_size=1, layout="NHWC")
    x = np.ascontiguousarray(x_nchw.transpose(0, 2, 3, 1))
    rows = []
    for point in checkpoints(args.seconds, args.every):
        part = work / f"ours-at-{point:g}s.json"
        head_lines(log, part, lines_at(progress, point))
        n_records = sum(1 for _ in ansor.load_records(str(part)))
        with ansor.ApplyHistoryBest(str(part)):
            lib = ansor.build(mod, "llvm", params=params)
        module = ansor.GraphModule(lib)
        module.set_input("data", x)
        module.run()
        err = float(np.max(np.abs(module.get_output(0).numpy().astype(np.float64) - ref)))
        if not np.allclose(module.get_output(0).numpy(), ref, rtol=1e-3, atol=1e-5):
            raise SystemExit(f"[ours] the network at {point:g} s is wrong: max error {err:.2e}")
        row = {"side": "ours", "seconds": point, "records": n_records,
               "latency_ms": ours_ms(module), "max_abs_err": err}  # fmt: skip
        print(f"[ours] {json.dumps(row)}", flush=True)
        rows.append(row)
        part.unlink()
    return rows


def evaluate_metaschedule(args, progress, db: Path, work: Path, onnx_path: Path) -> list[dict]:
    points = checkpoints(args.seconds, args.every)
    # Checkpoints with the same lines hold the same database: build and time it once (the
    # untuned network of the first pass takes seconds per run).
    counts = [lines_at(progress, point) for point in points]
    dirs = {}
    for n in dict.fromkeys(counts):
        dirs[n] = work / f"ms-{n}-records"
        shutil.rmtree(dirs[n], ignore_errors=True)
        truncate_ms_database(db, dirs[n], n)
    cmd = [args.tvm_python, str(HERE / "metaschedule_network.py"), "evaluate", "--onnx",
           str(onnx_path), "--threads", str(args.threads), "--input",
           str(work / "input-nchw.npy"), "--ref", str(work / "reference.npy")]  # fmt: skip
    for part in dirs.values():
        cmd += ["--db", str(part)]
    results = {}
    with open(work / "ms-evaluate.err", "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                                env=_env(args.threads))  # fmt: skip
        for line in proc.stdout:  # one JSON line per database, as each is timed
            if line.startswith("{"):
                res = json.loads(line)
                results[list(dirs)[len(results)]] = res
                print(f"[metaschedule] {len(results)}/{len(dirs)} {line.strip()}", flush=True)
        proc.wait()
    if proc.returncode != 0 or len(results) != len(dirs):
        raise SystemExit(
            f"[metaschedule] evaluate exited with {proc.returncode} after {len(results)} of "
            f"{len(dirs)} databases (a wrong output exits with 1); see "
            f"{work / 'ms-evaluate.err'}"
        )
    rows = []
    for point, n in zip(points, counts, strict=True):
        res = results[n]
        row = {"side": "metaschedule", "seconds": point, "records": res["records"],
               "latency_ms": res["latency_ms"], "max_abs_err": res["max_abs_err"]}  # fmt: skip
        print(f"[metaschedule] {json.dumps(row)}", flush=True)
        rows.append(row)
    for part in dirs.values():
        shutil.rmtree(part)
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seconds", type=float, default=900.0, help="tuning budget of each side")
    p.add_argument("--every", type=float, default=60.0, help="seconds between checkpoints")
    p.add_argument("--threads", type=int, default=2, help="threads of both (tuning and timing)")
    p.add_argument("--tvm-python", default="/work/tvm-venv/bin/python",
                   help="the python of TVM's virtualenv (apache-tvm, apache-tvm-ffi==0.1.14.post0, "
                   "psutil, cloudpickle, xgboost, onnx)")  # fmt: skip
    p.add_argument("--ms-trials-per-iter", type=int, default=16,
                   help="MetaSchedule's num_trials_per_iter (default 16; TVM's is 64, but it "
                   "commits records only when its first pass over all tasks ends: 30 x 64 "
                   "trials for resnet-18, too long for minutes on 2 cores)")  # fmt: skip
    p.add_argument("--poll", type=float, default=1.0, help="seconds between database polls")
    p.add_argument("--work-dir", default="bench-vs-metaschedule")
    p.add_argument("--figure", help="also save the figure here (e.g. docs/images/...png)")
    p.add_argument("--sides", default="ours,metaschedule", help="run only some sides")
    args = p.parse_args(argv)
    args.sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if bad := [s for s in args.sides if s not in ("ours", "metaschedule")]:
        p.error(f"--sides: unknown {bad}; use ours and/or metaschedule")
    try:
        checkpoints(args.seconds, args.every)
    except ValueError as e:
        p.error(f"--seconds/--every: {e}")
    if "metaschedule" in args.sides and not Path(args.tvm_python).exists():
        p.error(f"--tvm-python {args.tvm_python} does not exist; create TVM's venv "
                "(docs/networks.md, Against TVM MetaSchedule) or point to it")  # fmt: skip
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    onnx_path, x_nchw, ref = export_network(work)
    rows = []
    if "ours" in args.sides:
        progress, log = tune_ours(args, work)
        rows += evaluate_ours(args, progress, log, work, x_nchw, ref)
    if "metaschedule" in args.sides:
        progress, db = tune_metaschedule(args, work, onnx_path)
        rows += evaluate_metaschedule(args, progress, db, work, onnx_path)
    summary = summarize(rows)
    summary.update(seconds=args.seconds, threads=args.threads, network=NETWORK,
                   ms_trials_per_iter=args.ms_trials_per_iter,
                   wall_s=round(time.time() - t0, 1))  # fmt: skip
    write_csv(rows, work / "curves.csv")
    (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    title = f"{NETWORK} batch 1, {args.threads} threads, {args.seconds:g} s each"
    plot(rows, summary, work / "curves.png", title)
    if args.figure:
        plot(rows, summary, Path(args.figure), title)
    print(json.dumps(summary, indent=1))
    if summary.get("metaschedule_final_records") == 0:
        print(
            "MetaSchedule committed no record within the budget (it commits after its first "
            "pass over all tasks): its network is the untuned one; give it more seconds"
        )
    return 0


if __name__ == "__main__":  # tuning measures in spawned processes
    sys.exit(main())
