"""``python -m autosched tune|compile|run|benchmark`` with bad arguments: one line on stderr
naming the argument, exit status 2, no traceback (issue 14)."""

import numpy as np
import pytest

from autosched.cli import main

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _conv_model(path):
    """Two convolutions of different shapes: two tuning tasks."""
    rng = np.random.default_rng(0)
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype("float32")
    w2 = rng.uniform(-1, 1, (2, 4, 1, 1)).astype("float32")
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["data", "w"], ["y"], pads=[1, 1, 1, 1]),
            helper.make_node("Conv", ["y", "w2"], ["z"]),
        ],
        "g",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, (1, 3, 6, 6))],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(w2, "w2")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return str(path)


def _fails(argv, capsys, match):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert match in err, err
    return err


@pytest.mark.parametrize(
    "argv,match",
    [
        (["run", "--target", ""], "--target '': target must be a string"),
        (["run", "--target", "llvm -mcpu=nonexistent"], "-mcpu=nonexistent is not this host's"),
        (["run", "--input-shape", "1,3,8,8"], "--input-shape only applies to --onnx"),
        (["tune", "--population", "0"], "--population must be >= 1, got 0"),
        (["tune", "--generations", "-1"], "--generations must be >= 0, got -1"),
        (["tune", "--trials", "0"], "--trials must be >= 1, got 0"),
        (["run", "--batch-size", "0"], "--batch-size must be >= 1, got 0"),
        (["run", "--network", "resnet-7"], "--network 'resnet-7' is not a zoo network; use"),
        (["tune", "--target", "gpu"], "--target 'gpu': name the target kind, one of llvm, cuda"),
        (["run", "--onnx", "no-such.onnx"], "--onnx no-such.onnx: from_onnx: no such ONNX file"),
        (["run", "--lib", "no-such.lib"], "--lib no-such.lib does not exist; write it with"),
    ],
)
def test_bad_values(argv, match, capsys):
    _fails(argv, capsys, match)


@pytest.mark.parametrize("shape", ["1,x", "", "1,,3", "0,3,6,6"])
def test_bad_input_shape(shape, tmp_path, capsys):
    model = _conv_model(tmp_path / "m.onnx")
    _fails(["run", "--onnx", model, "--input-shape", shape], capsys, f"--input-shape {shape!r}")


def test_log_is_a_directory(tmp_path, capsys):
    _fails(["tune", "--log", str(tmp_path)], capsys, f"--log {tmp_path} is a directory")
    for command in ("compile", "run", "benchmark"):  # said "does not exist"
        extra = ["-o", str(tmp_path / "x.lib")] if command == "compile" else []
        argv = [command, "--log", str(tmp_path), *extra]
        _fails(argv, capsys, f"--log {tmp_path} is a directory")
    _fails(["run", "--lib", str(tmp_path)], capsys, f"--lib {tmp_path} is a directory")
    missing = tmp_path / "no" / "log.json"
    _fails(["tune", "--log", str(missing)], capsys, f"the directory {missing.parent} does not")


def test_onnx_that_is_no_model_or_of_another_rank(tmp_path, capsys):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    _fails(["run", "--onnx", str(empty)], capsys, f"--onnx {empty}: not an ONNX model")
    model = _conv_model(tmp_path / "m.onnx")
    _fails(["run", "--onnx", model, "--input-shape", "1,3,6"], capsys, "give a shape of the same")


def test_tune_cuda_without_a_gpu_and_too_few_trials(tmp_path, capsys, monkeypatch):
    def no_driver(index=0):
        raise RuntimeError("CUDA driver unavailable: cuInit failed (test)")

    monkeypatch.setattr("runtime.cuda.query_properties", no_driver)
    model = _conv_model(tmp_path / "m.onnx")
    log = str(tmp_path / "log.json")
    _fails(["tune", "--onnx", model, "--target", "cuda", "--log", log], capsys, "cuInit failed")
    _fails(["tune", "--onnx", model, "--trials", "1", "--log", log, "--no-winograd"], capsys,
           "--trials 1 is below the")  # fmt: skip


@pytest.mark.parametrize("command", ["compile", "run", "benchmark"])
def test_a_log_that_does_not_exist(command, tmp_path, capsys):
    """Compiling from a --log that is not there is a mistake, not a silent default build."""
    log = tmp_path / "typo.json"
    extra = ["-o", str(tmp_path / "x.lib")] if command == "compile" else []
    _fails([command, "--log", str(log), *extra], capsys, f"--log {log} does not exist; tune first")
