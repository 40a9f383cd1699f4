"""benchmarks/gpu_side_by_side.py without a GPU: each job gets its own GPU index and its own
cores, its output and arguments where the benches expect them, and a job past the limit is
stopped."""

from __future__ import annotations

import json
import os

import pytest

from tests.benchmarks.bench_loader import load_bench

side = load_bench("gpu_side_by_side")

# A stand-in bench: writes what it saw (GPU, cores, environment, arguments) to its --out.
_FAKE = """
import json, os, sys, time
args = sys.argv[1:]
out = args[args.index("--out") + 1]
if "--sleep" in args:
    time.sleep(float(args[args.index("--sleep") + 1]))
json.dump({"gpu": os.environ["CUDA_VISIBLE_DEVICES"], "cores": sorted(os.sched_getaffinity(0)),
           "split": os.environ.get("AUTOSCHED_SPLIT_K_DENSE"), "args": args}, open(out, "w"))
print("done", os.environ["CUDA_VISIBLE_DEVICES"])
"""


def test_parse_job_reads_name_environment_and_command():
    job = side.parse_job("bert=AUTOSCHED_SPLIT_K_DENSE=0 bench_transformer_gpu.py --seconds 400")
    assert job.name == "bert" and job.env == {"AUTOSCHED_SPLIT_K_DENSE": "0"}
    assert job.argv == ("bench_transformer_gpu.py", "--seconds", "400")
    with pytest.raises(ValueError, match="NAME=SCRIPT ARGS"):
        side.parse_job("bench_gpu.py --ops none")


def test_core_slices_are_equal_and_disjoint():
    assert side.core_slices(list(range(7)), 3) == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError, match="fewer jobs"):
        side.core_slices([0, 1], 3)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_each_job_gets_its_gpu_its_cores_and_its_files(tmp_path, capsys):
    fake = tmp_path / "fake_bench.py"
    fake.write_text(_FAKE)
    cores = sorted(os.sched_getaffinity(0))
    jobs = [f"a={fake} --x 1", f"b=AUTOSCHED_SPLIT_K_DENSE=0 {fake} --x 2"][: len(cores)]
    root = tmp_path / "W"
    assert side.main([*jobs, "--root", str(root), "--piece", "2", "--limit", "120"]) == 0
    seen = [json.loads((root / n / "rows-p2.json").read_text()) for n in ("a", "b")[: len(jobs)]]
    slices = side.core_slices(cores, len(jobs))
    for gpu, row in enumerate(seen):
        assert row["gpu"] == str(gpu) and row["cores"] == slices[gpu]
        assert row["args"][-4:] == ["--work-dir", str(root / "ab"[gpu]),
                                    "--out", str(root / "ab"[gpu] / "rows-p2.json")]  # fmt: skip
    if len(seen) > 1:
        assert seen[0]["split"] is None and seen[1]["split"] == "0"
    printed = capsys.readouterr().out
    assert "a piece 2 rc=0: done 0" in printed


def test_a_job_past_the_limit_is_stopped(tmp_path, capsys):
    fake = tmp_path / "fake_bench.py"
    fake.write_text(_FAKE)
    root = tmp_path / "W"
    side.main([f"slow={fake} --sleep 60", "--root", str(root), "--limit", "1"])
    assert "slow piece 1 stopped at the limit" in capsys.readouterr().out
    assert not (root / "slow" / "rows-p1.json").exists()
