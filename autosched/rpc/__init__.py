"""Remote devices on dask.distributed (the optional extra ``autosched[distributed]``).

``connect_tracker(host, port).request(key)`` opens a session on a device server
(``LocalSession()`` the same API on this machine);
:class:`RPCRunner` measures tuning candidates on the servers of a key. The commands are
``python -m autosched.exec.rpc_tracker`` / ``rpc_server`` / ``query_rpc_tracker``
(docs/remote.md). Importing this package does not import dask.
"""

from .client import (
    NoServerError,
    RemoteDevice,
    RemoteError,
    RemoteGraphModule,
    RemoteModule,
    RemoteSession,
    RemoteTimeout,
    TrackerSession,
    connect_tracker,
)
from .cluster import make_security
from .local import LocalSession
from .runner import RPCRunner

__all__ = [
    "LocalSession",
    "NoServerError",
    "RPCRunner",
    "RemoteDevice",
    "RemoteError",
    "RemoteGraphModule",
    "RemoteModule",
    "RemoteSession",
    "RemoteTimeout",
    "TrackerSession",
    "connect_tracker",
    "make_security",
]
