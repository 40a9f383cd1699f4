"""``rpc.LocalSession()``: the session API on this machine, with no tracker or server.

Seed 004 evaluates on the simulator through it (``remote = rpc.LocalSession()``), then writes
the same lines as for a board::

    remote.upload(temp.relpath("graphlib.tar"))
    lib = remote.load_module("graphlib.tar")
    ctx = remote.ext_dev(0)
    m = graph_executor.GraphModule(lib["default"](ctx))

``upload`` copies the file into the session's own directory and ``load_module`` loads it from
there in this process: a VTA library (``.tar``, :func:`autosched.vta.load_library`) or a
network / kernel (:func:`autosched.load_module`). Nothing travels over a network and nothing
is isolated: a crash in a kernel is a crash of this process (the servers of
``python -m autosched.exec.rpc_server`` are for that).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

#: Loaders of library formats other than autosched.load_module's, by a name; an accelerator's
#: package registers its own on import (``autosched.vta`` registers ``"vta"``: its tar files),
#: as it may import this module but not the reverse.
LIBRARY_LOADERS: dict = {}


@dataclass(frozen=True)
class ExtDevice:
    """``remote.ext_dev(0)``: an external accelerator (here the simulated VTA) of a session."""

    index: int = 0
    kind: str = "ext_dev"

    def __repr__(self) -> str:
        return f"ext_dev({self.index})"


class LocalSession:
    """A session on this machine with :class:`~autosched.rpc.RemoteSession`'s methods."""

    def __init__(self):
        from ..contrib.utils import tempdir

        self._dir = tempdir()

    # ------------------------------------------------------------------ devices
    def device(self, kind: str, index: int = 0):
        """This machine's device ``kind`` (``"cpu"``, ``"opencl"`` / ``"cl"``, ``"cuda"``) or
        the external accelerator (``"ext_dev"``)."""
        from codegen.target import EXT_KINDS
        from runtime import device

        if kind in EXT_KINDS:
            return ExtDevice(int(index))

        return device(kind, index)  # runtime.device's table knows the aliases

    def cpu(self, index: int = 0):
        return self.device("cpu", index)

    def cl(self, index: int = 0):
        return self.device("opencl", index)

    opencl = cl

    def cuda(self, index: int = 0):
        return self.device("cuda", index)

    def ext_dev(self, index: int = 0) -> ExtDevice:
        return self.device("ext_dev", index)

    # ------------------------------------------------------------------ files
    def _path(self, name: str) -> Path:
        name = str(name)
        if Path(name).name != name or name in ("", ".", ".."):
            raise ValueError(f"LocalSession: file name {name!r} must be a plain name")
        return Path(self._dir.relpath(name))

    def upload(self, path, target: str | None = None) -> str:
        """Copy the file at ``path`` (and its ``.params.npz`` weights, if any) into the
        session's directory under ``target`` (default: its name); returns that name."""
        path = Path(path)
        name = target or path.name
        shutil.copyfile(path, self._path(name))
        params = path.with_name(path.name + ".params.npz")
        if params.exists():
            shutil.copyfile(params, self._path(name + ".params.npz"))
        return name

    def load_module(self, name: str, dev=None):
        """Load the file uploaded as ``name``: a VTA library (a tar) or what
        :func:`autosched.load_module` reads (on ``dev``, default the kernels' device)."""
        import tarfile

        path = self._path(name)
        if not path.exists():
            raise FileNotFoundError(
                f"LocalSession: {name!r} was not uploaded (remote.upload(path) first)"
            )
        if tarfile.is_tarfile(path):
            if "vta" not in LIBRARY_LOADERS:
                raise ValueError(f"{name}: a VTA library; import autosched.vta to load it")
            return LIBRARY_LOADERS["vta"](path)
        from ..network.build import load_module

        return load_module(path, dev)

    def __repr__(self) -> str:
        return f"LocalSession({self._dir.temp_dir!r})"
