"""A pool of long-lived :class:`WorkerProcess` es with a per-task timeout.

Workers start on first use (all at once, importing in parallel) and are reused across calls,
so a batch costs no interpreter start. A task that passes its timeout gets its worker killed,
one whose worker dies (a segfault in compiled code) is reported as such; either way the worker
is replaced on the next call. :meth:`WorkerPool.close` stops and reaps every worker.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import wait

from .process import WorkerProcess
from .protocol import function_ref

__all__ = ["Outcome", "WorkerPool"]


@dataclass(frozen=True)
class Outcome:
    """What became of one task.

    Attributes
    ----------
    status : str
        ``"ok"`` (``value`` is the result), ``"error"`` (``error`` is the exception the function
        raised), ``"timeout"`` (the worker was killed) or ``"died"`` (``detail`` says how).
    """

    status: str
    value: object = None
    error: BaseException | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class WorkerPool:
    """Up to ``size`` worker processes running module-level functions of our packages.

    Parameters
    ----------
    size : int
        Worker processes.
    preload : sequence of str
        Modules every worker imports once when it starts.
    name : str
        What the workers are for ("build worker"), for error messages.
    """

    def __init__(self, size: int, preload: Sequence[str] = (), name: str = "worker"):
        if size < 1:
            raise ValueError(f"a {name} pool needs at least one process, got size={size}")
        self.size = int(size)
        self.preload = tuple(preload)
        self.name = name
        self._idle: list[WorkerProcess] = []

    @property
    def pids(self) -> list[int]:
        """Process ids of the idle (live) workers."""
        return [w.pid for w in self._idle]

    def _fill(self, count: int) -> None:
        """Start workers until ``count`` are idle (started together, then awaited)."""
        fresh = [WorkerProcess(self.preload, self.name) for _ in range(count - len(self._idle))]
        try:
            for w in fresh:
                w.wait_ready()
        except BaseException:
            for w in fresh:
                w.kill()
            raise
        self._idle.extend(fresh)

    def map(
        self, func: Callable, args_list: Sequence[tuple], timeout: float | None = None
    ) -> list[Outcome]:
        """Run ``func(*args)`` for each ``args`` of ``args_list`` over the pool.

        Parameters
        ----------
        func : callable
            A module-level function of autosched / tensorir / codegen / runtime.
        args_list : sequence of tuple
        timeout : float, optional
            Seconds one task may take in its worker (from when it is sent) before the worker is
            killed and the task is a ``"timeout"``.

        Returns
        -------
        list of Outcome
            One per task, in order. Exceptions are outcomes, not raised; an interruption
            (KeyboardInterrupt) kills the busy workers and propagates.
        """
        function_ref(func)  # a function a worker would refuse is a bug here: raise now
        outcomes: list[Outcome | None] = [None] * len(args_list)
        todo = list(range(len(args_list)))[::-1]
        busy: dict[object, tuple[WorkerProcess, int, float]] = {}  # conn -> (worker, task, end)
        try:
            while todo or busy:
                if todo and not self._idle and len(busy) < self.size:
                    self._fill(min(self.size - len(busy), len(todo)))
                while todo and self._idle:
                    i = todo.pop()
                    worker = self._idle.pop()
                    try:
                        worker.call(func, tuple(args_list[i]))
                    except OSError:  # died while idle
                        outcomes[i] = Outcome("died", detail=f"{self.name} {worker.death()}")
                        worker.kill()
                        continue
                    except Exception as exc:  # the arguments did not pickle
                        outcomes[i] = Outcome("error", error=exc)
                        self._idle.append(worker)
                        continue
                    end = time.monotonic() + timeout if timeout is not None else float("inf")
                    busy[worker.conn] = (worker, i, end)
                if not busy:
                    continue
                first_end = min(end for _, _, end in busy.values())
                left = None if first_end == float("inf") else max(0.0, first_end - time.monotonic())
                for conn in wait(list(busy), left):
                    worker, i, _ = busy.pop(conn)
                    reply = worker.recv(0)
                    if reply is None or reply[0] == "eof":
                        outcomes[i] = Outcome("died", detail=f"{self.name} {worker.death()}")
                        worker.kill()
                    else:
                        status, payload = reply
                        outcomes[i] = (
                            Outcome("ok", value=payload)
                            if status == "ok"
                            else Outcome("error", error=payload)
                        )
                        self._idle.append(worker)
                now = time.monotonic()
                for conn, (worker, i, end) in list(busy.items()):
                    if now >= end:
                        del busy[conn]
                        worker.kill()
                        outcomes[i] = Outcome("timeout", detail=f"{self.name} killed")
        except BaseException:
            for worker, _, _ in busy.values():  # mid-task: their results would be stale
                worker.kill()
            raise
        return outcomes  # type: ignore[return-value]

    def close(self) -> None:
        """Stop and reap every worker (a later :meth:`map` starts new ones)."""
        idle, self._idle = self._idle, []
        for w in idle:  # ask all first, so they exit in parallel
            with contextlib.suppress(OSError):
                w.conn.send(None)
        for w in idle:
            w.stop(grace=2.0)
