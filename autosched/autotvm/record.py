"""AutoTVM records: the auto-scheduler's JSON lines, with ``"kind": "autotvm"`` and the config.

A line is an ordinary record of :mod:`autosched.measure.records` (the template's DAG workload
key, the target, the State steps the configuration produced, the costs), so the shared loader
(``autosched.load_records``), ``distill`` and ``jq`` read it; two fields are added::

    {"v": 1, "kind": "autotvm",
     "i": [[WORKLOAD_KEY, TARGET], [[], [STEP, ...]]], "r": [...], "e": "...",
     "config": {"task": "conv2d_nchw.x86", "args": [...], "index": 1234, "code_hash": null,
                "entity": [["tile_oc", "sp", [-1, 4]], ["unroll_kw", "ot", true], ...]},
     "versions": {...}}

:func:`load_from_file` yields ``(autotvm.MeasureInput, MeasureResult)`` for the autotvm lines
of a file (other records are skipped); :func:`pick_best` keeps the best line per workload and
target.
"""

from __future__ import annotations

import json
from dataclasses import replace

from codegen.target import Target

from ..measure.data import MeasureInput as StateInput
from ..measure.data import usable_result
from ..measure.records import decode_record, encode_record, read_record_lines
from .measure_input import MeasureInput
from .space import ConfigEntity
from .task import Task
from .template import TEMPLATES

__all__ = ["checked_input", "decode", "encode", "load_from_file", "pick_best", "workload_of"]

KIND = "autotvm"


def _plain(x):
    """Tuples as lists, for JSON."""
    if isinstance(x, tuple | list):
        return [_plain(v) for v in x]
    return x


def _tuples(x):
    """Lists as tuples: workloads read back compare equal to the ones templates make."""
    if isinstance(x, list):
        return tuple(_tuples(v) for v in x)
    return x


class _NoSteps:
    """The steps of a configuration that did not instantiate (its record is a failure)."""

    steps = ()


def encode(inp: MeasureInput, result, protocol: str = "json") -> str:
    """One record line (without the newline) for a measured configuration."""
    if protocol != "json":
        raise ValueError(f"record protocol {protocol!r} is not supported; use 'json'")
    task = inp.task
    state = next((x for x in (inp.state, inp.record_state) if x is not None), _NoSteps())
    state_inp = StateInput(task.search_task, state)
    rec = json.loads(encode_record(state_inp, result))
    config = inp.config.to_json_dict()
    out = {"v": rec.pop("v"), "kind": KIND}
    out.update(rec)
    out["config"] = {"task": task.name, "args": _plain(task.args), **config}
    out["versions"] = out.pop("versions")
    return json.dumps(out, separators=(",", ":"))


def decode(row: str, protocol: str = "json"):
    """``(MeasureInput, MeasureResult)`` of an autotvm line, None for another record.

    Raises
    ------
    ValueError
        If the line is not a readable record, or its config is malformed (with the reason).
    """
    if protocol != "json":
        raise ValueError(f"record protocol {protocol!r} is not supported; use 'json'")
    try:
        obj = json.loads(row)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not a record ({type(exc).__name__})") from None
    if not isinstance(obj, dict) or obj.get("kind") != KIND:
        return None
    state_inp, res = decode_record(row)
    try:
        conf = obj["config"]
        config = ConfigEntity.from_json_dict(conf)
        target = Target(state_inp.task.target)
        task = Task(conf["task"], _tuples(conf["args"]), target)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed autotvm config ({type(exc).__name__}: {exc})") from None
    return MeasureInput(target, task, config, record_state=state_inp.state), res


def load_from_file(filename):
    """Yield ``(MeasureInput, MeasureResult)`` for every autotvm record of ``filename``.

    Lines of other records (the auto-scheduler's), run markers and blank lines are skipped;
    unreadable lines, and records whose config is not a point of their task's config space
    (unknown or missing knobs, values no knob offers, a wrong index: see
    :meth:`ConfigSpace.check`; checked when the template is registered, else by
    ``apply_history_best`` when it is asked), are skipped with ONE warning naming the file and
    their line numbers.
    ``inp.record_state`` holds the record's State steps (``inp.record_state.to_state(dag)``).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    """
    for _, inp, res in _iter_lines(filename):
        yield inp, res


def _iter_lines(filename):
    """``(text, MeasureInput, MeasureResult)`` per autotvm line, through the records' tolerant
    reader (:func:`~autosched.measure.records.read_record_lines`: ONE warning for bad lines)."""
    spaces: dict = {}

    def parse(text: str):
        if f'"{KIND}"' not in text:
            return None
        got = decode(text)
        return None if got is None else (checked_input(got[0], spaces), got[1])

    what = "unreadable or invalid autotvm record"
    for _, text, (inp, res) in read_record_lines(filename, parse, what, stacklevel=2):
        yield text, inp, res


def checked_input(inp: MeasureInput, spaces: dict | None = None) -> MeasureInput:
    """``inp`` with its config checked against its task's config space (and replaced by the
    space's own point), when the template is registered; unchanged otherwise.

    ``spaces`` caches the spaces by workload and target across calls.

    Raises
    ------
    ValueError
        The config is not a point of the space, or the template fails on the record's args.
    """
    task = inp.task
    if task.name not in TEMPLATES:
        return inp
    key = (task.workload, str(task.target))
    spaces = {} if spaces is None else spaces
    if key not in spaces:
        try:
            spaces[key] = task.config_space
        except Exception as exc:  # noqa: BLE001 - a template may raise anything on bad args
            spaces[key] = exc
    space = spaces[key]
    if isinstance(space, Exception):
        raise ValueError(
            f"template {task.name!r} fails on the record's args ({type(space).__name__}: {space})"
        )
    try:
        config = space.check(inp.config)
    except ValueError as exc:
        raise ValueError(f"config outside the config space of {task.name!r}: {exc}") from None
    return replace(inp, config=config)


def workload_of(inp: MeasureInput) -> tuple:
    """``(template name, *args)`` of a record's task."""
    return inp.task.workload


def pick_best(in_file, out_file) -> int:
    """Copy the best error-free record per (workload, target) of ``in_file`` to ``out_file``.

    Returns the number of records kept (lines copied verbatim, in order of first appearance).
    """
    best: dict[tuple, tuple[float, str]] = {}
    for text, inp, res in _iter_lines(in_file):
        if not usable_result(res):
            continue
        key = (workload_of(inp), str(inp.target))
        if key not in best or res.mean_cost < best[key][0]:
            best[key] = (res.mean_cost, text)
    with open(out_file, "w", encoding="utf-8") as f:
        for _, text in best.values():
            f.write(text + "\n")
    return len(best)
