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

This module is the format, its versions and the reader / writer; :func:`read_record_lines` is
the tolerant line reader AutoTVM's records (:mod:`autosched.autotvm.record`) share. Whether a
record may be a best is :func:`~autosched.measure.data.usable_result`, the one rule. The
dispatch context ``ApplyHistoryBest`` is :mod:`autosched.measure.dispatch`; the command line
(``python -m autosched.records distill -i log.json -o best.json``) is
:mod:`autosched.cli.records`; :mod:`autosched.records` is the public facade of all three.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import reprlib
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from tensorir.dag import WORKLOAD_KEY_VERSION
from tensorir.schedule import State, replay
from tensorir.steps import steps_from_json

from .data import MeasureErrorNo, MeasureInput, MeasureResult, steps_json_of, usable_result

__all__ = [
    "RECORD_VERSION",
    "RecordState",
    "RecordTask",
    "RecordToFile",
    "RecordWarning",
    "distill",
    "load_best_record",
    "load_ranked_records",
    "load_records",
    "log_ended_cleanly",
    "read_record_lines",
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


_GZIP_MAGIC = b"\x1f\x8b"


def is_gzip_file(path) -> bool:
    """Whether ``path`` starts with gzip's magic bytes (however it is named)."""
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


def open_log_text(path):
    """``path`` opened for reading text lines; a gzip-compressed log (one shared or kept
    compressed, as in ``benchmarks/logs``) is decompressed as it is read."""
    if is_gzip_file(path):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def read_record_lines(
    path,
    parse: Callable[[str], object],
    what: str = "corrupt or truncated record",
    stacklevel: int = 2,
) -> Iterator[tuple[int, str, object]]:
    """The tolerant reader of a record file: ``(line number, text, parse(text))`` per line.

    Blank lines and ``#`` comments are skipped; so is a line ``parse`` returns None for. A line
    ``parse`` raises ValueError on is skipped too, and counted: when the file is read to its end,
    ONE warning names the file, how many lines were skipped, their line numbers and the first
    reason. Lines are only ever parsed (nothing in a log is executed).

    Parameters
    ----------
    path : str or Path
    parse : callable
        ``parse(text)`` -> the decoded line, None to skip it silently; ValueError (with the
        reason) when the line is unreadable.
    what : str
        What a skipped line is, for the warning ("skipped 3 <what> line(s)").
    stacklevel : int
        The warning's ``stacklevel`` as ``warnings.warn`` would take it in the function that
        iterates this generator.

    Yields
    ------
    (int, str, object)

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.

    Warns
    -----
    RecordWarning
        Once per file, naming the line numbers of lines that could not be read.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"record file {str(path)!r} does not exist")
    bad: list[tuple[int, str]] = []
    with open_log_text(path) as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            try:
                got = parse(text)
            except ValueError as exc:
                bad.append((lineno, str(exc)))
                continue
            if got is not None:
                yield lineno, text, got
    if bad:
        lines = ", ".join(str(n) for n, _ in bad[:10]) + (" ..." if len(bad) > 10 else "")
        warnings.warn(
            f"{path}: skipped {len(bad)} {what} line(s): line {lines} (first: {bad[0][1]})",
            RecordWarning,
            stacklevel=stacklevel + 1,
        )


def _iter_records(path, dags: Mapping) -> Iterator[tuple[str, MeasureInput, MeasureResult]]:
    """``(raw line, input, result)`` per readable record; ONE warning for all unreadable lines
    (and one for records of an older workload-key scheme, which load but match no task)."""

    def parse(text: str):
        return None if _marker(text) is not None else decode_record(text, dags)

    old_keys = 0
    for lineno, text, (inp, res) in read_record_lines(path, parse, stacklevel=3):
        old_keys += _old_key_scheme(inp.task.workload_key)
        origin = f"{path} line {lineno}"
        inp = MeasureInput(inp.task, replace(inp.state, origin=origin))
        yield text, inp, res
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
        if self.path.is_file() and is_gzip_file(self.path):
            raise ValueError(
                f"RecordToFile({str(self.path)!r}): the file is gzip-compressed and records are "
                "appended as text; write to a plain .json log (read the compressed one with "
                "load_records, ApplyHistoryBest or load_log_file)"
            )
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
    with open_log_text(path) as f:
        for line in f:
            if line.strip():
                last = line.strip()
    marker = _marker(last)
    return last.startswith(END_MARK) or (marker is not None and marker[MARKER_KEY] == RUN_END)


def _target_matches(record_target: str, target) -> bool:
    return target is None or str(record_target) == str(target)


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
        and usable_result(res)
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
        if not usable_result(res):
            continue
        if key not in best or res.mean_cost < best[key][0]:
            best[key] = (res.mean_cost, text)
    with open(out_path, "w", encoding="utf-8") as f:
        for _, text in best.values():
            f.write(text + "\n")
    return len(best)
