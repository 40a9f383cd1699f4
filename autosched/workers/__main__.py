"""``python -m autosched.workers FD [PRELOAD ...]``: one worker process.

A fresh interpreter running this module (never the user's script) serves requests from the
tuning process over a socket pair (``FD``; see :mod:`autosched.workers.protocol`) until it is
asked to stop or the parent goes away. It ignores SIGINT: a Ctrl-C in the terminal reaches the whole
process group, and it is the parent that stops the run and then its workers.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection

from .protocol import picklable_error, resolve


def serve(conn: Connection) -> None:
    """Answer requests on ``conn`` until None, EOF or a ``serve`` request's function returns."""
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        kind, module, name, *args = request
        try:
            func = resolve(module, name)
            if kind == "serve":
                func(conn)
                return
            reply = ("ok", func(*args[0]))
        except Exception as exc:  # every failure goes back to the caller as a value
            reply = ("error", picklable_error(exc))
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return
        except Exception as exc:  # the result did not pickle
            conn.send(("error", picklable_error(exc)))


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fd, *preload = argv
    conn = Connection(int(fd))
    try:
        try:
            for module in preload:  # heavy imports once per worker, before the first request
                importlib.import_module(module)
        except Exception:
            conn.send(("failed", traceback.format_exc()))
            return 1
        conn.send(("hello", os.getpid()))
        serve(conn)
    except (BrokenPipeError, ConnectionResetError, EOFError):
        return 0  # the parent went away (stopped or interrupted): nothing to report to
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
