"""Run several GPU benchmarks at once, one per GPU, each pinned to its own share of the host's
cores: how the 20-minute tunes of benchmarks/RESULTS.md (sessions 13 and 14) ran on a 4-GPU
machine, so that each tune sees what a one-GPU machine with that many cores gives it.

    cd benchmarks && python gpu_side_by_side.py --root W --piece 1 --limit 570 \\
      "r18=bench_gpu.py --ops none --network resnet-18 --precision float16 --network-seconds 400" \\
      "bert=bench_transformer_gpu.py --network bert-base --precision float16 --seconds 400"

Job ``i`` (``NAME=SCRIPT ARGS``, in order) runs ``python SCRIPT ARGS --work-dir ROOT/NAME --out
ROOT/NAME/rows-pPIECE.json`` with ``CUDA_VISIBLE_DEVICES=i`` and the CPU affinity of cores
``i*Q .. i*Q+Q-1`` (``Q`` = the cores this process may use, divided by the number of jobs), its
output in ``ROOT/NAME/stdout-pPIECE.txt``; each job is stopped after ``--limit`` seconds (the
benches resume from the log in their work dir, so a later piece goes on where this one
stopped). Prints one line per job: its exit status and the last line of its output. A job
may set environment variables before its script: ``NAME=VAR=1 SCRIPT ARGS`` (e.g.
``AUTOSCHED_SPLIT_K_DENSE=0``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Job:
    """One benchmark of a piece: its name (the work dir), environment and command line."""

    name: str
    env: dict
    argv: tuple


def parse_job(spec: str) -> Job:
    """``NAME=[VAR=VALUE ...] SCRIPT ARGS`` as a Job; a one-line ValueError otherwise."""
    name, sep, rest = spec.partition("=")
    words = shlex.split(rest)
    if not sep or not name or not words:
        raise ValueError(f"job {spec!r}: write it as NAME=SCRIPT ARGS (e.g. r18=bench_gpu.py ...)")
    env = {}
    while words and "=" in words[0] and not words[0].endswith(".py"):
        var, _, value = words.pop(0).partition("=")
        env[var] = value
    if not words:
        raise ValueError(f"job {spec!r}: no script after its environment variables")
    return Job(name, env, tuple(words))


def core_slices(cores: list[int], jobs: int) -> list[list[int]]:
    """``cores`` cut into ``jobs`` equal consecutive slices (the remainder left idle)."""
    per = len(cores) // jobs
    if per < 1:
        raise ValueError(f"{jobs} jobs but only {len(cores)} cores: run fewer jobs at once")
    return [cores[i * per : (i + 1) * per] for i in range(jobs)]


def run_piece(jobs: list[Job], root: Path, piece: int, limit: float) -> list[tuple[str, int]]:
    """Start every job (GPU ``i``, core slice ``i``), wait for all, stop any past ``limit``
    seconds; returns each job's name and exit status (-9: stopped)."""
    slices = core_slices(sorted(os.sched_getaffinity(0)), len(jobs))
    procs = []
    for gpu, (job, cores) in enumerate(zip(jobs, slices, strict=True)):
        work = root / job.name
        work.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **job.env, "CUDA_VISIBLE_DEVICES": str(gpu)}
        argv = [sys.executable, *job.argv, "--work-dir", str(work),
                "--out", str(work / f"rows-p{piece}.json")]  # fmt: skip
        out = open(work / f"stdout-p{piece}.txt", "w")  # noqa: SIM115 (closed below)
        # The affinity is set in the child before it runs Python, so every thread it starts
        # (the tuner's builders and measurers) stays on its own cores.
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=lambda c=cores: os.sched_setaffinity(0, c))  # fmt: skip
        procs.append((job, proc, out))
    deadline = time.monotonic() + limit
    status = []
    for job, proc, out in procs:
        try:
            rc = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        out.close()
        status.append((job.name, rc))
    return status


def last_line(path: Path) -> str:
    lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    return lines[-1][:300] if lines else "(no output)"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("jobs", nargs="+", help="NAME=SCRIPT ARGS, one per GPU, in GPU order")
    p.add_argument("--root", default="side-by-side", help="each job's work dir is ROOT/NAME")
    p.add_argument("--piece", type=int, default=1, help="names this piece's output files")
    p.add_argument("--limit", type=float, default=570.0, help="seconds before a job is stopped")
    args = p.parse_args(argv)
    try:
        jobs = [parse_job(s) for s in args.jobs]
    except ValueError as e:
        p.error(str(e))
    root = Path(args.root)
    for name, rc in run_piece(jobs, root, args.piece, args.limit):
        what = "stopped at the limit" if rc < 0 else f"rc={rc}"
        tail = last_line(root / name / f"stdout-p{args.piece}.txt")
        print(f"{name} piece {args.piece} {what}: {tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
