"""What the parts of ``bench_autotvm.py`` share: resnet-18's conv2d tasks and their labels, the
measurement options, the best GFLOP/s after each budget, and the piece (this invocation's result,
saved as JSON after every step, resumed with ``--resume``) with its core pinning."""

from __future__ import annotations

import json
import os
import sys

from autosched import autotvm, networks


def conv2d_tasks(network: str, target: str, limit: int | None = None):
    mod, params, _, _ = networks.get_network(network, layout="NCHW")
    tasks = autotvm.task.extract_from_program(mod, params, ops=("nn.conv2d",), target=target)
    return tasks[:limit] if limit else tasks


def task_label(index: int, task) -> str:
    """``#3 c64 56x56 k128 3x3 s2``: the task's index among resnet-18's conv2d tasks (so the
    labels of pieces run with different ``--task-ids`` agree) and its shape."""
    (_, (_, c, h, w), _), (_, (k, _, kh, kw), _) = task.args[0], task.args[1]
    return f"#{index} c{c} {h}x{w} k{k} {kh}x{kw} s{task.args[2][0]}"


def measure_option(args):
    return autotvm.measure_option(
        builder=autotvm.LocalBuilder(timeout=args.build_timeout),
        runner=autotvm.LocalRunner(number=args.number, repeat=args.repeat, timeout=args.timeout),
    )


def at_budgets(curve: list[float], budgets: list[int], complete: bool = True) -> dict:
    """Best GFLOP/s after each budget. A complete run that stopped earlier (a space smaller
    than the budget, early stopping) gives its last value; a partial one None."""
    out = {}
    for b in budgets:
        if not curve or (not complete and len(curve) < b):
            out[str(b)] = None if curve or not complete else 0.0
        else:
            out[str(b)] = curve[min(b, len(curve)) - 1] / 1e9
    return out


# --------------------------------------------------------------------------- pieces


def parse_index_list(text: str, option: str) -> list[int]:
    """``"0,3,7"`` or ``"0-3,8"`` as sorted distinct ints."""
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        lo, sep, hi = part.partition("-")
        try:
            out.update(range(int(lo), int(hi) + 1) if sep else [int(part)])
        except ValueError:
            raise SystemExit(f"{option}: cannot read {part!r}; write e.g. 0,3,7 or 0-3") from None
    return sorted(out)


def pin_cores(cores: list[int]) -> None:
    """Run this process and its children on ``cores`` with that many threads per kernel."""
    try:
        os.sched_setaffinity(0, cores)
    except (AttributeError, OSError) as exc:
        raise SystemExit(f"--cores {cores}: cannot pin this process ({exc})") from None
    os.environ["AUTOSCHED_NUM_THREADS"] = str(len(cores))
    os.environ["OMP_NUM_THREADS"] = str(len(cores))


class Piece:
    """This invocation's result dict and the JSON it is saved to after every step."""

    def __init__(self, path: str, result: dict):
        self.path, self.result = path, result

    def save(self) -> None:
        tmp = f"{self.path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.result, f, indent=1)
        os.replace(tmp, self.path)  # a kill mid-write leaves the previous JSON whole


def start_piece(args) -> Piece:
    result = {"target": args.target, "trials": args.trials, "argv": sys.argv[1:]}
    if args.resume and os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
        if old.get("target") != args.target or old.get("trials") != args.trials:
            raise SystemExit(
                f"--resume: {args.out} holds target {old.get('target')!r} trials "
                f"{old.get('trials')}, not {args.target!r} {args.trials}; use another --out"
            )
        result = {**old, "argv": sys.argv[1:]}
    return Piece(args.out, result)
