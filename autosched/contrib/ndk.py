"""``tvm.contrib.ndk``: ``create_shared`` links an exported library for the device.

``lib.export_library("deploy_lib.so", ndk.create_shared)`` links with the compiler in
``TVM_NDK_CC`` (an Android NDK's ``aarch64-linux-android*-clang++``, or a cross g++ such as
``/usr/bin/aarch64-linux-gnu-g++``), as TVM does. Where that compiler is not installed, zig's
C compiler (``pip install 'autosched[cross]'``, the ``ziglang`` package) links for the
library's target triple instead, so that a library for a board can be exported on any machine.
Without either, the error names both.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from runtime.errors import CompileError
from runtime.shared_library import ELF_MACHINES, elf_machine, run_linker, zig_cc, zig_link_options

_log = logging.getLogger(__name__)

__all__ = ["create_shared"]


def _triple_of_objects(objects) -> str:
    """An Android triple for the objects' architecture (their ELF header), for a call that does
    not say which triple (TVM's three-argument ``fcompile``)."""
    arch = ELF_MACHINES.get(elf_machine(Path(objects[0]).read_bytes()[:64]), "aarch64")
    return f"{arch}-linux-android"


def create_shared(output, objects, options=None, triple: str | None = None) -> None:
    """Link ``objects`` into the shared library ``output`` for the device.

    Parameters
    ----------
    output : str
        The library to write.
    objects : list of str
        Object files (what ``export_library`` emitted for the target's triple).
    options : list of str, optional
        Extra linker options.
    triple : str, optional
        The target triple (``export_library`` passes it); else read from the objects.

    Raises
    ------
    CompileError
        One line naming ``TVM_NDK_CC`` and the ``cross`` extra when neither can link, or the
        linker's own error.
    """
    if isinstance(objects, str):
        objects = [objects]
    options = list(options or [])
    cc = os.environ.get("TVM_NDK_CC")
    found = shutil.which(cc) if cc else None
    if found:
        run_linker([found], str(output), list(objects), ["-fPIC", *options])
        return
    zig = zig_cc()
    if zig is None:
        told = f"TVM_NDK_CC={cc!r} is not installed" if cc else "TVM_NDK_CC is not set"
        raise CompileError(
            f"ndk.create_shared: no linker for {output}: {told}; set TVM_NDK_CC to the NDK's "
            "compiler, or pip install 'autosched[cross]' (ziglang) to link with zig cc"
        )
    triple = triple or _triple_of_objects(objects)
    if cc:
        _log.info("TVM_NDK_CC=%s is not installed: linking %s with zig cc -target %s",
                  cc, output, triple)  # fmt: skip
    run_linker(zig + zig_link_options(triple), str(output), list(objects), options)


create_shared.output_format = "so"
