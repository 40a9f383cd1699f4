"""``tvm.contrib.utils``: ``tempdir()``, a temporary directory whose ``relpath(name)`` names
files in it (also importable from :mod:`autosched.utils`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

__all__ = ["TempDirectory", "tempdir"]


class TempDirectory:
    """A directory removed when the object is garbage-collected, or on :meth:`remove` / the
    end of a ``with`` block (TVM's ``tvm.contrib.utils.TempDirectory``).

    Parameters
    ----------
    custom_path : str, optional
        Use (and create) this directory instead of a fresh one; it is then kept.
    keep_for_debug : bool
        Keep the directory after use.
    """

    def __init__(self, custom_path: str | None = None, keep_for_debug: bool = False):
        if custom_path:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = os.path.abspath(custom_path)
        else:
            self.temp_dir = tempfile.mkdtemp(prefix="autosched-")
        self._keep = bool(custom_path) or keep_for_debug

    def relpath(self, name: str) -> str:
        """The path of ``name`` in this directory."""
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        """The names of the files in the directory."""
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        """Delete the directory (unless it is kept)."""
        if not self._keep and self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()

    def __del__(self):
        with contextlib.suppress(Exception):  # at interpreter exit shutil may be gone already
            self.remove()

    def __repr__(self) -> str:
        return f"TempDirectory({self.temp_dir!r})"


def tempdir(custom_path: str | None = None, keep_for_debug: bool = False) -> TempDirectory:
    """A new :class:`TempDirectory` (TVM's ``tvm.contrib.utils.tempdir``)."""
    return TempDirectory(custom_path, keep_for_debug)
