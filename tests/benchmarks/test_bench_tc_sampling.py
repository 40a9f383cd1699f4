"""benchmarks/bench_tc_sampling.py on a small network: one table row per tensor-core GEMM shape,
each with valid draws."""

from __future__ import annotations

import re

from tests.benchmarks.bench_loader import load_bench

bench = load_bench("bench_tc_sampling")


def test_the_table_has_a_row_per_gemm_shape_with_valid_draws(capsys):
    assert bench.main(["--networks", "bert-tiny:2", "--precisions", "tf32", "--draws", "3"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| bert-tiny")]
    shapes = [ln.split(" | ")[3] for ln in rows]
    assert len(rows) >= 3 and len(set(shapes)) == len(shapes), rows  # deduplicated
    draws = [re.search(r"\| (\d+)/3 \|", ln) for ln in rows]
    assert all(d and int(d.group(1)) >= 1 for d in draws), rows
