"""benchmarks/bench_vs_metaschedule.py: checkpoints, truncating logs and MetaSchedule databases by
the polled line counts, the summary and the CSV (synthetic files: nothing is tuned, TVM is not
needed)."""

from __future__ import annotations

import csv
import json
import pathlib
import random

import pytest

from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_vs_metaschedule", keep_path=True)


def test_checkpoints_end_at_the_budget():
    assert bench.checkpoints(900, 60) == [60.0 * k for k in range(1, 16)]
    assert bench.checkpoints(100, 30) == [30, 60, 90, 100.0]
    assert bench.checkpoints(20, 60) == [20.0]
    with pytest.raises(ValueError, match="must be > 0"):
        bench.checkpoints(0, 60)


def test_complete_lines_ignores_a_line_being_written():
    assert bench.complete_lines("") == 0
    assert bench.complete_lines('{"a": 1}\n{"b": 2}\n{"c"') == 2


def test_lines_at_takes_the_last_sample_by_then():
    rng = random.Random(3)
    times = sorted(rng.uniform(0, 100) for _ in range(40))
    counts, n = [], 0
    for _ in times:
        n += rng.randint(0, 5)
        counts.append(n)
    progress = list(zip(times, counts))
    for point in (0.0, times[0] - 1e-3, times[7], 50.0, times[-1], 1000.0):
        expected = max([c for t, c in progress if t <= point], default=0)
        assert bench.lines_at(progress, point) == expected
    assert bench.lines_at([], 10.0) == 0


def _ms_database(root: pathlib.Path, n_records: int, partial: bool) -> pathlib.Path:
    """A MetaSchedule-like JSON database: workload lines, and record lines referring to them
    by index (the last one half written when ``partial``)."""
    rng = random.Random(n_records)
    root.mkdir()
    workloads = [json.dumps([f"hash{k}", {"mod": rng.random()}]) for k in range(3)]
    (root / bench.MS_WORKLOADS).write_text("".join(w + "\n" for w in workloads))
    records = [json.dumps([rng.randrange(3), [["trace"], [rng.random()], {"kind": "llvm"}]])
               for _ in range(n_records)]  # fmt: skip
    text = "".join(r + "\n" for r in records) + ('[1, [["tra' if partial else "")
    (root / bench.MS_RECORDS).write_text(text)
    return root


def test_truncate_ms_database_keeps_all_workloads_and_the_first_records(tmp_path):
    src = _ms_database(tmp_path / "db", 7, partial=True)
    dst = tmp_path / "at-60"
    bench.truncate_ms_database(src, dst, 4)
    assert (dst / bench.MS_WORKLOADS).read_text() == (src / bench.MS_WORKLOADS).read_text()
    full = (src / bench.MS_RECORDS).read_text().splitlines()
    kept = (dst / bench.MS_RECORDS).read_text().splitlines()
    assert kept == full[:4]
    assert all(isinstance(json.loads(line), list) for line in kept)
    bench.truncate_ms_database(src, tmp_path / "at-0", 0)
    assert (tmp_path / "at-0" / bench.MS_RECORDS).read_text() == ""
    # the half-written last line never counts
    with pytest.raises(ValueError, match="7 complete lines, fewer than the 8"):
        bench.truncate_ms_database(src, tmp_path / "bad", 8)


def test_truncate_ms_database_before_anything_was_committed(tmp_path):
    (tmp_path / "db").mkdir()
    bench.truncate_ms_database(tmp_path / "db", tmp_path / "at-60", 0)
    assert (tmp_path / "at-60" / bench.MS_RECORDS).read_text() == ""
    assert (tmp_path / "at-60" / bench.MS_WORKLOADS).read_text() == ""


def test_time_to_reach_is_the_first_checkpoint_at_or_below():
    curve = [(120, 30.0), (60, 80.0), (180, 25.0), (240, 26.0)]
    assert bench.time_to_reach(curve, 30.0) == 120
    assert bench.time_to_reach(curve, 27.5) == 180
    assert bench.time_to_reach(curve, 80.0) == 60
    assert bench.time_to_reach(curve, 10.0) is None


def _rows(rng):
    rows = []
    for side in ("ours", "metaschedule"):
        value = rng.uniform(100, 200)
        for k, point in enumerate(bench.checkpoints(300, 60)):
            value *= rng.uniform(0.6, 1.0)
            rows.append({"side": side, "seconds": point, "records": 10 * k,
                         "latency_ms": value, "max_abs_err": 1e-6})  # fmt: skip
    return rows


def test_summary_and_csv(tmp_path):
    rows = _rows(random.Random(5))
    summary = bench.summarize(rows)
    ours = [r for r in rows if r["side"] == "ours"]
    theirs = [r for r in rows if r["side"] == "metaschedule"]
    assert summary["ours_final_ms"] == ours[-1]["latency_ms"]
    assert summary["metaschedule_final_ms"] == theirs[-1]["latency_ms"]
    assert summary["ms_over_ours"] == pytest.approx(
        theirs[-1]["latency_ms"] / ours[-1]["latency_ms"]
    )
    reach = summary["ours_reaches_ms_final_at_s"]
    first = next((r["seconds"] for r in ours if r["latency_ms"] <= theirs[-1]["latency_ms"]), None)
    assert reach == first
    assert summary["ms_reaches_ms_final_at_s"] == 300.0  # its curve only falls
    assert summary["ours_final_records"] == max(r["records"] for r in ours)
    bench.write_csv(rows, tmp_path / "curves.csv")
    with open(tmp_path / "curves.csv") as f:
        back = list(csv.DictReader(f))
    assert [c for c in back[0]] == list(bench.CSV_COLUMNS)
    assert len(back) == len(rows)
    got = {(r["side"], float(r["seconds"])): float(r["latency_ms"]) for r in back}
    assert got == {(r["side"], r["seconds"]): pytest.approx(r["latency_ms"]) for r in rows}


def test_summary_of_one_side_has_no_comparison():
    rows = [r for r in _rows(random.Random(9)) if r["side"] == "ours"]
    summary = bench.summarize(rows)
    assert "ours_final_ms" in summary and "ms_over_ours" not in summary
