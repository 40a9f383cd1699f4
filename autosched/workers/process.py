"""One worker process: a fresh interpreter running ``python -m autosched.workers``.

This is how every process of the project is started (builders, feature extraction, the
measuring process that owns a device), as TVM's popen workers are: ``subprocess.Popen`` of
our own module, talking over a socket pair, so the user's ``__main__`` (a plain script without
a main guard, ``python -c``, stdin, a notebook) is never imported again, and no
``multiprocessing`` start method, semaphore or resource tracker is involved.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path

from .protocol import function_ref

__all__ = ["WorkerProcess", "WorkerStartError"]

# The directory holding our four packages: put first on the worker's path, so the worker
# imports the same autosched as this process whatever the user's working directory is.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class WorkerStartError(RuntimeError):
    """A worker process could not start (e.g. it failed to import the packages)."""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [_PACKAGE_ROOT, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return "unknown signal"


class WorkerProcess:
    """A started worker. :meth:`wait_ready` before the first request.

    Parameters
    ----------
    preload : sequence of str
        Modules the worker imports before it says it is ready (heavy ones such as llvmlite),
        so that the first request does not pay for them inside its timeout.
    name : str
        What the worker is for, used in error messages ("build worker").
    """

    START_TIMEOUT = 120.0  # importing numpy + llvmlite in a cold process on a busy machine

    def __init__(self, preload: Sequence[str] = (), name: str = "worker"):
        self.name = name
        ours, theirs = socket.socketpair()
        # -P: the working directory is not put on the worker's path (a user's file named like
        # one of our modules must not shadow it); our packages come from PYTHONPATH.
        safe_path = ["-P"] if sys.version_info >= (3, 11) else []
        cmd = [sys.executable, *safe_path, "-m", "autosched.workers", str(theirs.fileno())]
        try:
            self.proc = subprocess.Popen(
                [*cmd, *preload],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,  # the user's stdin may be the script itself
                env=_child_env(),
            )
        finally:
            theirs.close()  # so that the worker's death shows as EOF on our end
        self.conn = Connection(ours.detach())

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait for the worker's hello.

        Raises
        ------
        WorkerStartError
            With the worker's traceback or exit status when it did not start.
        """
        reply = self.recv(self.START_TIMEOUT if timeout is None else timeout)
        if reply is not None and reply[0] == "hello":
            return
        if reply is not None and reply[0] == "failed":
            detail = reply[1].strip().splitlines()[-1]
        else:
            detail = self.death()
        self.kill()
        raise WorkerStartError(
            f"the {self.name} process ({sys.executable} -m autosched.workers) did not start: "
            f"{detail}; its error output is above"
        )

    def call(self, func: Callable, args: tuple) -> None:
        """Send one request to run ``func(*args)``; the reply comes with :meth:`recv`."""
        self.conn.send(("call", *function_ref(func), args))

    def serve(self, func: Callable) -> None:
        """Hand the connection to ``func(conn)`` in the worker, for its own protocol."""
        self.conn.send(("serve", *function_ref(func)))

    def recv(self, timeout: float | None):
        """The next message; ``("eof",)`` when the worker died, None when the timeout passed."""
        try:
            if self.conn.poll(timeout):
                return self.conn.recv()
        except (EOFError, OSError):
            return ("eof",)
        return None

    def death(self) -> str:
        """Why the worker is gone, e.g. ``died with signal 11 (SIGSEGV)``."""
        try:
            code = self.proc.wait(2)
        except subprocess.TimeoutExpired:
            return "stopped responding"
        if code < 0:
            return f"died with signal {-code} ({_signal_name(-code)})"
        return f"exited with code {code}"

    def kill(self) -> None:
        """Kill the worker and reap it (no zombie)."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self.conn.close()

    def stop(self, grace: float = 2.0) -> None:
        """Ask the worker to exit, kill it if it does not within ``grace`` seconds."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.conn.send(None)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(grace)
        self.kill()
