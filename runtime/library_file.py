"""What is checked in a shared-library file before ``dlopen`` sees it.

The system loader maps a library's segments from the file and trusts its headers: a segment that
reaches past the end of a truncated file is mapped anyway, and the first touch of it kills the
process with SIGBUS. So before loading:

- the ELF headers are read and every table and segment (program headers, loadable segments,
  section headers, sections with file contents) must lie inside the file;
- ``export_library`` appends a trailer to the file it links (:func:`seal`): a magic string, the
  size of the library before it and its sha256. Where the trailer is present, the size and hash
  must match (a file damaged or cut after export is refused, naming it); a library without one
  (linked elsewhere, or stripped) gets the structural check only. The loader ignores bytes
  after the ELF contents, so the trailer changes nothing it reads.

The sha256 is unkeyed and stored in the same file: it detects accidents (a partial copy, a full
disk, a damaged download), not an attacker, who can recompute it. A shared library is code;
load only files you trust.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

TRAILER_MAGIC = b"\0autosched-library-sha256\0"
_TRAILER_SIZE = len(TRAILER_MAGIC) + 8 + 32
ET_DYN = 3
_SHT_NOBITS = 8


def seal(path) -> None:
    """Append the size + sha256 trailer to the library ``path`` (just linked)."""
    path = Path(path)
    data = path.read_bytes()
    trailer = TRAILER_MAGIC + len(data).to_bytes(8, "little") + hashlib.sha256(data).digest()
    with open(path, "ab") as f:
        f.write(trailer)


def _unsealed(path: Path, data: bytes) -> bytes:
    """The library bytes, after checking the trailer where there is one."""
    start = len(data) - _TRAILER_SIZE
    if start < 0 or data[start : start + len(TRAILER_MAGIC)] != TRAILER_MAGIC:
        return data
    tail = data[start + len(TRAILER_MAGIC) :]
    size, digest = int.from_bytes(tail[:8], "little"), tail[8:]
    if size != start or hashlib.sha256(data[:start]).digest() != digest:
        raise ValueError(
            f"{path}: damaged shared library: its size or sha256 is not what export_library "
            "recorded (a partial copy?); export it again"
        )
    return data[:start]


def check_library_file(path) -> None:
    """Refuse (ValueError, one line naming ``path``) a library file ``dlopen`` would crash on.

    Checks the trailer :func:`seal` wrote, where present, then that the ELF file is a shared
    library whose header tables, loadable segments and sections all lie inside the file.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"{path}: cannot read the library ({e.strerror})") from e
    data = _unsealed(path, data)
    problem = _elf_problem(data)
    if problem:
        raise ValueError(
            f"{path}: truncated or damaged shared library ({problem}); export it again"
        )


def _elf_problem(data: bytes) -> str | None:
    """What makes ``data`` not a whole ELF shared library, or None."""
    n = len(data)
    if n < 16 or data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        return "no complete ELF header"
    wide = data[4] == 2
    order = "little" if data[5] == 1 else "big"

    def u(off: int, size: int) -> int:
        return int.from_bytes(data[off : off + size], order)

    word = 8 if wide else 4
    if n < (64 if wide else 52):
        return "no complete ELF header"
    if u(16, 2) != ET_DYN:
        return f"ELF type {u(16, 2)}, not a shared library"
    base = 24 + word  # past e_entry
    phoff, shoff = u(base, word), u(base + word, word)
    base += 2 * word + 4 + 2  # past e_phoff, e_shoff, e_flags, e_ehsize
    phentsize, phnum, shentsize, shnum = (u(base + 2 * i, 2) for i in range(4))
    if phnum == 0 or phentsize < (56 if wide else 32):
        return "no program headers"
    if phoff + phnum * phentsize > n:
        return f"program headers end at byte {phoff + phnum * phentsize} of a {n}-byte file"
    for i in range(phnum):
        h = phoff + i * phentsize
        if wide:
            offset, filesz = u(h + 8, 8), u(h + 32, 8)
        else:
            offset, filesz = u(h + 4, 4), u(h + 16, 4)
        if offset + filesz > n:
            return f"segment {i} ends at byte {offset + filesz} of a {n}-byte file"
    if shnum:
        if shentsize < (64 if wide else 40) or shoff + shnum * shentsize > n:
            return f"section headers end at byte {shoff + shnum * shentsize} of a {n}-byte file"
        for i in range(shnum):
            h = shoff + i * shentsize
            kind = u(h + 4, 4)
            offset, size = (u(h + 24, 8), u(h + 32, 8)) if wide else (u(h + 16, 4), u(h + 20, 4))
            if kind != _SHT_NOBITS and offset + size > n:
                return f"section {i} ends at byte {offset + size} of a {n}-byte file"
    return None
