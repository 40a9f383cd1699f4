"""benchmarks/bench_autotvm.py: merging piece JSONs, resuming, and the RESULTS.md tables
(synthetic pieces: nothing is tuned or measured here)."""

from __future__ import annotations

import json
import math
import pathlib

import pytest

from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_autotvm", keep_path=True)

BUDGETS = [2, 4]
T0, T3 = "#0 c3 224x224 k64 7x7 s2", "#3 c64 56x56 k128 3x3 s2"


def curve_entry(curve, partial=False):
    """A tuner result as run_tuners writes it, from a best-so-far curve in GFLOP/s."""
    return {
        "best_gflops": bench.at_budgets([v * 1e9 for v in curve], BUDGETS, not partial),
        "curve_gflops": list(curve),
        "seconds": 1.0,
        "partial": partial,
    }


def write(tmp_path, name, result):
    path = tmp_path / name
    path.write_text(json.dumps({"target": "llvm", "trials": BUDGETS, "argv": [name], **result}))
    return str(path)


def test_at_budgets_partial_run_reports_no_figure_past_its_last_trial():
    curve = [1e9, 3e9, 3e9]
    assert bench.at_budgets(curve, [2, 4]) == {"2": 3.0, "4": 3.0}  # a complete short run
    assert bench.at_budgets(curve, [2, 4], complete=False) == {"2": 3.0, "4": None}


def test_summarize_merges_pieces_prefers_complete_and_prints_tables(tmp_path, capsys):
    a = write(tmp_path, "a.json", {
        "tuners": {T0: {"xgb": curve_entry([1, 2, 6, 8]), "ga": curve_entry([2, 3], True)}},
    })  # fmt: skip
    b = write(tmp_path, "b.json", {
        "tuners": {
            T0: {"ga": curve_entry([1, 4, 5, 5])},
            T3: {"xgb": curve_entry([2, 2, 2, 9]), "ga": curve_entry([3, 3, 4, 4])},
        },
        "template_free": {T0: curve_entry([5, 7, 7, 16]), T3: curve_entry([1, 1, 3, 3])},
        "cost_models": {"train_tasks": 3, "test_tasks": 2, "records_per_task": 6,
                        "models": {"random": {"top1": 0.25, "top5": 0.5, "ndcg": 0.75}}},
    })  # fmt: skip
    out, md = tmp_path / "merged.json", tmp_path / "tables.md"
    assert bench.main(["--summarize", a, b, "--out", str(out), "--markdown", str(md)]) == 0

    merged = json.loads(out.read_text())
    # b's complete GA run replaces a's partial one; a's XGB run on T0 is kept
    assert merged["tuners"][T0]["ga"]["curve_gflops"] == [1, 4, 5, 5]
    assert merged["tuners"][T0]["xgb"]["best_gflops"] == {"2": 2.0, "4": 8.0}
    assert sorted(merged["tuners"]) == [T0, T3]
    assert [p["file"] for p in merged["pieces"]] == [a, b]

    table = md.read_text()
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): line
            for line in table.splitlines() if line.startswith("| ")}  # fmt: skip
    # geomean over the two tasks after 4 trials: xgb sqrt(8 * 9), ga sqrt(5 * 4)
    assert rows[("xgb", "4")].rstrip(" |").endswith(f"{math.sqrt(72):.2f}")
    assert rows[("ga", "4")].rstrip(" |").endswith(f"{math.sqrt(20):.2f}")
    assert rows[("ansor (template-free)", "4")].rstrip(" |").endswith(f"{math.sqrt(48):.2f}")
    # template vs template-free on T0 after 4 trials: best tuner xgb 8.00, ansor 16.00
    t0_row = next(line for line in table.splitlines() if line.startswith(f"| {T0} | xgb"))
    assert "| 8.00 | 16.00 | 2.00x |" in t0_row
    assert "| random | 0.250 | 0.500 | 0.750 |" in table
    assert table in capsys.readouterr().out


def test_summary_marks_partial_runs_and_a_missing_task_gives_no_geomean(tmp_path):
    a = write(tmp_path, "a.json", {
        "tuners": {T0: {"xgb": curve_entry([1, 2, 3], partial=True)},
                   T3: {"xgb": curve_entry([2, 2, 2, 9]), "random": curve_entry([1, 1, 1, 1])}},
    })  # fmt: skip
    result = bench.merge_pieces(bench.load_pieces([a]))
    table = bench.markdown_tables(result)
    assert f"| xgb | 2 | 2.00* | 2.00 | {math.sqrt(4):.2f} |" in table
    assert "| xgb | 4 | n/a | 9.00 | n/a |" in table  # the partial run stopped at trial 3
    assert "| random | 4 | n/a | 1.00 | n/a |" in table  # random never ran on T0


def test_summarize_refuses_pieces_of_different_budgets(tmp_path):
    a = write(tmp_path, "a.json", {})
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"target": "llvm", "trials": [50, 100], "argv": []}))
    with pytest.raises(ValueError, match=r"b\.json has trials \[50, 100\]"):
        bench.merge_pieces(bench.load_pieces([a, str(b)]))


def test_resume_keeps_the_finished_work_of_a_piece(tmp_path):
    out = write(tmp_path, "piece.json", {"tuners": {T0: {"xgb": curve_entry([1, 2, 3, 4])}}})
    args = bench.parse_args(["--out", out, "--trials", "2,4", "--resume", "--task-ids", "0"])
    piece = bench.start_piece(args)
    assert bench.done(piece.result["tuners"][T0]["xgb"])
    args = bench.parse_args(["--out", out, "--trials", "2,8", "--resume"])
    with pytest.raises(SystemExit, match="--resume: .* trials \\[2, 4\\]"):
        bench.start_piece(args)


def test_bad_piece_options_fail_with_a_clear_message():
    with pytest.raises(SystemExit, match="--cores: cannot read 'x'"):
        bench.parse_args(["--cores", "0-1,x"])
    assert bench.parse_index_list("0-2,7,1", "--task-ids") == [0, 1, 2, 7]


def test_summarize_plots_one_panel_per_task(tmp_path):
    pytest.importorskip("matplotlib")
    a = write(tmp_path, "a.json", {
        "tuners": {T0: {"xgb": curve_entry([1, 2, 6, 8])}, T3: {"ga": curve_entry([1, 3])}},
    })  # fmt: skip
    png = tmp_path / "curves.png"
    bench.main(["--summarize", a, "--out", str(tmp_path / "m.json"), "--plot", str(png)])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class _Killed(Exception):
    """Stands for the SIGTERM of `timeout` in the middle of a tuner run."""


def _fake_task():
    from types import SimpleNamespace

    shapes = (("TENSOR", (1, 64, 56, 56), "float32"), ("TENSOR", (64, 64, 3, 3), "float32"))
    return SimpleNamespace(args=(*shapes, (1, 1), (1, 1, 1, 1)), config_space=range(100))


def test_a_killed_piece_keeps_its_finished_batches_and_resumes(tmp_path, monkeypatch):
    runs = []

    class FakeTuner:
        """Measures batches of 2 with a rising best; dies after `kill_after` batches."""

        kill_after = None

        def __init__(self, task, seed):
            self.trace, self.best_config = [], "cfg"

        def tune(self, n_trial, measure_option, callbacks):
            runs.append(n_trial)
            for batch in range(n_trial // 2):
                if batch == FakeTuner.kill_after:
                    raise _Killed
                self.trace += [(2 * batch + 1) * 1e9, (2 * batch + 2) * 1e9]
                for callback in callbacks:
                    callback(self, [], [])

    monkeypatch.setitem(bench.TUNERS, "random", FakeTuner)
    monkeypatch.setattr(bench.autotvm.callback, "progress_bar", lambda *a, **k: lambda *x: None)
    out = str(tmp_path / "piece.json")
    argv = ["--out", out, "--trials", "2,8", "--tuners", "random", "--resume"]
    label = bench.task_label(1, _fake_task())

    FakeTuner.kill_after = 2
    args = bench.parse_args(argv)
    with pytest.raises(_Killed):
        bench.run_tuners([(1, _fake_task())], args, None, bench.start_piece(args))
    kept = json.loads(pathlib.Path(out).read_text())["tuners"][label]["random"]
    assert kept["partial"] and kept["curve_gflops"] == [1, 2, 3, 4]
    assert kept["best_gflops"] == {"2": 2.0, "8": None}  # 8 trials were not reached

    FakeTuner.kill_after = None
    for _ in range(2):  # the second resumed run finds the tuner done and does not tune it
        args = bench.parse_args(argv)
        bench.run_tuners([(1, _fake_task())], args, None, bench.start_piece(args))
    assert runs == [8, 8]
    done = json.loads(pathlib.Path(out).read_text())["tuners"][label]["random"]
    assert not done["partial"] and done["best_gflops"] == {"2": 2.0, "8": 8.0}
