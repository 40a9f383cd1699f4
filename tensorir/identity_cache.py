"""A bounded, thread-safe LRU map for results keyed by the identity of IR objects.

IR objects (ops, expressions) are immutable and compared by identity, so a cache of a pure
function of them can key on their ``id``: cheap, where hashing a whole expression tree is
not. An ``id`` stays an object's only while the object lives, so each entry keeps the objects
its key names alive (``keep``) until it is evicted. Bound inference (the inlined bodies of a
state's stages) and the dataflow rewrites (cache_read / cache_write) cache this way.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["IdentityCache"]


class IdentityCache:
    """At most ``max_entries`` values, least recently used evicted first.

    Parameters
    ----------
    max_entries : int
        The bound; 0 keeps nothing.
    """

    def __init__(self, max_entries: int = 64):
        self.max_entries = max_entries
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()  # lowering and replay may run in several threads

    def get(self, key):
        """The value stored under ``key`` (now the most recently used), or None."""
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            self._data.move_to_end(key)
            return hit[1]

    def put(self, key, value, keep) -> None:
        """Store ``value`` under ``key``, keeping ``keep`` (the objects whose ids the key
        holds) alive while the entry is."""
        with self._lock:
            self._data[key] = (keep, value)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)
