"""What `pip install` gives: the `autosched` command runs the CLI, and no extra lists a
package that nothing imports."""

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PYPROJECT = (ROOT / "pyproject.toml").read_text()


def test_the_autosched_command_is_the_cli(capsys):
    match = re.search(r'^autosched = "([\w.]+):(\w+)"$', PYPROJECT, re.M)
    assert match, "[project.scripts] autosched = ... is missing"
    main = getattr(importlib.import_module(match.group(1)), match.group(2))
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    assert "tune" in capsys.readouterr().out


def test_scikit_learn_is_only_a_benchmark_extra():
    """The library never imports scikit-learn (LightGBM is the cost model): only the
    benchmark that scores rankings with sklearn's NDCG lists it."""
    users = [
        p.relative_to(ROOT).as_posix()
        for folder in ("tensorir", "codegen", "runtime", "autosched")
        for p in (ROOT / folder).rglob("*.py")
        if re.search(r"^\s*(from|import) sklearn", p.read_text(), re.M)
    ]
    assert users == []
    extras = re.search(r"\[project.optional-dependencies\](.*?)\n\[", PYPROJECT, re.S).group(1)
    listed = [line.split("=")[0].strip() for line in extras.splitlines() if "scikit" in line]
    assert listed == ["bench"]


def test_import_autosched_loads_template_tuning_rpc_vta_and_quantize_on_first_use():
    """Issue 31: a notebook's ``import autosched`` loads neither AutoTVM's tuners nor the RPC
    client (dask) nor VTA nor int8 quantization; each loads when first named."""
    import subprocess
    import sys

    code = (
        "import sys, autosched as a\n"
        "lazy = ('autosched.autotvm', 'autosched.rpc', 'autosched.vta', 'autosched.quantize',"
        " 'autosched.relay', 'distributed')\n"
        "print(sorted(m for m in lazy if m in sys.modules))\n"
        "a.autotvm.tuner.XGBTuner, a.RPCRunner, a.records.to_dataframe, a.quantize.quantize\n"
        "a.vta.get_env, a.relay.build, a.utils.tempdir, a.contrib.ndk\n"
        "print(sorted(m for m in lazy[:5] if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1] == str(sorted(
        ["autosched.autotvm", "autosched.rpc", "autosched.vta", "autosched.quantize",
         "autosched.relay"]
    ))  # fmt: skip
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        _ = importlib.import_module("autosched").nosuch


def test_autosched_testing_is_the_old_name_of_workloads():
    """Issue 31: the seed workloads live in ``autosched.workloads``; ``autosched.testing`` (what
    the README of 0.1 imported) is the same module object, not a second home."""
    import autosched
    from autosched import testing, workloads
    from autosched.testing import matmul

    assert testing is workloads and matmul is workloads.matmul
    assert autosched.testing is autosched.workloads is workloads
    assert len(workloads.matmul(8, 8, 8)) == 3  # A, B and C
