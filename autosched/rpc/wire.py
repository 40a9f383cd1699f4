"""What a server's reply looks like on the wire: bytes of plain data, decoded strictly.

A reply is one ``bytes`` object: a magic line, the length of a JSON document, the document
(numbers, strings, lists, str-keyed dicts; arrays replaced by ``{"__array__": k}``) and the
arrays as ``.npy`` blobs. The client decodes it with :func:`decode_reply`: ``json`` and
``numpy.load(allow_pickle=False)``, numeric dtypes only, a size limit. dask carries the bytes
object, and the client's dask connection deserializes nothing but msgpack
(:mod:`autosched.rpc.client`), so no object chosen by a server is unpickled on the client.
"""

from __future__ import annotations

import io
import json
import struct

import numpy as np

MAGIC = b"autosched-reply/1\n"
#: The largest reply a client accepts (outputs of a network run travel in one).
MAX_REPLY_BYTES = 1 << 31
_LEN = struct.Struct("<Q")


class BadReply(ValueError):
    """A server's reply that is not plain data of the expected form."""


def encode_reply(value) -> bytes:
    """``value`` (None, bool, int, float, str, bytes-free lists/tuples/dicts with str keys,
    numeric numpy arrays and scalars) as reply bytes; TypeError for anything else."""
    arrays: list[bytes] = []

    def plain(v):
        if v is None or isinstance(v, bool | int | float | str):
            return v
        if isinstance(v, np.generic) and v.dtype.kind in "biuf":
            return v.item()
        if isinstance(v, np.ndarray):
            if v.dtype.kind not in "biufc":
                raise TypeError(f"reply arrays must hold numbers, got dtype {v.dtype}")
            buf = io.BytesIO()
            np.save(buf, np.ascontiguousarray(v), allow_pickle=False)
            arrays.append(buf.getvalue())
            return {"__array__": len(arrays) - 1}
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v) or "__array__" in v:
                raise TypeError("reply dicts need str keys other than '__array__'")
            return {k: plain(x) for k, x in v.items()}
        raise TypeError(f"{type(v).__name__} is not plain data")

    doc = json.dumps({"value": plain(value), "arrays": [len(a) for a in arrays]}).encode()
    return b"".join([MAGIC, _LEN.pack(len(doc)), doc, *arrays])


def decode_reply(data, server: str = "the server"):
    """The value of reply bytes from ``server``; :class:`BadReply` (one line naming the
    server) when ``data`` is not a well-formed reply."""

    def bad(why: str):
        raise BadReply(f"malformed reply from {server}: {why}")

    if not isinstance(data, bytes | bytearray):
        bad(f"a {type(data).__name__}, not reply bytes")
    if len(data) > MAX_REPLY_BYTES:
        bad(f"{len(data)} bytes, over the limit of {MAX_REPLY_BYTES}")
    data = bytes(data)
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _LEN.size:
        bad("it does not start with the reply header")
    start = len(MAGIC) + _LEN.size
    (n,) = _LEN.unpack_from(data, len(MAGIC))
    if start + n > len(data):
        bad("the document is cut short")
    try:
        doc = json.loads(data[start : start + n])
    except RecursionError:
        bad("nested too deeply")
    except ValueError as exc:
        bad(f"not JSON ({exc})")
    if not isinstance(doc, dict) or set(doc) != {"value", "arrays"}:
        bad("the document is not {value, arrays}")
    sizes = doc["arrays"]
    if not isinstance(sizes, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in sizes
    ):
        bad("array sizes are not a list of lengths")
    arrays, pos = [], start + n
    for size in sizes:
        blob = data[pos : pos + size]
        pos += size
        if len(blob) != size:
            bad("an array is cut short")
        try:
            arr = np.load(io.BytesIO(blob), allow_pickle=False)
        except Exception as exc:  # not .npy, pickled objects, a lying header
            bad(f"an array is not a .npy of numbers ({type(exc).__name__})")
        if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biufc":
            bad("an array does not hold numbers")
        arrays.append(arr)
    if pos != len(data):
        bad("trailing bytes after the arrays")

    def restore(v):
        if isinstance(v, list):
            return [restore(x) for x in v]
        if isinstance(v, dict):
            if set(v) == {"__array__"}:
                k = v["__array__"]
                if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(arrays):
                    bad("an array reference is out of range")
                return arrays[k]
            return {k: restore(x) for k, x in v.items()}
        return v

    try:
        return restore(doc["value"])
    except RecursionError:
        bad("nested too deeply")
