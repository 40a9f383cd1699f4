"""``--precision`` on the network commands: the 16-bit network runs, checks against its numpy
reference, prints the accuracy report against float32, and is another graph than float32."""

import re
import shlex

import pytest

from autosched.cli import main

pytest.importorskip("onnx")
from tests.autosched.test_cli_bad_input import _conv_model, _fails  # noqa: E402


def test_run_float16_prints_the_accuracy_report(tmp_path, capsys):
    model = _conv_model(tmp_path / "m.onnx")
    argv = ["run", "--onnx", model, "--precision", "float16", "--accuracy-inputs", "4",
            "--repeat", "1", "--min-repeat-ms", "0"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "(OK)" in out
    found = re.search(
        r"Accuracy: float16 vs float32 on 4 random inputs: top-1 agreement ([\d.]+)%, "
        r"max relative error ([\d.e+-]+)",
        out,
    )
    assert found, out
    assert float(found.group(1)) >= 75.0 and 0 < float(found.group(2)) < 1e-2


def test_compiled_bfloat16_network_is_another_graph_than_float32(tmp_path, capsys):
    model = _conv_model(tmp_path / "m.onnx")
    lib = str(tmp_path / "m.lib")
    assert main(["compile", "--onnx", model, "--precision", "bfloat16", "-o", lib]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"--target llvm --precision bfloat16 --lib {shlex.quote(lib)}" in last
    argv = ["run", "--onnx", model, "--precision", "bfloat16", "--lib", lib, "--repeat", "1",
            "--accuracy-inputs", "0"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "(OK)" in out and "Accuracy:" not in out
    err = _fails(["run", "--onnx", model, "--lib", lib], capsys, f"--lib {lib} was compiled from")
    assert f"ONNX {model} bfloat16 (graph" in err


def test_bad_precision_values(tmp_path, capsys):
    model = _conv_model(tmp_path / "m.onnx")
    with pytest.raises(SystemExit) as exc:
        main(["run", "--onnx", model, "--precision", "int8"])
    assert exc.value.code == 2
    assert "invalid choice: 'int8'" in capsys.readouterr().err
    _fails(["run", "--onnx", model, "--accuracy-inputs", "-1"], capsys, "--accuracy-inputs must")
