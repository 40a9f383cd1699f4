"""CPU kernels as a real shared library: ``export_library("net.so")`` and loading it back.

The library is linked by the system compiler (``cc -shared``) or a given
``fcompile(output, objects, options)`` (an NDK's ``create_shared``, a cross compiler) from
object files that LLVM emits for this host or for another target triple
(``llvm -mtriple=aarch64-linux-gnu``):

- one object per CPU kernel, position-independent, its entry functions renamed
  ``autosched_k<index>_<name>`` (so several kernels link into one library) and every other
  symbol made internal;
- one object holding the description of the library, ``autosched_library_meta`` (JSON: the
  kernels' params, workspaces, launches and code, the target triple, and for a network its
  plan; an OpenCL kernel is this code only, its source, which the device's driver compiles
  when the library is loaded, as TVM embeds it), and, when a kernel runs parallel loops, the
  parallel launcher
  (``autosched_parallel_for`` over OpenMP's ``GOMP_parallel`` with static ranges, linked with
  ``-lgomp``, so that the library runs without this package; runtime/cpu.py ``_LAUNCHER_IR``).

A network's weights go next to it in ``<path>.params.npz`` (numpy arrays, read with
``allow_pickle=False``), with their sha256 in the metadata. Loading reads the ELF header
first, so a library for another architecture is a one-line error instead of a loader message,
and checks the file's structure and the size + sha256 trailer export appends
(:mod:`runtime.library_file`), so a truncated file is a one-line error instead of SIGBUS;
a library without CPU kernels (an OpenCL network) has no machine code to run, so its
description is read from the file (:func:`read_meta`) on any architecture. Linking for another
triple needs a linker for it (:func:`cross_linker`): ``TVM_NDK_CC``, ``<triple>-gcc`` on PATH,
or zig's (``pip install autosched[cross]``). A shared library is code: load only files you
trust (the checksums detect accidents, not attackers).
"""

from __future__ import annotations

import ctypes
import importlib.util
import inspect
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .device import HOST_LANGS
from .errors import CompileError
from .library_file import check_library_file, seal
from .plan_file import (
    BFLOAT16_KEY,
    checksum,
    decode_bfloat16,
    encode_bfloat16,
    npz_path,
    read_arrays,
)

FORMAT = "autosched-shared-library"
FORMAT_VERSION = 1
META_SYMBOL = "autosched_library_meta"
SYMBOL_PREFIX = "autosched_k"
SHARED_SUFFIXES = (".so", ".dylib", ".dll")

# ELF e_machine values of the architectures LLVM can target here, and the names
# platform.machine() gives for them.
ELF_MACHINES = {3: "i386", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv64"}
#: Kernel languages a library may hold: CPU code is linked in, OpenCL source is data.
LIBRARY_LANGS = ("llvm", "opencl")
_ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64", "i686": "i386", "x86": "i386"}


def is_shared_library_path(path) -> bool:
    """Whether ``path`` names a shared library (by its suffix) rather than the JSON form."""
    return Path(path).suffix.lower() in SHARED_SUFFIXES


def is_elf(path) -> bool:
    """Whether the file at ``path`` starts with the ELF magic number."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def elf_machine(data: bytes) -> int:
    """The ``e_machine`` field of an ELF header (object file or shared library)."""
    if data[:4] != b"\x7fELF" or len(data) < 20:
        raise ValueError("not an ELF file")
    order = "little" if data[5] == 1 else "big"
    return int.from_bytes(data[18:20], order)


def host_arch() -> str:
    machine = platform.machine().lower()
    return _ARCH_ALIASES.get(machine, machine)


def _arch_of_triple(triple: str) -> str:
    arch = triple.split("-", 1)[0].lower()
    return _ARCH_ALIASES.get(arch, "arm" if arch.startswith(("armv", "thumb")) else arch)


def check_loadable(path) -> None:
    """Refuse (ValueError, one line) a file that is not a shared library for this machine."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as e:
        raise ValueError(f"{path}: cannot read the library ({e.strerror})") from e
    try:
        machine = elf_machine(head)
    except ValueError:
        raise ValueError(f"{path}: not a shared library (no ELF header)") from None
    arch = ELF_MACHINES.get(machine, f"ELF machine {machine}")
    if arch != host_arch():
        raise ValueError(
            f"{path}: a shared library for {arch} cannot load on this {host_arch()} machine; "
            f"load it on a {arch} device (e.g. remote.upload + remote.load_module over RPC) or "
            "export it again for this machine's target"
        )
    # dlopen maps segments past the end of a truncated file and the process dies of SIGBUS.
    check_library_file(path)


# ----------------------------------------------------------------------------- export


def _c_string_constant(name: str, data: bytes) -> str:
    """LLVM IR for a constant byte array ``@name`` holding ``data``, and ``@name_size``."""
    text = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in data)
    n = len(data)
    return (
        f'@{name} = constant [{n} x i8] c"{text}", align 1\n'
        f"@{name}_size = constant i64 {n}, align 8\n"
    )


def kernel_symbol(index: int, name: str) -> str:
    """The exported symbol of launch ``name`` of kernel ``index`` in a library."""
    return f"{SYMBOL_PREFIX}{index}_{name}"


def _kernel_object(index: int, artifact: dict, triple: str | None, cpu=None, features="") -> bytes:
    """Kernel ``index``'s object code, its entry points renamed and the rest made internal."""
    from .cpu import _parse, emit_object

    mod = _parse(artifact["code"])
    entries = {la[0] for la in artifact["launches"]}
    missing = entries - {f.name for f in mod.functions if not f.is_declaration}
    if missing:
        raise CompileError(f"kernel {index}: launches {sorted(missing)} are not defined")
    for fn in mod.functions:
        if fn.is_declaration:
            continue
        if fn.name in entries:
            fn.name = kernel_symbol(index, fn.name)
        else:
            fn.linkage = "internal"
    for gv in mod.global_variables:
        if not gv.is_declaration:
            gv.linkage = "internal"
    return emit_object(mod, triple, True, cpu, features)


def _uses_parallel_launcher(artifacts) -> bool:
    from .cpu import PARALLEL_FOR_SYMBOL, PARALLEL_LAUNCH_SYMBOL

    symbols = (PARALLEL_FOR_SYMBOL, PARALLEL_LAUNCH_SYMBOL)
    return any(sym in a["code"] for a in artifacts for sym in symbols)


def zig_cc() -> list[str] | None:
    """The command of zig's C compiler (``python -m ziglang cc``) when the ``ziglang`` package
    is installed (the ``cross`` extra), else None: a linker for any triple, from pip."""
    if importlib.util.find_spec("ziglang") is None:
        return None
    return [sys.executable, "-m", "ziglang", "cc"]


def zig_link_options(triple: str) -> list[str]:
    """zig cc's options to link a shared library for ``triple``. zig has no Android libc:
    such a library links without one (the device's is there when it is loaded)."""
    # zig's triples have no vendor field: x86_64-unknown-linux-gnu is x86_64-linux-gnu.
    parts = [p for p in triple.lower().split("-") if p not in ("unknown", "pc", "none")]
    options = ["-target", "-".join(parts)]
    return options + (["-nostdlib"] if "android" in triple.lower() else [])


def cross_linker(triple: str) -> list[str]:
    """The command that links shared libraries for ``triple`` on this machine: the system
    compiler for this host's triple; otherwise the compiler in ``TVM_NDK_CC`` when it is
    installed, ``<triple>-gcc`` on PATH, else zig's C compiler for ``triple`` (the ``cross``
    extra). A one-line CompileError names them all."""
    from .cpu import _llvm, same_triple

    if same_triple(triple, _llvm().get_default_triple()):
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if cc is None:
            raise CompileError("export_library: no C compiler (cc) to link the shared library")
        return [cc]
    ndk = os.environ.get("TVM_NDK_CC")
    cc = (shutil.which(ndk) if ndk else None) or shutil.which(f"{triple}-gcc")
    if cc is not None:
        return [cc]
    zig = zig_cc()
    if zig is not None:
        return zig + zig_link_options(triple)
    raise CompileError(
        f"export_library: no linker for {triple}: set TVM_NDK_CC to an NDK's (or a cross) "
        f"compiler, put {triple}-gcc on PATH, or pip install 'autosched[cross]' (ziglang)"
    )


def default_fcompile(output: str, objects: list[str], options: list[str], triple: str):
    """Link ``objects`` into the shared library ``output`` with :func:`cross_linker`."""
    run_linker(cross_linker(triple), output, objects, options)


def run_linker(command: list[str], output: str, objects: list[str], options: list[str]) -> None:
    """``command -shared -o output objects options``; a CompileError with its output."""
    cmd = [*command, "-shared", "-o", output, *objects, *options]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise CompileError(f"linking {output} failed: {' '.join(cmd)}", done.stderr.strip())


def _call_fcompile(fcompile, output: str, objects: list[str], options: list[str], triple: str):
    """TVM's ``fcompile(output, objects, options)``; one that takes a ``triple`` keyword (as
    ``autosched.contrib.ndk.create_shared`` does) is told the target triple as well."""
    try:
        takes_triple = "triple" in inspect.signature(fcompile).parameters
    except (TypeError, ValueError):  # a builtin or C callable: TVM's three arguments
        takes_triple = False
    if takes_triple:
        fcompile(output, objects, options, triple=triple)
    else:
        fcompile(output, objects, options)


def export_shared_library(
    path, artifacts, meta: dict, constants=None, triple: str | None = None, fcompile=None,
    cpu: str | None = None, features: str = "",
) -> None:  # fmt: skip
    """Write ``artifacts`` (kernel artifacts, ``Source.as_dict()`` values: CPU code is
    compiled and linked in, OpenCL source kept as data) as the shared library ``path``,
    ``meta`` (JSON values) inside it and ``constants`` (id -> array) next to it in
    ``<path>.params.npz``.

    Parameters
    ----------
    triple : str, optional
        The target triple to compile for (default: this host).
    fcompile : callable, optional
        ``fcompile(output, objects, options)`` links the object files into ``output``
        (default: ``cc -shared``, or :func:`cross_linker` when cross-compiling); one with a
        ``triple`` keyword gets the target triple too.
    cpu, features : str, optional
        LLVM's ``-mcpu`` / ``-mattr`` for another triple (default: a generic CPU of it).
    """
    from .cpu import _LAUNCHER_IR, _llvm, _parse, emit_object

    path = Path(path)
    artifacts = [dict(a) for a in artifacts]
    bad = [a.get("lang") for a in artifacts if a.get("lang") not in LIBRARY_LANGS]
    if bad:
        raise ValueError(
            f"export_library({str(path)!r}): {bad[0]} kernels have no shared-library form (CPU "
            "and OpenCL ones do); export this network to a .json path instead"
        )
    triple = triple or _llvm().get_default_triple()
    arrays = {str(int(k)): np.ascontiguousarray(v) for k, v in (constants or {}).items()}
    arrays, bf16 = encode_bfloat16(arrays)
    meta = {**meta, BFLOAT16_KEY: bf16} if bf16 else meta
    kernels = [{k: v for k, v in a.items() if k != "binary"} for a in artifacts]
    for i, kernel in enumerate(kernels):
        kernel["symbols"] = {la[0]: kernel_symbol(i, la[0]) for la in kernel["launches"]}
    full = {
        **meta,
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "triple": triple,
        "kernels": kernels,
        "params_sha256": checksum({}, arrays) if arrays else None,
    }
    blob = json.dumps(json.loads(json.dumps(full))).encode()
    parallel = _uses_parallel_launcher(artifacts)
    meta_ir = _c_string_constant(META_SYMBOL, blob) + (_LAUNCHER_IR if parallel else "")
    options = ["-lgomp"] if parallel else []
    with tempfile.TemporaryDirectory(prefix="autosched-export-") as tmp:
        objects = []
        for i, artifact in enumerate(artifacts):
            if artifact["lang"] not in HOST_LANGS:
                continue  # OpenCL source: data in the metadata, compiled where it runs
            obj = Path(tmp) / f"kernel{i}.o"
            obj.write_bytes(_kernel_object(i, artifact, triple, cpu, features))
            objects.append(str(obj))
        obj = Path(tmp) / "library_meta.o"
        obj.write_bytes(emit_object(_parse(meta_ir), triple, True, cpu, features))
        objects.append(str(obj))
        if fcompile is None:
            default_fcompile(str(path), objects, options, triple)
        else:
            _call_fcompile(fcompile, str(path), objects, options, triple)
    if not path.exists():
        raise CompileError(f"export_library: the linker did not write {path}")
    seal(path)
    if arrays:
        np.savez(npz_path(path), **arrays)


# ----------------------------------------------------------------------------- loading


def _elf_symbol_bytes(data: bytes, name: str) -> bytes:
    """The bytes of the defined data symbol ``name`` of an ELF file (its symbol tables, then
    the section that holds it), read without loading the file: any architecture."""
    if data[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    if wide:
        shoff, shentsize, shnum = struct.unpack_from(order + "Q10xHH", data, 0x28)
        shdr, sym, symsize = order + "IIQQQQIIQQ", order + "IBBHQQ", 24
    else:
        shoff, shentsize, shnum = struct.unpack_from(order + "I10xHH", data, 0x20)
        shdr, sym, symsize = order + "IIIIIIIIII", order + "IIIBBH", 16
    sections = [struct.unpack_from(shdr, data, shoff + i * shentsize) for i in range(shnum)]
    wanted = name.encode()
    for _, sh_type, _, _, off, size, link, _, _, _ in sections:
        if sh_type not in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
            continue
        str_off = sections[link][4]
        for at in range(off, off + size, symsize):
            fields = struct.unpack_from(sym, data, at)
            if wide:
                st_name, _, _, shndx, value, length = fields
            else:
                st_name, value, length, _, _, shndx = fields
            end = data.index(b"\0", str_off + st_name)
            if data[str_off + st_name : end] != wanted or not 0 < shndx < len(sections):
                continue
            sec_addr, sec_off = sections[shndx][3], sections[shndx][4]
            start = sec_off + value - sec_addr
            return data[start : start + length]
    raise ValueError(f"no symbol {name}")


def read_meta(path) -> dict:
    """The description :func:`export_shared_library` stored in the library at ``path``, read
    from the file (no loading, so for any architecture); ValueError naming the file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"{path}: cannot read the library ({e.strerror})") from e
    try:
        meta = json.loads(_elf_symbol_bytes(data, META_SYMBOL))
    except (ValueError, struct.error, IndexError) as e:
        raise ValueError(f"{path}: not a library written by export_library ({e})") from e
    _check_format(path, meta)
    return meta


def _check_format(path: Path, meta: dict) -> None:
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: library format {meta.get('format')!r} version "
            f"{meta.get('format_version')} but this autosched reads {FORMAT!r} version "
            f"{FORMAT_VERSION}; export it again"
        )


def read_constants(path, recorded: str | None, bfloat16_names=None) -> dict:
    """The weights next to the library ``path`` (``<path>.params.npz``, numbers only, read
    with ``allow_pickle=False``) by storage id, checked against their ``recorded`` sha256;
    ValueError naming the file. None recorded: the library has no weights.
    ``bfloat16_names``: the arrays stored as bfloat16 bits (the description's list)."""
    path = Path(path)
    if recorded is None:
        return {}
    arrays_path = npz_path(path)
    arrays = read_arrays(path, "weights")
    if checksum({}, arrays) != recorded:
        raise ValueError(
            f"{path}: {arrays_path.name} was changed after export_library wrote it; "
            "export the network again"
        )
    arrays = decode_bfloat16(path, arrays, bfloat16_names)
    try:
        return {int(k): v for k, v in arrays.items()}
    except ValueError:
        bad = f"{arrays_path.name} has arrays not named by a storage id"
        raise ValueError(f"{path}: {bad}") from None


def has_machine_code(meta: dict) -> bool:
    """Whether a library holds CPU kernels (which only load on its architecture)."""
    return any(k.get("lang", "llvm") in HOST_LANGS for k in meta.get("kernels", ()))


class SharedLibrary:
    """A loaded library: its metadata, constants and kernel entry points (ctypes).

    Attributes
    ----------
    meta : dict
        What :func:`export_shared_library` stored (``kernels``, ``triple``, the caller's keys).
    constants : dict of int to ndarray
    """

    def __init__(self, path):
        path = Path(path)
        try:
            meta = read_meta(path)
        except ValueError:
            check_loadable(path)  # not ELF / another architecture: say that, in one line
            raise
        self.handle = None
        if has_machine_code(meta):
            check_loadable(path)
            try:
                self.handle = ctypes.CDLL(str(path.resolve()))
            except OSError as e:
                raise ValueError(f"{path}: the system loader refused the library: {e}") from e
        # else: OpenCL source only, nothing to link; the file's description is the library
        self.path = path
        self.meta = meta
        self.constants = read_constants(path, meta.get("params_sha256"), meta.get(BFLOAT16_KEY))
        if self.handle is not None:
            self._set_threads()

    def _set_threads(self) -> None:
        """The library's own parallel launcher runs as many tasks as the JIT's does."""
        try:
            nthreads = ctypes.c_int32.in_dll(self.handle, "autosched_num_threads")
        except ValueError:
            return  # no parallel loops in this library
        from .cpu import get_num_threads

        nthreads.value = get_num_threads()

    def compiled(self, index: int):
        """Kernel ``index``'s entry points as a :class:`runtime.cpu.CompiledCPU`."""
        from .cpu import CompiledCPU

        kernel = self.meta["kernels"][index]
        functions = {}
        for name, args, _, _ in kernel["launches"]:
            symbol = kernel["symbols"][name]
            proto = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.c_void_p] * len(args)))
            functions[name] = proto((symbol, self.handle))
        return CompiledCPU(self.handle, None, functions)

    def artifact(self, index: int) -> dict:
        """Kernel ``index`` as ``runtime.load_module`` keyword values (without ``symbols``)."""
        kernel = dict(self.meta["kernels"][index])
        kernel.pop("symbols", None)
        return kernel


class CrossCompiledModule:
    """A CPU kernel compiled for another machine (``llvm -mtriple=...``): what ``build``
    returns for a cross target. It cannot run here; :meth:`export_library` writes it as a
    shared library for that machine (load it there, e.g. over RPC).
    """

    def __init__(self, artifact: dict, triple: str, shapes=None, outputs=(), cpu=None, features=""):
        self.artifact_dict = dict(artifact)
        self.triple = triple
        self.cpu, self.features = cpu, features
        self.shapes = {str(k): [int(d) for d in v] for k, v in dict(shapes or {}).items()}
        self.outputs = sorted(str(n) for n in outputs)

    def artifact(self) -> dict:
        return {k: v for k, v in self.artifact_dict.items() if k != "binary"}

    def object_code(self) -> bytes:
        """The kernel as a relocatable object file for :attr:`triple`."""
        from .cpu import compile_object

        return compile_object(
            self.artifact_dict["code"], self.triple, True, self.cpu, self.features
        )

    def export_library(self, path, fcompile=None) -> None:
        """Write the kernel as a shared library for :attr:`triple` (see
        :meth:`runtime.module.Module.export_library`)."""
        meta = {"kind": "kernel", "shapes": self.shapes, "outputs": self.outputs}
        export_shared_library(path, [self.artifact()], meta, triple=self.triple,
                              fcompile=fcompile, cpu=self.cpu, features=self.features)  # fmt: skip

    def get_source(self) -> str:
        return self.artifact_dict["code"]

    def _refuse(self, *args, **kwargs):
        raise RuntimeError(
            f"this kernel is compiled for {self.triple}, not for this machine; "
            "export_library it and load it on that machine (e.g. over RPC)"
        )

    __call__ = _refuse
    time_evaluator = _refuse

    def __repr__(self) -> str:
        return f"CrossCompiledModule(triple={self.triple!r})"
