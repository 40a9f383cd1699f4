"""The library's version, as records and ``autosched.__version__`` report it."""

from __future__ import annotations

import re
from pathlib import Path

# The checkout's pyproject.toml, next to the package directory (absent in an installed wheel).
_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def _checkout_version(pyproject: Path) -> str | None:
    """``[project] version`` of ``pyproject`` when it is autosched's, else None."""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    # A line-based read of the [project] table: tomllib is not in Python 3.10.
    section = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if section is None or not re.search(r'^name\s*=\s*"autosched"', section.group(1), re.M):
        return None
    found = re.search(r'^version\s*=\s*"([^"]+)"', section.group(1), re.M)
    return found.group(1) if found else None


def package_version(pyproject: Path = _PYPROJECT) -> str:
    """The version of the autosched being run.

    Run from a checkout, that is the checkout's ``pyproject.toml`` (an installed copy of another
    version may sit in site-packages, but it is not the code running); otherwise the installed
    distribution's metadata. ``"0+unknown"`` only when neither exists.
    """
    found = _checkout_version(pyproject)
    if found:
        return found
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("autosched")
    except PackageNotFoundError:
        return "0+unknown"
