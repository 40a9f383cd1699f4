"""What ``python -m autosched`` tells a person: the next command to run, an exported network
that refuses to run as another graph, the estimated and measured latency side by side."""

import shlex

import pytest

from autosched.cli import main
from autosched.cli.network import _cli_runner, latency_comparison, machine_busy

pytest.importorskip("onnx")
from tests.autosched.test_cli_bad_input import _conv_model, _fails  # noqa: E402


def test_an_exported_network_refuses_to_run_as_another_graph(tmp_path, capsys):
    model = _conv_model(tmp_path / "m.onnx")
    lib = str(tmp_path / "m.lib")
    assert main(["compile", "--onnx", model, "--no-winograd", "-o", lib]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    run_cmd = f"python -m autosched run --onnx {shlex.quote(model)} --target llvm --no-winograd"
    assert last == f"Wrote {lib}. Next: {run_cmd} --lib {shlex.quote(lib)}"
    # The same graph runs (and checks against numpy) ...
    assert main(["run", "--onnx", model, "--no-winograd", "--lib", lib, "--repeat", "1"]) == 0
    assert "(OK)" in capsys.readouterr().out
    # ... another input shape is another graph: refused, naming both.
    argv = ["run", "--onnx", model, "--input-shape", "1,3,8,8", "--no-winograd", "--lib", lib]
    err = _fails(argv, capsys, f"--lib {lib} was compiled from ONNX {model} no-winograd (graph ")
    assert f"not from ONNX {model} input 1,3,8,8 no-winograd (graph " in err
    assert "compile it again: python -m autosched compile --onnx" in err


def test_latency_comparison_names_both_and_why():
    line = latency_comparison(1.25, 2.5, gpu=True)
    assert "estimated 1.250 ms" in line and "measured 2.500 ms" in line
    assert "warm caches" in line and "cold caches" in line and "launch gaps" in line
    assert "launch gaps" not in latency_comparison(None, 2.5, gpu=False)
    assert "estimated - " in latency_comparison(None, 2.5, gpu=False)
    # The reason follows the direction of the difference.
    faster = latency_comparison(396.7, 61.1, gpu=False)
    assert "network is faster" in faster and "cold caches" not in faster
    assert "agree within 15%" in latency_comparison(10.0, 10.9, gpu=False)
    # Tuned with cold caches (the CLI's CPU default), caches are no reason; load on the cores is.
    cold = latency_comparison(20.0, 988.0, gpu=False, cold_tuned=True, busy="the machine is busy")
    assert "cold caches" not in cold and "the machine is busy" in cold


def test_machine_busy_reads_the_load_average(monkeypatch):
    monkeypatch.setattr("os.getloadavg", lambda: (5.1, 4.0, 3.0))
    assert "load average 5.1 on 2 cores" in machine_busy(2)
    monkeypatch.setattr("os.getloadavg", lambda: (2.2, 2.0, 2.0))
    assert machine_busy(2) is None


def test_cli_tunes_cpu_networks_with_cold_caches():
    from types import SimpleNamespace

    runner = _cli_runner(SimpleNamespace(target="llvm -mcpu=native", warm_caches=False))
    assert runner.enable_cpu_cache_flush and runner.repeat == 10
    assert _cli_runner(SimpleNamespace(target="llvm", warm_caches=True)) == "local"
    assert _cli_runner(SimpleNamespace(target="cuda", warm_caches=False)) == "local"


def test_tune_ends_with_the_latencies_and_the_next_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("autosched.network.progress.TABLE_INTERVAL_S", 1e9)
    model = _conv_model(tmp_path / "m.onnx")
    log = tmp_path / "m.json"
    argv = ["tune", "--onnx", model, "--no-winograd", "--log", str(log), "--trials", "2",
            "--per-round", "1", "--population", "4", "--generations", "0", "--repeat", "1",
            "--min-repeat-ms", "1"]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    # 2 trials: the warm-up is the whole run, so one table, at the end
    assert lines.count("|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |") == 1
    assert lines[-2].startswith("Latency: estimated ") and " ms (sum of weight" in lines[-2]
    # The reason given depends on which latency is larger (see the unit test above).
    reasons = ("network is slower", "network is faster", "agree within 15%")
    assert "measured " in lines[-2] and any(r in lines[-2] for r in reasons)
    assert lines[-1] == (
        f"Records: {log}. Next: python -m autosched compile --onnx {shlex.quote(model)} "
        f"--target llvm --no-winograd --log {shlex.quote(str(log))} -o m.lib"
    )


def _dynamic_bert_like_model(path):
    """An embedding lookup of ``input_ids`` scaled by its ``attention_mask``, both (1, "seq")
    as torch exports them with dynamic axes."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    table = np.random.default_rng(3).standard_normal((11, 4)).astype("float32")
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["emb"]),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", "last"], ["mask3"]),
        helper.make_node("Mul", ["emb", "mask3"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, "seq"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 4])],
        initializer=[
            numpy_helper.from_array(table, "table"),
            numpy_helper.from_array(np.array([-1], "int64"), "last"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, str(path))
    return str(path)


@pytest.mark.parametrize("shape", ["1,6", "input_ids=1,6;attention_mask=1,6"])
def test_one_input_shape_sets_the_sequence_length_of_every_dynamic_input(shape, tmp_path, capsys):
    model = _dynamic_bert_like_model(tmp_path / "bert_like.onnx")
    assert main(["run", "--onnx", model, "--input-shape", shape, "--repeat", "1"]) == 0
    assert "(OK)" in capsys.readouterr().out


def test_input_shape_naming_an_unknown_input_is_one_line(tmp_path, capsys):
    model = _dynamic_bert_like_model(tmp_path / "bert_like.onnx")
    _fails(["run", "--onnx", model, "--input-shape", "ids=1,6"], capsys, "has no input 'ids'")


def test_latency_comparison_gives_a_partial_estimate_and_says_so():
    """Issue 29: the CLI said 'No estimate' while most tasks had records."""
    line = latency_comparison(284.4, 453.6, gpu=False, coverage=(15, 24))
    assert "estimated 284.400 ms" in line and "15 of 24 tasks" in line
    assert "No estimate" not in line and "default schedules" in line
    assert "agree" in latency_comparison(10.0, 10.5, gpu=False, coverage=(24, 24))
