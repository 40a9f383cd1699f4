"""benchmarks/tune_ledger.py: one tuning budget over several runs, and the records of its
first seconds."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks.bench_loader import load_bench

tl = load_bench("tune_ledger")


class Clock:
    """A settable stand-in for time.time."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _record(stamp: float, cost: float = 1e-5) -> str:
    return json.dumps({"v": 1, "i": [["key", "cuda"], [[], []]], "r": [[cost], 0, 1.0, stamp]})


def test_runs_add_up_and_a_killed_run_keeps_its_last_batch(tmp_path):
    ledger = tl.TuneLedger(tmp_path / "log.json.ledger.json")
    assert ledger.runs() == [] and ledger.remaining(1200) == 1200
    clock = Clock(1000.0)
    first = ledger.start_run(clock)
    clock.now = 1400.0
    first.callback([], [])
    clock.now = 1530.0  # stopped from outside before the next batch ended: 130 s unrecorded
    assert ledger.spent() == pytest.approx(400.0)
    clock.now = 5000.0
    second = ledger.start_run(clock)
    clock.now = 5350.5
    second.callback([], [])
    assert [r["start"] for r in ledger.runs()] == [1000.0, 5000.0]
    assert ledger.spent() == pytest.approx(750.5)
    assert ledger.remaining(1200) == pytest.approx(449.5)
    assert ledger.remaining(700) == 0.0


def test_tuned_seconds_count_earlier_runs_and_skip_gaps_between_them():
    runs = [{"start": 100.0, "seconds": 50.0}, {"start": 1000.0, "seconds": 30.0}]
    assert tl.tuned_seconds_at(120.0, runs) == pytest.approx(20.0)
    assert tl.tuned_seconds_at(1010.0, runs) == pytest.approx(60.0)  # 50 before, 10 in run 2
    assert tl.tuned_seconds_at(99.0, runs) is None  # before the ledger's first run


def test_records_within_keeps_only_the_first_seconds(tmp_path):
    runs = [{"start": 100.0, "seconds": 50.0}, {"start": 1000.0, "seconds": 30.0}]
    stamps = [110.0, 149.0, 1005.0, 1015.0, 1029.0]  # tuned at 10, 49, 55, 65, 79 s
    log = tmp_path / "log.json"
    lines = [json.dumps({"autosched_marker": "run-start", "time": "2026-11-28T08:45:13"})]
    lines += [_record(s) for s in stamps] + ["{not json", _record(50.0)]
    log.write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match="line 7"):  # the unreadable line, named once
        kept = tl.records_within(log, runs, 60.0)
    assert [json.loads(x)["r"][3] for x in kept] == [110.0, 149.0, 1005.0]
    with pytest.warns(UserWarning):
        assert len(tl.records_within(log, runs, 1e9)) == len(stamps)


def test_trim_command_writes_the_records_and_refuses_an_empty_ledger(tmp_path, capsys):
    log, ledger, out = tmp_path / "log.json", tmp_path / "l.json", tmp_path / "first.json"
    log.write_text("\n".join(_record(s) for s in (10.0, 20.0, 30.0)) + "\n")
    ledger.write_text(json.dumps([{"start": 0.0, "seconds": 40.0}]))
    assert tl.main(["trim", str(log), str(ledger), "25", str(out)]) == 0
    assert [json.loads(x)["r"][3] for x in out.read_text().splitlines()] == [10.0, 20.0]
    assert "2 records" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        tl.main(["trim", str(log), str(tmp_path / "missing.json"), "25", str(out)])
    assert "no runs" in capsys.readouterr().err


def test_a_corrupt_ledger_names_its_file(tmp_path):
    path = tmp_path / "bad.ledger.json"
    path.write_text('[{"start": 1}]')
    with pytest.raises(tl.LedgerError, match="bad.ledger.json.*delete it"):
        tl.TuneLedger(path).spent()
