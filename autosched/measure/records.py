"""Measurement records: one JSON object per line, appended as tuning goes.

Format (``"v": 1``), close to TVM's ``v0.6`` log lines::

    {"v": 1,
     "i": [[WORKLOAD_KEY, TARGET], [[], [STEP, STEP, ...]]],
     "r": [[COST_1, ..., COST_repeat], ERROR_NO, ALL_COST, TIMESTAMP],
     "e": "error message, empty on success",
     "t": [BUILD_SECONDS, RUN_SECONDS],
     "versions": {"autosched": "0.1.0", "llvmlite": "0.44.0"}}

- ``WORKLOAD_KEY`` is ``ComputeDAG.workload_key`` (a JSON string), ``TARGET`` the target string.
  Keys carry their scheme version (``"v2:<md5>"``); records with version-1 keys (a bare md5 of
  the simple-mode print, which could name different computations alike) load, with one
  warning, and match no task.
- Steps use the TVM record encoding of :func:`tensorir.steps.steps_to_json`
  (``["SP", stage_id, iter_id, extent, [lengths], inner_to_outer]``...). The empty list in
  front is TVM's stage list, always empty; the reader also takes the steps without it.
- Costs are seconds per run (``1e10`` for a failed candidate), ``ERROR_NO`` a
  :class:`~autosched.measure.local.MeasureErrorNo` code, ``ALL_COST`` the build + run wall seconds,
  ``TIMESTAMP`` Unix seconds.
- ``"t"`` (optional, written since issue 29; still version 1, since older readers ignore keys
  they do not know): the parts of ``ALL_COST`` spent building and running the candidate.
  Records without it load with NaN ``build_s`` / ``run_s``.
- Every line is one JSON object, so ``jq`` and ``pandas.read_json(path, lines=True)`` read a
  log. :class:`RecordToFile` marks where a run starts and, from :meth:`RecordToFile.close`,
  where it ended cleanly, with marker objects ``{"autosched_marker": "run-start", "time": ...}``
  and ``{"autosched_marker": "run-end", "time": ..., "records": N}``, so an interrupted log is
  recognisable (:func:`log_ended_cleanly`); readers skip markers. Lines starting with ``#``
  (the markers of older logs) are skipped too, and so are blank lines. A corrupt or truncated
  line is skipped with one warning per file naming its line numbers. So is a line whose fields
  have the wrong types, or an error-free record whose cost is not a positive finite number of
  seconds (NaN, 0, negative, infinite): such a cost never becomes a best. Lines are only ever
  parsed as JSON; nothing in a log is executed.

A record keeps its steps as JSON until a state is needed, so logs load without their DAGs
(``distill``, ``load_best_record``); to replay, pass ``dags=`` (workload key -> ComputeDAG, or
SearchTasks / DAGs) or register the DAG with :func:`register_dag` (``RecordToFile`` registers
the DAGs it writes).

Command line::

    python -m autosched.records distill -i log.json -o best.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import reprlib
import sys
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tensorir.dag import WORKLOAD_KEY_VERSION
from tensorir.schedule import State, replay
from tensorir.steps import steps_from_json

from .data import (
    MAX_COST,
    RETIMED,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    steps_json_of,
)

__all__ = [
    "RECORD_VERSION",
    "ApplyHistoryBest",
    "RecordState",
    "RecordTask",
    "RecordToFile",
    "RecordWarning",
    "distill",
    "load_best_record",
    "load_ranked_records",
    "load_records",
    "log_ended_cleanly",
    "register_dag",
    "save_records",
]

RECORD_VERSION = 1
MARKER_KEY = "autosched_marker"  # the key of a run-marker line (not a record)
RUN_START, RUN_END = "run-start", "run-end"
END_MARK = "# end of run"  # how logs before JSON markers ended a clean run

_DAGS: dict[str, object] = {}  # workload key -> ComputeDAG seen in this process


class RecordWarning(UserWarning):
    """A record file had lines that could not be read."""


def register_dag(dag, workload_key: str | None = None) -> str:
    """Remember ``dag`` so records with its workload key can be replayed; returns the key."""
    key = workload_key or dag.workload_key
    _DAGS[key] = dag
    return key


@dataclass(frozen=True)
class RecordTask:
    """What a record says about its task; stands in for a ``SearchTask`` when loading.

    ``compute_dag`` is None when the workload key was not resolved to a DAG.
    """

    workload_key: str
    target: str
    compute_dag: object | None = field(default=None, compare=False)


@dataclass(frozen=True)
class RecordState:
    """A record's steps, kept as JSON text until :meth:`to_state` replays them.

    ``origin`` says where the record was read (``"log.json line 12"``), for messages.
    """

    steps_json: str
    dag: object | None = field(default=None, compare=False)
    origin: str = field(default="", compare=False)

    @property
    def steps(self) -> tuple:
        """The step records (decoded, not replayed)."""
        return steps_from_json(json.loads(self.steps_json))

    def to_state(self, dag=None) -> State:
        """Replay the steps on ``dag`` (default: the DAG resolved when loading)."""
        dag = dag if dag is not None else self.dag
        if dag is None:
            raise ValueError(
                "this record's workload key was not resolved to a ComputeDAG; pass dag=..., "
                "load with dags=..., or register_dag(dag) first"
            )
        return replay(dag, self.steps)

    def __str__(self) -> str:
        return str(self.to_state()) if self.dag is not None else f"<steps {self.steps_json}>"


def _versions() -> dict:
    from .._version import package_version

    out = {"autosched": package_version()}
    try:
        import llvmlite

        out["llvmlite"] = llvmlite.__version__
    except ImportError:
        out["llvmlite"] = "none"
    return out


_VERSIONS: dict | None = None


def encode_record(inp: MeasureInput, res: MeasureResult) -> str:
    """One record line (without the newline)."""
    global _VERSIONS
    if _VERSIONS is None:
        _VERSIONS = _versions()
    rec = {
        "v": RECORD_VERSION,
        "i": [[inp.task.workload_key, str(inp.task.target)], [[], steps_json_of(inp.state)]],
        "r": [
            [float(c) for c in res.costs],
            int(res.error_no),
            float(res.all_cost),
            float(res.timestamp),
        ],
        "e": res.error_msg,
        "versions": _VERSIONS,
    }
    split = (getattr(res, "build_s", math.nan), getattr(res, "run_s", math.nan))
    if all(math.isfinite(x) for x in split):
        rec["t"] = [float(x) for x in split]
    return json.dumps(rec, separators=(",", ":"))


def _resolve_dags(dags) -> dict:
    if dags is None:
        return {}
    if isinstance(dags, Mapping):
        return dict(dags)
    out = {}
    for d in dags:  # SearchTasks or ComputeDAGs
        dag = getattr(d, "compute_dag", d)
        out[getattr(d, "workload_key", None) or dag.workload_key] = dag
    return out


def decode_record(line: str, dags: Mapping | None = None) -> tuple[MeasureInput, MeasureResult]:
    """Parse one record line; raises ValueError (with the reason) on a malformed line.

    Only JSON is parsed (nothing in a line is ever executed); every field is checked for its
    type, and every cost of an error-free record must be a positive finite number of seconds
    (so a NaN, zero, negative or infinite cost never becomes a best).
    """
    try:
        rec = json.loads(line)
        version = rec["v"]
        (key, target), state = rec["i"]
        costs, error_no, all_cost, timestamp = rec["r"]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ValueError(f"not a record ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(version, int) or version > RECORD_VERSION:
        raise ValueError(f"record version {_short(version)} is not readable by this autosched")
    for name, value, kind in (
        ("workload key", key, str),
        ("target", target, str),
        ("steps", state, list),
        ("costs", costs, list),
        ("error number", error_no, int),
        ("all_cost", all_cost, int | float),
        ("timestamp", timestamp, int | float),
    ):
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"the {name} is {_short(value)}, not a {_kind_name(kind)}")
    if any(isinstance(c, bool) or not isinstance(c, int | float) for c in costs):
        raise ValueError(f"the costs {_short(costs)} are not all numbers")
    costs = [_float(c) for c in costs]
    if error_no == MeasureErrorNo.NO_ERROR:  # (a failed record's costs are never used)
        bad = [c for c in costs if not (math.isfinite(c) and c > 0)]
        if bad or not costs:
            what = _short(bad[0]) if bad else "missing"
            raise ValueError(f"cost {what} is not a positive finite number of seconds")
    if len(state) == 2 and state[0] == [] and isinstance(state[1], list):
        state = state[1]  # TVM's [[stages], [steps]] shape
    dag = (dags or {}).get(key)
    if dag is None:
        dag = _DAGS.get(key)
    try:
        steps_json = json.dumps(state)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"steps are not plain JSON ({type(exc).__name__})") from None
    inp = MeasureInput(RecordTask(key, target, dag), RecordState(steps_json, dag))
    res = MeasureResult(
        tuple(costs), error_no, _text(rec.get("e", "")), _float(all_cost), _float(timestamp),
        *_split(rec.get("t")),
    )  # fmt: skip
    return inp, res


def _split(value) -> tuple[float, float]:
    """The optional ``"t"`` field: (build, run) seconds; NaN for a missing or malformed one
    (it is informative only, so a bad one does not cost the record)."""
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(x, int | float) and not isinstance(x, bool) for x in value)
    ):
        build, run = (_float(x) for x in value)
        if math.isfinite(build) and math.isfinite(run) and build >= 0 and run >= 0:
            return build, run
    return math.nan, math.nan


def _text(value) -> str:
    return value if isinstance(value, str) else _short(value)


def _float(number: int | float) -> float:
    """A JSON number as a float; an integer too large for one is infinite."""
    try:
        return float(number)
    except OverflowError:
        return math.inf if number > 0 else -math.inf


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 3, 40, 40, 40


def _short(value) -> str:
    """A bounded repr for messages (deeply nested or huge values included)."""
    return _SHORT.repr(value)


def _kind_name(kind) -> str:
    return {str: "string", list: "list", int: "integer"}.get(kind, "number")


def _old_key_scheme(key: str) -> bool:
    """A key of workload-key scheme 1 (a bare md5 digest first), which no DAG produces now."""
    head = key[2:34] if key.startswith('["') else ""
    return len(head) == 32 and key[34:35] == '"' and all(c in "0123456789abcdef" for c in head)


def _marker(text: str) -> dict | None:
    """The marker object of a run-marker line, None for any other line."""
    if MARKER_KEY not in text:  # cheap test first: record lines never hold the key
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) and MARKER_KEY in obj else None


def _marker_line(kind: str, **fields) -> str:
    return json.dumps({MARKER_KEY: kind, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **fields})


def _iter_records(path, dags: Mapping) -> Iterator[tuple[str, MeasureInput, MeasureResult]]:
    """``(raw line, input, result)`` per readable record; ONE warning for all unreadable lines
    (and one for records of an older workload-key scheme, which load but match no task)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"record file {str(path)!r} does not exist")
    bad: list[tuple[int, str]] = []
    old_keys = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#") or _marker(text) is not None:
                continue
            try:
                inp, res = decode_record(text, dags)
            except ValueError as exc:
                bad.append((lineno, str(exc)))
                continue
            old_keys += _old_key_scheme(inp.task.workload_key)
            origin = f"{path} line {lineno}"
            inp = MeasureInput(inp.task, replace(inp.state, origin=origin))
            yield text, inp, res
    if bad:
        lines = ", ".join(str(n) for n, _ in bad[:10]) + (" ..." if len(bad) > 10 else "")
        warnings.warn(
            f"{path}: skipped {len(bad)} corrupt or truncated record line(s): line {lines} "
            f"(first: {bad[0][1]})",
            RecordWarning,
            stacklevel=3,
        )
    if old_keys:
        warnings.warn(
            f"{path}: {old_keys} record(s) use the workload keys of autosched before key "
            f"version {WORKLOAD_KEY_VERSION}, which could name different computations alike; "
            "they apply to no task: tune again to get records with the current keys",
            RecordWarning,
            stacklevel=3,
        )


def load_records(path, dags=None) -> Iterator[tuple[MeasureInput, MeasureResult]]:
    """Yield ``(MeasureInput, MeasureResult)`` for every readable record of ``path``.

    Parameters
    ----------
    path : str or Path
    dags : mapping or iterable, optional
        Workload key -> ComputeDAG, or SearchTasks / ComputeDAGs, to resolve keys (the
        process-wide registry of :func:`register_dag` is consulted as well).

    Yields
    ------
    (MeasureInput, MeasureResult)
        ``inp.task`` is a :class:`RecordTask`, ``inp.state`` a :class:`RecordState`.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.

    Warns
    -----
    RecordWarning
        Once per file, naming the line numbers of lines that could not be read.
    """
    for _, inp, res in _iter_records(path, _resolve_dags(dags)):
        yield inp, res


def save_records(path, inputs, results, mode: str = "a") -> None:
    """Write ``inputs`` / ``results`` to ``path`` (append by default), flushed and fsynced."""
    with open(path, mode, encoding="utf-8") as f:
        for inp, res in zip(inputs, results):
            f.write(encode_record(inp, res) + "\n")
        f.flush()
        os.fsync(f.fileno())


class RecordToFile:
    """A measure callback appending one line per result, flushed and fsynced per batch.

    Parameters
    ----------
    path : str or Path
        The log; created if missing, appended to otherwise (so a run can resume from it).

    Notes
    -----
    The first batch writes a ``{"autosched_marker": "run-start", ...}`` line; :meth:`close`
    (or leaving the ``with`` block without an exception) writes a ``"run-end"`` marker with the
    number of records written.
    """

    def __init__(self, path):
        self.path = Path(path)
        self.written = 0
        self._started = False

    def callback(self, inputs, results) -> None:
        """Append the batch (the ``ProgramMeasurer`` callback protocol)."""
        for inp in inputs:
            dag = getattr(inp.task, "compute_dag", None)
            if dag is not None:
                register_dag(dag, inp.task.workload_key)
        with open(self.path, "a", encoding="utf-8") as f:
            if not self._started:
                f.write(_marker_line(RUN_START) + "\n")
                self._started = True
            for inp, res in zip(inputs, results):
                f.write(encode_record(inp, res) + "\n")
            f.flush()
            os.fsync(f.fileno())  # a crash of the machine loses at most the batch in flight
        self.written += len(results)

    def close(self) -> None:
        """Mark the log as ended cleanly."""
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(_marker_line(RUN_END, records=self.written) + "\n")

    def __enter__(self) -> RecordToFile:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()


def log_ended_cleanly(path) -> bool:
    """Whether the last non-blank line of ``path`` is RecordToFile's run-end marker (or the
    ``# end of run`` comment of an older log)."""
    last = ""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.strip():
                last = line.strip()
    marker = _marker(last)
    return last.startswith(END_MARK) or (marker is not None and marker[MARKER_KEY] == RUN_END)


def _records_of(records, dags=None) -> Iterator[tuple[MeasureInput, MeasureResult]]:
    if isinstance(records, str | os.PathLike):
        yield from load_records(records, dags)
        return
    for item in records:
        if isinstance(item, str | os.PathLike):
            yield from load_records(item, dags)
        else:
            yield item


def _existing_logs(records, missing: list[str]) -> Iterator:
    """The items of ``records`` (a path or an iterable) less the paths that do not exist,
    which are appended to ``missing``."""
    items = [records] if isinstance(records, str | os.PathLike) else records
    for item in items:
        if isinstance(item, str | os.PathLike) and not os.path.exists(item):
            missing.append(os.fspath(item))
            continue
        yield item


def missing_logs_message(paths: Sequence[str]) -> str:
    """The one warning for tuning logs that do not exist (both ``ApplyHistoryBest``s)."""
    names = ", ".join(repr(str(p)) for p in paths)
    return (
        f"ApplyHistoryBest: no tuning log {names} (was the tuning step skipped?); the "
        "kernels use default schedules, which may be slow: tune first to write the log"
    )


def _target_matches(record_target: str, target) -> bool:
    return target is None or str(record_target) == str(target)


def _usable(res: MeasureResult) -> bool:
    """An error-free result with a positive finite mean cost (one that may be a best)."""
    cost = res.mean_cost
    return res.error_no == MeasureErrorNo.NO_ERROR and math.isfinite(cost) and 0 < cost < MAX_COST


def load_ranked_records(path, workload_key: str, target=None, dags=None) -> list:
    """Every usable record of ``workload_key`` (and ``target``) in ``path``, best first.

    Returns
    -------
    list of (MeasureInput, MeasureResult)
        Error-free records with a positive finite cost, lowest mean cost first (earlier lines
        first among equal costs); empty when there is none.
    """
    found = [
        (inp, res)
        for inp, res in load_records(path, dags)
        if inp.task.workload_key == workload_key
        and _target_matches(inp.task.target, target)
        and _usable(res)
    ]
    return sorted(found, key=lambda r: r[1].mean_cost)


def load_best_record(path, workload_key: str, target=None, dags=None):
    """The error-free record of ``workload_key`` (and ``target``) with the lowest mean cost.

    Returns
    -------
    (MeasureInput, MeasureResult) or None
        None when no such record exists.
    """
    ranked = load_ranked_records(path, workload_key, target, dags)
    return ranked[0] if ranked else None


def distill(in_path, out_path) -> int:
    """Keep the best error-free record per (workload key, target); returns how many.

    The kept lines are copied verbatim (versions included), in order of first appearance.
    """
    best: dict[tuple[str, str], tuple[float, str]] = {}
    for text, inp, res in _iter_records(in_path, {}):
        key = (inp.task.workload_key, inp.task.target)
        if not _usable(res):
            continue
        if key not in best or res.mean_cost < best[key][0]:
            best[key] = (res.mean_cost, text)
    with open(out_path, "w", encoding="utf-8") as f:
        for _, text in best.values():
            f.write(text + "\n")
    return len(best)


class ApplyHistoryBest:
    """Dispatch context: the best error-free record per (workload key, target).

    Parameters
    ----------
    records : str, Path, or iterable
        A log path, or an iterable of paths and/or ``(MeasureInput, MeasureResult)`` pairs.
        A path that does not exist (a script run with its tuning step commented out) gives
        no records and ONE warning naming it, as TVM: the build then uses default schedules.
    dags : optional
        As for :func:`load_records`.

    Attributes
    ----------
    missing_logs : list of str
        The paths given that did not exist.

    Examples
    --------
    >>> with ApplyHistoryBest("log.json") as ctx:
    ...     steps = ApplyHistoryBest.current().query(dag.workload_key, "llvm")
    >>> print(ctx.summary())    # "2 of 3 tasks used a tuned record; missing: ..."
    """

    _stack: list[ApplyHistoryBest] = []

    def __init__(self, records, dags=None):
        # A re-timed record (the task scheduler measures each task's best few again, marked
        # RETIMED) joins its candidate's record: the costs of both, so that the candidate's
        # mean is not the luckiest of its measurements.
        entries: list[list] = []
        first_of: dict[tuple[str, str, str], list] = {}
        self.missing_logs: list[str] = []
        for inp, res in _records_of(_existing_logs(records, self.missing_logs), dags):
            if not _usable(res):
                continue
            steps = getattr(inp.state, "steps_json", None) or json.dumps(steps_json_of(inp.state))
            cand = (inp.task.workload_key, str(inp.task.target), steps)
            if res.error_msg == RETIMED and cand in first_of:
                entry = first_of[cand]
                entry[1] = replace(entry[1], costs=entry[1].costs + res.costs)
                continue
            entry = [inp, res]
            entries.append(entry)
            first_of.setdefault(cand, entry)
        ranked: dict[tuple[str, str], list[tuple[MeasureInput, MeasureResult]]] = {}
        for inp, res in entries:
            key = (inp.task.workload_key, str(inp.task.target))
            ranked.setdefault(key, []).append((inp, res))
        # Every usable record per (key, target), best first (stable: earlier lines win ties),
        # so a best record that no longer replays can give way to the next best.
        self._ranked = {k: sorted(v, key=lambda r: r[1].mean_cost) for k, v in ranked.items()}
        self.best: dict[tuple[str, str], tuple[MeasureInput, MeasureResult]] = {
            k: v[0] for k, v in self._ranked.items()
        }
        self.hit_keys: set[str] = set()
        self.missed_keys: set[str] = set()
        if self.missing_logs:
            warnings.warn(missing_logs_message(self.missing_logs), stacklevel=2)

    @classmethod
    def current(cls) -> ApplyHistoryBest | None:
        """The innermost active context, or None outside any."""
        return cls._stack[-1] if cls._stack else None

    def lookup(self, workload_key: str, target=None):
        """``(MeasureInput, MeasureResult)`` of the best record, or None (no bookkeeping)."""
        if target is not None:
            return self.best.get((workload_key, str(target)))
        found = [v for (k, _), v in self.best.items() if k == workload_key]
        return min(found, key=lambda v: v[1].mean_cost) if found else None

    def candidates(self, workload_key: str, target) -> list:
        """Every usable ``(MeasureInput, MeasureResult)`` of ``workload_key`` on ``target``,
        best first (no bookkeeping)."""
        return list(self._ranked.get((workload_key, str(target)), ()))

    def targets_of(self, workload_key: str) -> list[str]:
        """The target strings that have records of ``workload_key``."""
        return [t for k, t in self._ranked if k == workload_key]

    def query(self, workload_key: str, target=None) -> tuple | None:
        """The best record's steps (replay them with ``tensorir.schedule.replay``), or None.

        Every call is counted: see :attr:`hit_keys`, :attr:`missed_keys` and :meth:`summary`.
        """
        found = self.lookup(workload_key, target)
        if found is None:
            self.missed_keys.add(workload_key)
            return None
        self.hit_keys.add(workload_key)
        return found[0].state.steps

    def summary(self) -> str:
        """``"N of M tasks used a tuned record"`` plus the missing workload keys."""
        missed = self.missed_keys - self.hit_keys
        total = len(self.hit_keys | missed)
        text = f"{len(self.hit_keys)} of {total} tasks used a tuned record"
        if missed:
            text += "; no record for: " + ", ".join(sorted(missed))
        return text

    def __enter__(self) -> ApplyHistoryBest:
        ApplyHistoryBest._stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        ApplyHistoryBest._stack.remove(self)


def main(argv: Iterable[str] | None = None) -> int:
    """``python -m autosched.records --mode distill -i log.json [-o best.json]``.

    TVM's ``python -m tvm.auto_scheduler.measure_record --mode distill -i log.json`` spelled for
    autosched; ``distill`` as a sub-command (``python -m autosched.records distill -i ...``) and
    ``--i`` / ``--o`` work too.
    """
    parser = argparse.ArgumentParser(
        prog="python -m autosched.records",
        description="distill: keep the best record per workload and target of a log",
    )
    parser.add_argument("command", nargs="?", choices=["distill"], help="same as --mode")
    parser.add_argument("--mode", choices=["distill"], default="distill")
    parser.add_argument("-i", "--i", "--input", dest="input", required=True, help="log to read")
    parser.add_argument(
        "-o", "--o", "--output", dest="output",
        help="file to write (default: <input stem>.best.json)",
    )  # fmt: skip
    args = parser.parse_args(None if argv is None else list(argv))
    src = Path(args.input)
    if not src.is_file():
        parser.error(f"record file {str(src)!r} does not exist")
    out = Path(args.output) if args.output else src.with_suffix(".best.json")
    n = distill(src, out)
    print(f"kept {n} record(s) from {src} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
