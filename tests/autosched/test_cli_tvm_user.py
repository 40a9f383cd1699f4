"""What a TVM user types first at the command line: one line and exit status 2 instead of a
traceback (a zoo network in the wrong layout, an ONNX file without onnx installed, a GPU
target without the GPU), help texts that say what a command does, and a resume hint after
an interrupted ``tune`` that names a command (issue 30)."""

import sys

import pytest

from autosched.cli import main


def _fails(argv, capsys, match):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    assert exc.value.code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert match in err, err
    return out, err


def test_squeezenet_in_the_default_layout_says_add_layout_nchw(capsys):
    why = "--network squeezenet_v1.1 exists in the NCHW layout only (as TVM's); add --layout NCHW"
    _fails(["tune", "--network", "squeezenet_v1.1"], capsys, why)


def test_onnx_without_the_onnx_package(tmp_path, capsys, monkeypatch):
    # As on a machine where onnx (and with it google.protobuf) is not installed.
    for name in ("onnx", "onnx.numpy_helper", "google", "google.protobuf",
                 "google.protobuf.message"):  # fmt: skip
        monkeypatch.setitem(sys.modules, name, None)
    _fails(["benchmark", "--onnx", "nofile.onnx"], capsys, "--onnx nofile.onnx: from_onnx: no such")
    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07")
    why = f"--onnx {model}: reading ONNX models needs the onnx package: pip install onnx"
    _fails(["benchmark", "--onnx", str(model)], capsys, why)


def _no_cuda(monkeypatch):
    def no_driver(index=0):
        raise RuntimeError("CUDA driver unavailable: cuInit failed (test)")

    monkeypatch.setattr("runtime.cuda.query_properties", no_driver)


def test_demo_on_a_missing_gpu(capsys, monkeypatch):
    _no_cuda(monkeypatch)
    why = "--target cuda: no usable cuda device 0 on this machine (CUDA driver unavailable"
    _fails(["demo", "--target", "cuda"], capsys, why)


def test_tune_cuda_without_a_gpu_says_so_before_the_task_list(capsys, monkeypatch):
    _no_cuda(monkeypatch)
    out, err = _fails(["tune", "--target", "cuda"], capsys, "cannot tune: no usable cuda device")
    assert "Extract tasks" not in out and "ComputeDAG" not in out and "Task 0" not in out
    assert out == ""


@pytest.mark.parametrize("command", ["demo", "distill"])
def test_demo_and_distill_describe_themselves(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    text = out.split("\n\n")[1]  # usage, then the description
    assert not text.startswith("options") and len(text.split()) >= 12, out


@pytest.mark.parametrize("command", ["query_rpc_tracker", "rpc_tracker", "rpc_server"])
def test_exec_commands_help_is_not_cut_off(command, capsys):
    import importlib

    module = importlib.import_module(f"autosched.exec.{command}")
    with pytest.raises(SystemExit):
        module.main(["--help"])
    out = capsys.readouterr().out
    first_paragraph = module.__doc__.split("\n\n")[0].replace("``", "")
    assert " ".join(first_paragraph.split()) in " ".join(out.split())
    if command == "query_rpc_tracker":
        assert "how many requests wait (TVM's table)." in " ".join(out.split())


def test_interrupted_tune_names_the_command_that_resumes(tmp_path, capsys, monkeypatch):
    pytest.importorskip("onnx")
    from test_cli_bad_input import _conv_model

    from autosched.network.task_scheduler import TaskScheduler
    from autosched.workers import TuningInterrupted

    def stopped(self, *args, **kwargs):
        raise KeyboardInterrupt("SIGTERM")  # what `kill PID` raises inside a tuning run

    monkeypatch.setattr(TaskScheduler, "_tune_rounds", stopped)
    model = _conv_model(tmp_path / "m.onnx")
    log = str(tmp_path / "m.json")
    with pytest.raises(TuningInterrupted) as exc:
        main(["tune", "--onnx", model, "--log", log, "--trials", "8", "--no-winograd"])
    msg = str(exc.value)
    assert "tuning stopped by SIGTERM" in msg
    assert "to resume, run tune again with the same --log (it resumes from it): " in msg
    assert f"python -m autosched tune --onnx {model}" in msg
    assert f"--log {log}" in msg and "TaskScheduler(" not in msg
