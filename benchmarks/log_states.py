"""What the benches that re-time a tuning log's states share (``bench_shared_padding.py``,
``bench_row_threads.py``, ``bench_cold_cache_gpu.py``; for a CNN's log
``bench_epilogue_words.py`` and ``bench_shared_optin.py``): their command line, the network's
tasks, the log's records per task, and building and timing states with the tuner's own
builder and runner in one process."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench_transformer_gpu import our_network  # run from benchmarks/
from gpu_precision import our_module, target_for

import autosched as ansor
from tensorir.graph import get_network


def log_parser(doc: str, per_task: int | None = None) -> argparse.ArgumentParser:
    """The common options: ``--log`` (required), ``--network``, ``--seq-len``, ``--precision``,
    ``--out``, ``--dry-run``, and ``--per-task`` when a default is given."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--log", required=True)
    p.add_argument("--network", default="bert-base")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--precision", default="float32")
    if per_task is not None:
        p.add_argument("--per-task", type=int, default=per_task)
    p.add_argument("--out", help="write the rows as JSON here")
    p.add_argument("--dry-run", action="store_true", help="list the states, measure nothing")
    return p


def network_tasks(args) -> tuple[list, list]:
    """The tasks of ``--network`` at ``--seq-len`` and ``--precision``, and their weights."""
    ours = our_network(args.network, args.seq_len, args.precision)
    return ansor.extract_tasks(ours["mod"], ours["params"], ours["target"])


def cnn_log_parser(doc: str) -> argparse.ArgumentParser:
    """The options of the benches that re-time a CNN's log: ``--log`` (required),
    ``--network`` (resnet-50), ``--batch`` (16), ``--precision`` (float16) and ``--out``."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--log", required=True)
    p.add_argument("--network", default="resnet-50")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--precision", default="float16")
    p.add_argument("--out", help="write the rows as JSON here")
    return p


def cnn_network(args, arch: str | None = None) -> dict:
    """``--network`` (NHWC, ``--batch``) in ``--precision``, as ``bench_gpu.py`` tunes it:
    ``mod``, ``params``, the input ``shape``, ``target``, ``tasks`` and their ``weights``
    (for a GPU of ``-arch=arch`` when given, else this machine's)."""
    mod32, params32, shape, _ = get_network(args.network, batch_size=args.batch, layout="NHWC")
    mod, params = our_module(mod32, params32, args.precision)
    target = target_for(args.precision) + (f" -arch={arch}" if arch else "")
    tasks, weights = ansor.extract_tasks(mod, params, target)
    return {"mod": mod, "params": params, "shape": shape, "target": target, "tasks": tasks,
            "weights": weights}  # fmt: skip


def records_by_key(log) -> dict:
    """``workload key -> [(MeasureInput, MeasureResult), ...]`` of every record in ``log``."""
    by_key: dict = {}
    for inp, res in ansor.load_records(log):
        by_key.setdefault(inp.task.workload_key, []).append((inp, res))
    return by_key


def ranked(records) -> list:
    """``(logged cost, MeasureInput)`` of the records that measured without error, best
    first."""
    ok = ((min(r.costs), i) for i, r in records if r.error_no == 0 and r.costs)
    return sorted(ok, key=lambda c: c[0])


def best_states(task, records, per_task: int) -> list:
    """``(logged cost, state)`` of the task's best ``per_task`` distinct states, best first."""
    out, seen = [], set()
    for cost, inp in ranked(records):
        state = inp.state
        key = repr(state.steps)
        if key in seen:
            continue
        seen.add(key)
        out.append((cost, state.to_state(task.compute_dag)))
        if len(out) == per_task:
            break
    return out


def build_and_run(inputs: list, runner) -> list:
    """``inputs`` built by ``LocalBuilder`` and timed by ``runner`` (a LocalRunner, closed
    after)."""
    builds = ansor.LocalBuilder().build(inputs)
    with runner:
        return runner.run(inputs, builds)


def best_us(result) -> float | None:
    """A result's lowest cost in microseconds; None for a failed one."""
    return min(result.costs) * 1e6 if result.error_no == 0 else None


def error_text(result) -> str | None:
    """The start of a failed result's message; None for a good one."""
    return result.error_msg[:200] if result.error_no else None


def cell(value, width: int) -> str:
    """``value`` as a ``width``-wide column with two decimals, or ``err`` for a failed one."""
    return f"{value:{width}.2f}" if value is not None else f"{'err':>{width}}"


def write_json(path, data) -> None:
    """``data`` as indented JSON at ``path`` when a path is given."""
    if path:
        Path(path).write_text(json.dumps(data, indent=1))
