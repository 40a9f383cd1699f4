"""The helpers seed tutorials import from ``tvm.auto_scheduler.utils`` / ``tvm.contrib.utils``.

``request_remote(device_key, host, port)`` opens a session on a server of the device key
(:func:`autosched.autotvm.measure.request_remote`, over :mod:`autosched.rpc`), and
``tempdir()`` a temporary directory whose ``relpath(name)`` names files in it (TVM's
``utils.tempdir()``)::

    from autosched.utils import request_remote, tempdir

    remote = request_remote("rk3399", "127.0.0.1", 9190)
    temp = tempdir()
    lib.export_library(temp.relpath("deploy_lib.so"), ndk.create_shared)
"""

from __future__ import annotations

import os
import shutil
import tempfile

from .autotvm.measure import request_remote

__all__ = ["TempDirectory", "request_remote", "tempdir"]


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
        self.remove()

    def __repr__(self) -> str:
        return f"TempDirectory({self.temp_dir!r})"


def tempdir(custom_path: str | None = None, keep_for_debug: bool = False) -> TempDirectory:
    """A new :class:`TempDirectory` (TVM's ``tvm.contrib.utils.tempdir``)."""
    return TempDirectory(custom_path, keep_for_debug)
