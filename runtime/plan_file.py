"""The files of a saved :class:`~runtime.graph_executor.GraphPlan` (what ``export_library``
writes): ``path`` holds JSON (kernels' code, buffers, calls, inputs, outputs) and
``path.params.npz`` the arrays (constants by storage id, ``binary_<k>``: kernel ``k``'s object
code), read with ``allow_pickle=False``.

A saved network is code, like a shared library: load only files you trust. The checks here
make sure a file does not lie or break silently, not that it is harmless:

- ``checksum`` (sha256 over the JSON, canonically printed, and every array) must match, so a
  file damaged after it was written is refused, naming it. It is unkeyed and stored in the
  file: it detects accidents, not attackers, who can edit IR or object code and recompute it;
- a kernel's object code is used only if it was compiled from the code the file shows
  (``code_sha256``) - otherwise the file is refused - and for this host (``host``:
  :func:`runtime.cpu.host_signature`); object code for another host is ignored and the kernel
  compiled from its code.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np

from .device import HOST_LANGS

FORMAT_VERSION = 2

log = logging.getLogger(f"autosched.{__name__}")


def npz_path(path: Path) -> Path:
    """Where the arrays of the plan saved at ``path`` live."""
    return path.with_name(path.name + ".params.npz")


def read_arrays(path: Path, what: str) -> dict:
    """The arrays of ``path``'s ``<path>.params.npz`` (numbers only: ``allow_pickle=False``);
    a missing or damaged file, or one holding objects, is a ValueError naming it and ``what``
    the arrays are."""
    arrays_path = npz_path(path)
    try:
        with np.load(arrays_path, allow_pickle=False) as z:
            return {name: z[name] for name in z.files}
    except Exception as e:  # missing, damaged, or holding objects (pickle): all refused
        raise ValueError(
            f"{path}: cannot read its {what} {arrays_path.name} ({type(e).__name__}: {e})"
        ) from e


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _canonical(meta: dict) -> bytes:
    body = {k: v for k, v in meta.items() if k != "checksum"}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def checksum(meta: dict, arrays: dict) -> str:
    """sha256 over ``meta`` (without its ``checksum``) and every array: name, dtype, shape
    and bytes, in name order."""
    h = hashlib.sha256(_canonical(meta))
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"\n{name} {a.dtype.str} {list(a.shape)} {a.nbytes}\n".encode())
        h.update(a.tobytes())
    return h.hexdigest()


BFLOAT16_KEY = "bfloat16_arrays"
"""The metadata entry naming the arrays stored as bfloat16 bits (absent when there are none)."""


def encode_bfloat16(arrays: dict) -> tuple[dict, list[str]]:
    """bfloat16 arrays (ml_dtypes', which ``.npz`` files cannot keep: they load back as raw
    bytes) as their uint16 bits, and the names of those arrays, for :func:`decode_bfloat16`."""
    names = sorted(k for k, a in arrays.items() if a.dtype.name == "bfloat16")
    return {k: (a.view(np.uint16) if k in names else a) for k, a in arrays.items()}, names


def decode_bfloat16(path, arrays: dict, names) -> dict:
    """Undo :func:`encode_bfloat16` (after the checksum, which covers the stored bits)."""
    if names is None:
        return arrays
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{path}: invalid metadata: {BFLOAT16_KEY} is not a list of names")
    from .ndarray import np_dtype

    out = dict(arrays)
    for n in names:
        if n in out and out[n].dtype == np.uint16:
            out[n] = out[n].view(np_dtype("bfloat16"))
        else:
            raise ValueError(f"{path}: bfloat16 array {n!r} is missing or not 16-bit")
    return out


def _host(lang: str) -> str | None:
    """The signature object code of ``lang`` depends on; None where it is not kept."""
    if lang not in HOST_LANGS:
        return None  # cubins are tied to a GPU arch; kernels of other languages load from code
    from .cpu import host_signature

    return host_signature()


def write_plan(path, meta: dict, constants: dict) -> None:
    """Write ``meta`` (its ``kernels`` may carry ``binary`` bytes) and the constants."""
    path = Path(path)
    arrays = {str(int(sid)): np.ascontiguousarray(v) for sid, v in constants.items()}
    kernels = []
    for k, kernel in enumerate(meta["kernels"]):
        kernel = dict(kernel)
        binary = kernel.pop("binary", None)
        host = _host(kernel["lang"]) if binary is not None else None
        if host is not None:
            member = f"binary_{k}"
            arrays[member] = np.frombuffer(bytes(binary), dtype=np.uint8)
            kernel["binary"] = {
                "member": member,
                "code_sha256": sha256_text(kernel["code"]),
                "host": host,
            }
        kernels.append(kernel)
    arrays, bf16 = encode_bfloat16(arrays)
    meta = {**meta, BFLOAT16_KEY: bf16} if bf16 else meta
    meta = json.loads(json.dumps({**meta, "format_version": FORMAT_VERSION, "kernels": kernels}))
    meta["checksum"] = {"sha256": checksum(meta, arrays)}
    path.write_text(json.dumps(meta))
    np.savez(npz_path(path), **arrays)


def read_plan(path) -> tuple[dict, dict]:
    """``(meta, constants)`` of the plan saved at ``path``, checked against its checksum;
    kernels keep ``binary`` bytes only where they may be used.

    Raises
    ------
    ValueError
        Naming the file, when it is not a saved plan of this version, its checksum does not
        match, or a kernel's object code was compiled from other code than the file holds.
    """
    path = Path(path)
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a compiled network saved by export_library ({e})") from e
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        version = meta.get("format_version") if isinstance(meta, dict) else None
        raise ValueError(
            f"{path}: format version {version} but this autosched reads version "
            f"{FORMAT_VERSION}; compile the network again and export it"
        )
    arrays_path = npz_path(path)
    arrays = read_arrays(path, "arrays")
    recorded = meta.get("checksum")
    recorded = recorded.get("sha256") if isinstance(recorded, dict) else None
    if recorded != checksum(meta, arrays):
        raise ValueError(
            f"{path}: checksum mismatch: the file or {arrays_path.name} was changed after "
            "export_library wrote it; export the network again (and load only files you trust)"
        )
    arrays = decode_bfloat16(path, arrays, meta.get(BFLOAT16_KEY))
    return meta, _split_arrays(path, meta, arrays)


def _split_arrays(path: Path, meta: dict, arrays: dict) -> dict:
    """Constants by storage id; object code attached to (or dropped from) ``meta``'s kernels."""
    kernels = meta.get("kernels")
    if not isinstance(kernels, list) or not all(isinstance(k, dict) for k in kernels):
        raise ValueError(f"{path}: invalid plan: 'kernels' is not a list of kernel artifacts")
    used = set()
    for k, kernel in enumerate(kernels):
        info = kernel.pop("binary", None)
        if info is None:
            continue
        member = info.get("member") if isinstance(info, dict) else None
        blob = arrays.get(member) if isinstance(member, str) else None
        if blob is None or blob.dtype != np.uint8 or blob.ndim != 1:
            raise ValueError(f"{path}: kernel {k}: its object code {member!r} is missing")
        used.add(member)
        if info.get("code_sha256") != sha256_text(str(kernel.get("code"))):
            raise ValueError(
                f"{path}: kernel {k}: its object code was not compiled from the code the file "
                "holds; refusing it (export the network again)"
            )
        if info.get("host") == _host(str(kernel.get("lang"))):
            kernel["binary"] = blob.tobytes()
        else:
            log.info("%s: kernel %d: object code for another host; compiling its code", path, k)
    constants = {}
    for name, value in arrays.items():
        if name in used:
            continue
        if not name.isdigit():
            raise ValueError(f"{path}: unexpected array {name!r} in {npz_path(path).name}")
        constants[int(name)] = value
    return constants
