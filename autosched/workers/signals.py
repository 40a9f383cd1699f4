"""Stopping a tuning run on SIGINT or SIGTERM, cleanly.

Inside :func:`stop_on_signals` (what the tuners wrap a run in) SIGTERM raises
KeyboardInterrupt like Ctrl-C does, so both unwind through the tuners' cleanup (workers
stopped and reaped, the log left with its last whole batch). Code that must not be cut in the
middle (appending a batch to the log) runs under :func:`deferred_signals`: a signal arriving
there is raised when it ends. The tuner then raises :class:`TuningInterrupted`, whose message
says how to resume; left uncaught in a script it is printed as that one line, without a
traceback (workers ignore SIGINT, so they print nothing either).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

__all__ = ["TuningInterrupted", "deferred_signals", "stop_on_signals"]

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_state = {"depth": 0, "pending": None, "active": 0}


class TuningInterrupted(KeyboardInterrupt):
    """A tuning run stopped by SIGINT or SIGTERM after cleaning up; the message says how to
    resume. A KeyboardInterrupt, so ``except KeyboardInterrupt`` still catches it."""


def _interrupt(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt(signal.Signals(signum).name)


def _on_signal(signum, frame) -> None:
    if _state["depth"]:
        _state["pending"] = signum  # raised when the critical section ends
        return
    raise _interrupt(signum)


def signal_name(exc: BaseException) -> str:
    """``SIGTERM`` for an interruption raised here, else ``SIGINT`` (a plain Ctrl-C)."""
    text = str(exc.args[0]) if exc.args else ""
    return text if text in ("SIGINT", "SIGTERM") else "SIGINT"


@contextlib.contextmanager
def stop_on_signals():
    """Within the block, SIGINT and SIGTERM raise KeyboardInterrupt (main thread only; a
    handler the application installed itself is left alone)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in _STOP_SIGNALS:
        current = signal.getsignal(sig)
        if current in (signal.default_int_handler, signal.SIG_DFL) or current is _on_signal:
            previous[sig] = current
            signal.signal(sig, _on_signal)
    _state["active"] += 1
    try:
        yield
    finally:
        _state["active"] -= 1
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def deferred_signals():
    """A signal arriving inside the block (under :func:`stop_on_signals`) is raised at its
    end, so the block is never cut in the middle. Off the main thread (a background
    measurement writing its records) it does nothing: signals are handled in the main thread,
    which must not defer them to the end of another thread's block, and they never cut
    another thread's block anyway."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        pending = _state["pending"]
        if not _state["depth"] and pending is not None:
            _state["pending"] = None
            raise _interrupt(pending)


_previous_hook = {"hook": sys.__excepthook__}


def _excepthook(exc_type, exc, tb) -> None:
    if isinstance(exc, TuningInterrupted):
        print(f"autosched: {exc}", file=sys.stderr, flush=True)
        return
    _previous_hook["hook"](exc_type, exc, tb)


def interrupted(message: str) -> TuningInterrupted:
    """The exception a tuner raises after an interruption; left uncaught it prints as
    ``autosched: message`` with no traceback."""
    if sys.excepthook is not _excepthook:
        _previous_hook["hook"] = sys.excepthook
        sys.excepthook = _excepthook
    return TuningInterrupted(message)
