"""Record files are data: hostile lines never execute anything and never stop a load; costs
that are not positive finite seconds never become a best; old-scheme keys apply to nothing."""

import base64
import contextlib
import hashlib
import json
import pickle
import re

import pytest

from autosched.measure import MeasureInput, MeasureResult
from autosched.measure.dispatch import ApplyHistoryBest
from autosched.measure.records import (
    RecordWarning,
    distill,
    load_best_record,
    load_records,
    save_records,
)
from autosched.workloads import matmul
from tensorir.dag import ComputeDAG


class _Task:
    def __init__(self, dag, target="llvm"):
        self.compute_dag = dag
        self.workload_key = dag.workload_key
        self.target = target


class _TouchOnUnpickle:
    """Unpickling this object runs ``open(path, "w")``: it creates the file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _hostile_lines(key, canary) -> list[bytes]:
    code = f"__import__('pathlib').Path({str(canary)!r}).touch()"
    pickled = base64.b64encode(pickle.dumps(_TouchOnUnpickle(str(canary)))).decode()
    record = {"v": 1, "i": [[key, "llvm"], [[], []]], "r": [[5e-3], 0, 0.1, 1.0]}

    def variant(**changes):
        rec = json.loads(json.dumps(record))
        for path, value in changes.items():
            node = rec
            *head, last = path.split("__")
            for part in head:
                node = node[int(part)] if part.isdigit() else node[part]
            node[int(last) if last.isdigit() else last] = value
        return json.dumps(rec).encode()

    deep = "[" * 100_000 + "]" * 100_000
    return [
        # python-looking payloads where strings belong, and a pickle that would create a file
        variant(i__0__0=code, i__0__1=code, e=code),
        variant(i__1__1=[["SP", code, 0, 8, [2], 1], ["PR", 2, 0, code]], e=pickled),
        json.dumps({"__reduce__": [code], "__class__": "os.system", "v": code}).encode(),
        b'{"py/object": "os.system", "v": 1, "i": "' + code.encode() + b'"}',
        ("!!python/object/apply:os.system ['touch " + str(canary) + "']").encode(),
        pickle.dumps(_TouchOnUnpickle(str(canary))).replace(b"\n", b" "),
        # huge numbers
        variant(r__0=[1e999]).replace(b"1e999", b"1" + b"0" * 5000),
        variant(r__0=[1.0]).replace(b"[1.0]", b"[1e999]"),
        variant(r__1=1).replace(b"], 1, 0.1", b"], " + b"9" * 400 + b", 0.1"),
        variant(r__2=1).replace(b", 1, 1.0]", b", " + b"9" * 400 + b", 1.0]"),
        # deep nesting: in the steps, in the costs, as the whole line
        variant(i__1__1="x").replace(b'"x"', deep.encode()),
        variant(r__0="x").replace(b'"x"', ("[" * 900 + "]" * 900).encode()),
        variant(e="x").replace(b'"x"', ("[" * 900 + "]" * 900).encode()),
        deep.encode(),
        # lists and objects where strings or numbers belong
        variant(i__0__0=[key]),
        variant(i__0__1=["llvm"]),
        variant(r__1=[0]),
        variant(r__0=[[1e-3]]),
        variant(r__0="fast"),
        variant(v=[1]),
        variant(i__1__1={"SP": 1}),
        # not UTF-8
        b"\xff\xfe\x00{\x80\x81" + variant(),
        variant(e="x").replace(b'"x"', b'"\xc3\x28\xa0\xa1"'),
    ]


def test_hostile_lines_execute_nothing_and_do_not_stop_the_load(tmp_path):
    dag = ComputeDAG(matmul(16, 16, 16))
    canary = tmp_path / "PWNED"
    log = tmp_path / "log.json"
    state = dag.get_init_state()
    state.split(dag.compute_ops[0].name, 0, [4])
    save_records(log, [MeasureInput(_Task(dag), state)], [MeasureResult((2e-3,))])
    hostile = _hostile_lines(dag.workload_key, canary)
    with open(log, "ab") as f:
        for line in hostile:
            f.write(line + b"\n")

    with pytest.warns(RecordWarning, match="corrupt") as caught:
        loaded = list(load_records(log, dags=[dag]))
    with pytest.warns(RecordWarning):
        ctx = ApplyHistoryBest(str(log), dags=[dag])
    with pytest.warns(RecordWarning):
        best = load_best_record(log, dag.workload_key, "llvm", dags=[dag])
    with pytest.warns(RecordWarning):
        assert distill(log, tmp_path / "best.json") >= 1
    # Replaying what did load (a step with code as its argument) is an error, not a call.
    for inp, _ in loaded:
        with contextlib.suppress(Exception):
            inp.state.to_state(dag)
    assert not canary.exists()
    assert best is not None and str(best[0].state.to_state()) == str(state)
    assert ctx.best[(dag.workload_key, "llvm")][1].mean_cost == pytest.approx(2e-3)
    # Every line either loads (odd but well-formed records) or is named in one warning.
    [msg] = [str(w.message) for w in caught if "corrupt" in str(w.message)]
    n_bad = int(re.search(r"skipped (\d+) corrupt", msg).group(1))
    assert len(loaded) + n_bad == 1 + len(hostile) and n_bad >= len(hostile) // 2
    assert loaded[0][0].state.origin == f"{log} line 1"


def test_costs_that_are_not_positive_finite_seconds_are_rejected_with_their_lines(tmp_path):
    dag = ComputeDAG(matmul(16, 16, 16))
    log = tmp_path / "log.json"
    save_records(log, [MeasureInput(_Task(dag), dag.get_init_state())], [MeasureResult((2e-3,))])
    line = json.dumps({"v": 1, "i": [[dag.workload_key, "llvm"], [[], []]], "r": [[7], 0, 0, 0]})
    with open(log, "a") as f:
        for cost in ("NaN", "Infinity", "-Infinity", "0", "-1e-3", "0.0"):
            f.write(line.replace("[[7]", f"[[{cost}]") + "\n")
        f.write(line.replace("[[7]", "[[1e-3, NaN]") + "\n")
        # A failed record's costs are never used: it loads whatever they say.
        f.write(line.replace("[[7], 0", "[[NaN], 4") + "\n")
    with pytest.warns(RecordWarning) as caught:
        loaded = list(load_records(log))
    [msg] = [str(w.message) for w in caught]
    assert "7 corrupt" in msg and "line 2, 3, 4, 5, 6, 7, 8" in msg
    assert [r.error_no for _, r in loaded] == [0, 4]
    with pytest.warns(RecordWarning):
        assert load_best_record(log, dag.workload_key)[1].mean_cost == pytest.approx(2e-3)


def test_records_of_the_old_key_scheme_load_but_apply_to_nothing(tmp_path):
    dag = ComputeDAG(matmul(16, 16, 16))
    # What autosched wrote before key version 2: md5 of the simple-mode print, then shapes.
    digest = hashlib.md5(dag.print_dag(simple_mode=True).encode()).hexdigest()
    old_key = json.dumps([digest] + [list(t.shape) for t in dag.tensors])
    line = {"v": 1, "i": [[old_key, "llvm"], [[], []]], "r": [[1e-4], 0, 0.1, 1.0], "e": ""}
    log = tmp_path / "old.json"
    log.write_text(json.dumps(line) + "\n")
    with pytest.warns(RecordWarning, match="1 record.*before key version 2.*apply to no task"):
        ctx = ApplyHistoryBest(str(log))
    assert ctx.lookup(dag.workload_key, "llvm") is None and dag.workload_key != old_key
