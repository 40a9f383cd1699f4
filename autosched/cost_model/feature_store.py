"""Feature rows of measured programs kept beside their log, so that a resumed tune does not
lower them again.

A tune resumed from a log trains its cost model on every record of the log before the first
round, and the features of a record come from replaying and lowering its state: 30-65 ms a
resnet-18 GPU record (lowering and the GPU verifier) and about 10 ms a CPU one on a 2-core EPYC,
so a log of thousands of records delays each resumed tune by a minute or more. The tune that
measured those programs had their rows already: :class:`FeatureStore` keeps them in
``<log>.features.npz``, appended as the cost model learns each round, and the next resume reads
them instead of lowering.

The file is a cache: missing, unreadable, written by other feature code or for another log,
it is ignored (logged at INFO) and rewritten; the rows come from lowering as before. Loading
it never runs code (``np.load(allow_pickle=False)``, every array's shape and type checked).
A row found in it is the row lowering gives: the feature code it was computed with is part of
the file's :func:`fingerprint`, so a changed lowering or feature extractor makes it stale.

Archive members:

``format``, ``version``
    ``"autosched.FeatureStore"`` and :data:`FORMAT_VERSION`.
``fingerprint``
    :func:`fingerprint` of the code that computed the rows.
``keys_<n>``, ``sizes_<n>``, ``rows_<n>``
    Segment ``n`` (one per flush, merged when a resumed tune opens the file or past
    :data:`MAX_SEGMENTS`): the entries' 16-byte keys (:func:`entry_key`) as a ``(k, 16)``
    uint8 array, each entry's row count, and their rows concatenated (``(R, N_FEATURES)``
    float32).

Size: 24 bytes and ``4 * N_FEATURES`` (680) bytes per row for each distinct measured program:
for resnet-18, 2.2 KB per CPU record (3.1 rows) and 3.6 KB per GPU record (5.3 rows), 2.4-2.8x
the record's line in the log. It holds at most one entry per distinct record of its log
(:meth:`FeatureStore.open`), so its size follows the log's however often the tune is resumed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import zipfile
from pathlib import Path

import numpy as np

from .features import FEATURE_NAMES, N_FEATURES

__all__ = ["FORMAT_VERSION", "MAX_SEGMENTS", "FeatureStore", "entry_key", "fingerprint",
           "store_path"]  # fmt: skip

_log = logging.getLogger(__name__)

FORMAT_NAME = "autosched.FeatureStore"
FORMAT_VERSION = 1
SUFFIX = ".features.npz"
# Flushes appended as segments before the whole file is rewritten as one.
MAX_SEGMENTS = 64
_KEY_BYTES = 16


def store_path(log) -> Path:
    """The feature store of the log ``log``: ``<log>.features.npz``."""
    return Path(str(log) + SUFFIX)


@functools.cache
def fingerprint() -> str:
    """A digest of the code that computes feature rows: the store format, the feature names,
    and the source of :mod:`tensorir` (replay, lowering, the GPU verifier) and of the feature
    extractor. Any change to them makes stores of other fingerprints stale (conservative: a
    change that leaves the rows equal costs one more lowering of the records, nothing else)."""
    import tensorir

    from . import feature_index, features

    h = hashlib.blake2b(digest_size=16)
    h.update(f"{FORMAT_NAME} {FORMAT_VERSION} {N_FEATURES}\n".encode())
    h.update("\n".join(FEATURE_NAMES).encode())
    root = Path(tensorir.__file__).resolve().parent
    sources = sorted(root.rglob("*.py")) + [Path(features.__file__), Path(feature_index.__file__)]
    for path in sources:
        h.update(path.name.encode())
        try:
            h.update(path.read_bytes())
        except OSError:  # a source that cannot be read is part of the fingerprint as absent
            h.update(b"<unreadable>")
    return h.hexdigest()


def hardware_part(task) -> str:
    """What of a task's hardware changes its rows: the GPU limits the verifier checks, and the
    cache line of the ``lines`` features."""
    limits = task.hardware_params.as_limits() if task.target.is_gpu else None
    line = task.hardware_params.cache_line_bytes or 64
    return json.dumps([limits, line], sort_keys=True, default=str)


def entry_key(workload_key: str, target: str, hardware: str, steps_json: str) -> bytes:
    """The 16-byte key of one program's rows: its task (workload key, target string, hardware
    part) and its steps (``json.dumps(state.to_json())``, the in-memory cache's key part)."""
    h = hashlib.blake2b(digest_size=_KEY_BYTES)
    for part in (workload_key, target, hardware, steps_json):
        h.update(part.encode())
        h.update(b"\0")
    return h.digest()


class FeatureStore:
    """The feature rows of a log's measured programs, in memory and in ``<log>.features.npz``.

    Use :meth:`open`; :meth:`get` looks an entry up, :meth:`add` adds one, :meth:`flush`
    appends what was added since the last flush to the file. No method raises for a file
    problem: the store then works in memory, and a later flush rewrites the file.

    Attributes
    ----------
    path : Path
    hits, added : int
        Lookups answered, and entries added, since the store was opened.
    """

    def __init__(self, path):
        self.path = Path(path)
        self._rows: dict[bytes, np.ndarray] = {}
        self._pending: list[bytes] = []
        self._segments = 0  # segments in the file; 0: (re)write the whole file on flush
        self._stamp = None  # (size, mtime_ns) of the file after our last write
        self.hits = self.added = 0

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path, keep=None, limit: int | None = None) -> FeatureStore:
        """The store at ``path`` with its entries loaded.

        Parameters
        ----------
        path : str or Path
        keep : collection of bytes, optional
            The keys of the records being resumed: when the file holds more than ``limit``
            entries, only these are kept (the others are of records no longer in the log).
            None (a tune that does not resume): the file is started afresh.
        limit : int, optional
            The records of the log (the most entries the store may hold).
        """
        store = cls(path)
        if keep is None:
            return store  # segments 0: the first flush replaces whatever the file held
        entries, segments = store._read()
        if limit is not None and len(entries) > limit:
            keep = set(keep)
            entries = {k: v for k, v in entries.items() if k in keep}
            segments = 0  # dropped entries: rewrite
            _log.info(
                "feature cache %s: kept the %d entries of the resumed records", path, len(entries)
            )
        store._rows = entries
        # Merged into one segment by the first flush when the file has many.
        store._segments = segments if segments <= 1 else 0
        if store._segments == 0 and entries:
            store.flush()
        return store

    def _read(self) -> tuple[dict[bytes, np.ndarray], int]:
        """The file's entries and its segment count; ({}, 0) when there is no usable file."""
        if not self.path.exists():
            return {}, 0
        try:
            with np.load(self.path, allow_pickle=False) as z:
                members = {name: z[name] for name in z.files}
            entries, segments = self._check(members)
        except Exception as exc:  # noqa: BLE001 - a cache: any damage means "lower again"
            _log.info(
                "feature cache %s unreadable (%s: %s); lowering the records again (the file "
                "is rewritten)",
                self.path,
                type(exc).__name__,
                exc,
            )
            return {}, 0
        if entries is None:
            return {}, 0
        self._stamp = _stamp(self.path)
        return entries, segments

    def _check(self, m: dict) -> tuple[dict[bytes, np.ndarray] | None, int]:
        bad = ValueError
        if str(m.get("format", "")) != FORMAT_NAME or "version" not in m:
            raise bad("not a feature cache")
        if int(m["version"]) != FORMAT_VERSION or str(m.get("fingerprint")) != fingerprint():
            _log.info(
                "feature cache %s was written by other feature code; lowering the records "
                "again (the file is rewritten)",
                self.path,
            )
            return None, 0
        segments = sorted(int(name[5:]) for name in m if name.startswith("keys_"))
        entries: dict[bytes, np.ndarray] = {}
        for n in segments:
            keys, sizes, rows = m[f"keys_{n}"], m.get(f"sizes_{n}"), m.get(f"rows_{n}")
            if sizes is None or rows is None:
                raise bad(f"segment {n} incomplete")
            if keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != _KEY_BYTES:
                raise bad(f"segment {n}: keys of shape {keys.shape} and dtype {keys.dtype}")
            if sizes.ndim != 1 or sizes.dtype.kind not in "iu" or len(sizes) != len(keys):
                raise bad(f"segment {n}: {len(sizes)} row counts for {len(keys)} keys")
            if (sizes < 0).any() or int(sizes.sum()) != len(rows):
                raise bad(f"segment {n}: row counts do not sum to its {len(rows)} rows")
            if rows.dtype != np.float32 or rows.ndim != 2 or rows.shape[1] != N_FEATURES:
                raise bad(f"segment {n}: rows of shape {rows.shape} and dtype {rows.dtype}")
            if not len(keys):
                continue
            rows.setflags(write=False)  # shared with the cost model, as the LRU's arrays are
            for key, part in zip(keys, np.split(rows, np.cumsum(sizes)[:-1]), strict=True):
                entries[key.tobytes()] = part
        return entries, len(segments)

    # ------------------------------------------------------------------ entries

    def get(self, key: bytes) -> np.ndarray | None:
        """The rows stored under ``key`` (read-only), or None."""
        arr = self._rows.get(key)
        if arr is not None:
            self.hits += 1
        return arr

    def add(self, key: bytes, arr: np.ndarray) -> None:
        """Keep ``arr`` under ``key`` (written by the next :meth:`flush`); a known key is kept
        as it is."""
        if key in self._rows:
            return
        self._rows[key] = arr
        self._pending.append(key)
        self.added += 1

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: bytes) -> bool:
        return key in self._rows

    # ------------------------------------------------------------------ writing

    def flush(self) -> None:
        """Append the entries added since the last flush to the file as one segment (or rewrite
        the file: the first time, after a problem, past :data:`MAX_SEGMENTS`, or when the file
        changed since our last write). A write that fails is logged; the entries stay in
        memory and the next flush rewrites the file."""
        if not self._pending and self._segments:
            return
        try:
            if (self._segments == 0 or self._segments >= MAX_SEGMENTS
                    or _stamp(self.path) != self._stamp):  # fmt: skip
                self._rewrite()
            else:
                self._append(self._pending, self._segments)
                self._segments += 1
        except Exception as exc:  # noqa: BLE001 - a cache that cannot be written is not needed
            _log.info(
                "feature cache %s not written (%s: %s); the next resume lowers these records",
                self.path,
                type(exc).__name__,
                exc,
            )
            self._segments = 0  # rewrite next time
            return
        self._pending = []
        self._stamp = _stamp(self.path)

    def _rewrite(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as fh:  # a file object: numpy adds no ".npz"
            np.savez(fh, **self._header(), **_segment(list(self._rows), self._rows, 0))
        os.replace(tmp, self.path)  # a reader never sees half a file
        self._segments = 1

    def _append(self, keys: list[bytes], n: int) -> None:
        with zipfile.ZipFile(self.path, mode="a") as zf:
            for name, arr in _segment(keys, self._rows, n).items():
                with zf.open(name + ".npy", mode="w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, arr, allow_pickle=False)

    @staticmethod
    def _header() -> dict:
        return {
            "format": np.array(FORMAT_NAME),
            "version": np.array(FORMAT_VERSION, dtype=np.int64),
            "fingerprint": np.array(fingerprint()),
        }


def _segment(keys: list[bytes], rows: dict, n: int) -> dict[str, np.ndarray]:
    arrays = [rows[k] for k in keys]
    return {
        f"keys_{n}": np.frombuffer(b"".join(keys), np.uint8).reshape(len(keys), _KEY_BYTES),
        f"sizes_{n}": np.array([len(a) for a in arrays], dtype=np.int64),
        f"rows_{n}": (
            np.concatenate(arrays).astype(np.float32, copy=False)
            if arrays
            else np.zeros((0, N_FEATURES), np.float32)
        ),
    }


def _stamp(path: Path):
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)
