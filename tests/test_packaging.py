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
