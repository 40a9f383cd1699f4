"""Measure a round in a background thread while the tuning thread searches the next one.

A network tune alternates search (sampling, evolution, features and prediction: the tuning
process's cores) with measurement (the builder pool's cores, then the device), so each waits
for the other: on the H100, about 115 s of search and 160 s of building and running in a 305 s
piece (issue 29). :class:`InFlight` runs one round's
:meth:`~autosched.measure.local.ProgramMeasurer.measure` in a thread (it mostly waits on the
worker processes, so it barely needs the interpreter) while the task scheduler searches the
round after it.

How far the two may overlap depends on what the runner times (:func:`overlap_mode`):

``"full"``
    GPU targets (CUDA, OpenCL) and RPC runners: the kernel is timed on the device (device
    events) or on another machine, so the search's load on the host's cores does not enter
    the costs. Building and running both go on beside the search.
``"build"`` (``AUTOSCHED_OVERLAP=build``)
    For the local CPU: candidates are timed on the host's cores, which the search would take,
    so a candidate is never *run* beside the search. Batches are built ahead while the search
    goes on; they are run, in order, once the tuning thread waits for the results
    (:class:`MeasureGate`). The builds share the cores with the search, which makes both
    slower, never the costs wrong.
``"off"``
    Sequential rounds, as before: the default for the local CPU, a custom runner whose timing
    is unknown, or ``AUTOSCHED_OVERLAP=0``. On the 2-core CPU, resnet-18 for 150 s gave the
    same trials per minute sequential (24.0), with ``build`` (23.4) and even ``full`` (24.8):
    the builds, the search and the runs all need the same two cores, so overlapping them only
    reorders the work (the search ran 2.7x slower beside the builds). A host with many cores
    more than the search uses may gain from ``build``.

OpenCL on PoCL runs kernels on the host's cores: set ``AUTOSCHED_OVERLAP=build`` there (and
for an RPC server on the tuning machine) when the costs matter more than the trials per minute.

The thread charges a :class:`~autosched.measure.timing.TimeLedger` of its own, merged into the
run's when the results are collected (the hidden seconds become its ``overlap``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from ..workers import env
from .timing import TimeLedger

__all__ = [
    "OVERLAP_MODES",
    "InFlight",
    "MeasureCancelled",
    "MeasureGate",
    "overlap_mode",
    "search_shares_cores",
]

OVERLAP_MODES = ("off", "build", "full")


def overlap_mode(targets: Sequence, runner) -> str:
    """How far search and measurement may overlap for ``targets`` measured by ``runner``.

    Parameters
    ----------
    targets : sequence of Target or str
        The targets of the tasks tuned together.
    runner : "local", LocalRunner, RPCRunner or another runner

    Returns
    -------
    str
        ``"full"``, ``"build"`` or ``"off"`` (see the module); ``AUTOSCHED_OVERLAP`` other
        than ``auto`` decides instead.
    """
    forced = env("AUTOSCHED_OVERLAP")
    if forced != "auto":
        return forced
    from codegen.target import Target

    from .local import LocalRunner

    if getattr(runner, "measures_remotely", False):
        return "full"  # timed on the RPC server's device, not on this host
    if runner == "local" or isinstance(runner, LocalRunner):
        # A CPU task is timed on the cores the search uses: sequential unless asked (see
        # the module for why "build" is not the default there).
        gpu = all(Target(str(t)).is_gpu for t in targets)
        return "full" if gpu else "off"
    return "off"  # a custom runner: where it times is unknown


def search_shares_cores(mode: str) -> bool:
    """Whether, under overlap ``mode``, the search takes time from the measurement: rounds
    one after another (``off``) or builds beside the search (``build``) share the host's
    cores with it; only ``full`` hides the search behind the measurement. An automatic search
    effort spends less per candidate where it shares them (:func:`autosched.search.budget.
    search_effort`)."""
    return mode != "full"


class MeasureCancelled(Exception):
    """A background measurement stopped by :meth:`MeasureGate.cancel` (not an error)."""


class MeasureGate:
    """When a background measurement may run its built batches, and whether to stop.

    Parameters
    ----------
    run_beside_search : bool
        True: batches run as soon as they are built (mode ``"full"``); False: only once
        :meth:`open` says the tuning thread no longer searches (mode ``"build"``).
    """

    def __init__(self, run_beside_search: bool):
        self.run_beside_search = bool(run_beside_search)
        self._open = threading.Event()
        self._cancelled = threading.Event()
        # Test hooks: how many batches ran while the gate was closed (always 0 for "build").
        self.runs_while_closed = 0

    def open(self) -> None:
        """The tuning thread waits for the results: built batches may run now."""
        self._open.set()

    def cancel(self) -> None:
        """Stop the measurement before its next batch is built, run or recorded."""
        self._cancelled.set()
        self._open.set()

    def may_run(self) -> bool:
        """Whether a built batch may run now (non-blocking)."""
        if self.run_beside_search:
            if not self._open.is_set():
                self.runs_while_closed += 1
            return True
        return self._open.is_set()

    def wait_run(self) -> None:
        """Block until built batches may run."""
        if not self.run_beside_search:
            self._open.wait()

    def check(self) -> None:
        """Raise :class:`MeasureCancelled` once cancelled."""
        if self._cancelled.is_set():
            raise MeasureCancelled("measurement cancelled")


class InFlight:
    """One round's measurement, running in a background thread from construction.

    Parameters
    ----------
    measurer : ProgramMeasurer
    inputs : list of MeasureInput
    mode : {"full", "build"}
        See :func:`overlap_mode`.

    Attributes
    ----------
    gate : MeasureGate
    ledger : TimeLedger
        The thread's phases (build, run, records), merged by :meth:`result`.
    finished_at : float or None
        ``time.perf_counter()`` when the measurement ended (tests order events by it).
    """

    def __init__(self, measurer, inputs: Sequence, mode: str):
        if mode not in ("full", "build"):
            raise ValueError(f"InFlight: mode must be 'full' or 'build', got {mode!r}")
        self.measurer = measurer
        self.inputs = list(inputs)
        self.gate = MeasureGate(mode == "full")
        self.ledger = TimeLedger()
        self.finished_at: float | None = None
        self._results: list | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="autosched-measure", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            with self.ledger.active():
                self._results = self.measurer.measure(self.inputs, gate=self.gate)
        except BaseException as exc:  # noqa: BLE001 - handed to the tuning thread by result()
            self._error = exc
        finally:
            self.finished_at = time.perf_counter()

    def done(self) -> bool:
        """Whether the measurement has ended."""
        return not self._thread.is_alive()

    def result(self, ledger: TimeLedger | None = None) -> list:
        """Open the gate, wait for the results and merge the thread's time into ``ledger``.

        Raises
        ------
        BaseException
            What the measurement raised (a bug in a builder, runner or callback: candidates
            that fail are results, never exceptions), re-raised in the tuning thread.
        """
        t0 = time.perf_counter()
        self.gate.open()
        try:
            self._thread.join()
        except BaseException:  # Ctrl-C while waiting: stop the thread before unwinding
            self.cancel()
            raise
        if ledger is not None:
            ledger.merge(self.ledger, time.perf_counter() - t0)
        if self._error is not None:
            raise self._error
        return self._results  # type: ignore[return-value]

    def cancel(self) -> None:
        """Stop after the batch step in progress (nothing more is recorded) and wait for the
        thread; the batches already recorded stay in the log."""
        self.gate.cancel()
        self._thread.join()
