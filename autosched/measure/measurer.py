"""The measurement loop: :class:`ProgramMeasurer` builds and runs candidates batch by batch
(or has an RPC runner build them), keeps the best per workload, calls callbacks such as
``records.RecordToFile`` and totals the build / run wall time in :class:`MeasureStats`
(re-exported by :mod:`autosched.measure.local`, where users import them)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..workers import deferred_signals
from . import timing as _timing
from .data import MAX_COST, BuildResult, MeasureErrorNo, MeasureInput, MeasureResult
from .local_builder import LocalBuilder


@dataclass
class MeasureStats:
    """Running totals of a :class:`ProgramMeasurer` (mutable: updated after every batch).

    Attributes
    ----------
    build_s, run_s : float
        Wall seconds spent in the builder and in the runner (the servers' builds included
        when the runner builds its candidates itself, :func:`runner_builds`).
    measured, errors : int
        Candidates measured, and how many of them failed.
    """

    build_s: float = 0.0
    run_s: float = 0.0
    measured: int = 0
    errors: int = 0

    def __str__(self) -> str:
        return (
            f"{self.measured} measured ({self.errors} errors), build {self.build_s:.1f} s, "
            f"run {self.run_s:.1f} s"
        )


def _with_note(ran: list[MeasureResult], note: str) -> list[MeasureResult]:
    """``ran`` with ``note`` (such as ``data.RETIMED``) as the ``error_msg`` of each error-free
    result."""
    if not note:
        return ran
    ok = MeasureErrorNo.NO_ERROR
    return [dataclasses.replace(r, error_msg=note) if r.error_no == ok else r for r in ran]


class ProgramMeasurer:
    """Builds and runs candidates batch by batch, keeps the best per workload, calls callbacks.

    A runner that builds its candidates itself (:func:`runner_builds`: ``RPCRunner``, whose
    servers run only what they built) measures them with ``build_and_run``, and the builder
    is not used.

    Parameters
    ----------
    builder : LocalBuilder
    runner : LocalRunner
    callbacks : sequence
        Objects with ``callback(inputs, results)``, called after each batch (e.g.
        ``records.RecordToFile``).

    Attributes
    ----------
    stats : MeasureStats
        Build / run wall time and counts so far.
    best_cost : dict of str to float
        Lowest mean cost per workload key.
    best_input : dict of str to MeasureInput
        The candidate that achieved ``best_cost``.
    """

    def __init__(self, builder, runner, callbacks: Sequence = ()):
        self.builder = builder
        self.runner = runner
        self.callbacks = tuple(callbacks)
        self.stats = MeasureStats()
        self.best_cost: dict[str, float] = {}
        self.best_input: dict[str, MeasureInput] = {}

    def measure(
        self, inputs: Sequence[MeasureInput], note: str = "", gate=None
    ) -> list[MeasureResult]:
        """Build, run and record ``inputs`` (in batches of ``2 * builder.n_parallel``);
        ``note`` becomes the ``error_msg`` of error-free results (``data.RETIMED``).

        ``gate`` (a :class:`~autosched.measure.overlap.MeasureGate`, when a background thread
        measures while the tuning thread searches) says when a built batch may run: batches
        are built ahead until it opens, then run and recorded in order, so a runner that times
        on the host's cores never runs beside the search. A cancelled gate stops before the
        next batch is run or recorded (:class:`~autosched.measure.overlap.MeasureCancelled`):
        the log never gets results of candidates whose workers were stopped under them.

        Returns
        -------
        list of MeasureResult
            One per input, with ``all_cost`` and ``timestamp`` filled.
        """
        inputs = list(inputs)
        batch = max(1, 2 * getattr(self.builder, "n_parallel", 1))
        results: list[MeasureResult] = []
        built: list[tuple] = []  # (chunk, build results), built but not yet run
        remote = runner_builds(self.builder, self.runner)
        for lo in range(0, len(inputs), batch):
            chunk = inputs[lo : lo + batch]
            if remote:  # the servers build (an RPC server runs only what it built itself)
                results.extend(self._build_and_run_remotely(chunk, note, gate))
                continue
            built.append((chunk, self._build(chunk, gate)))
            if gate is None or gate.may_run():
                for chunk_, built_ in built:
                    results.extend(self._run(chunk_, built_, note, gate))
                built.clear()
        if built:
            gate.wait_run()
            for chunk_, built_ in built:
                results.extend(self._run(chunk_, built_, note, gate))
        return results

    def _build(self, chunk: list, gate) -> list[BuildResult]:
        if gate is not None:
            gate.check()
        t0 = time.perf_counter()
        built = self.builder.build(chunk)
        wall = time.perf_counter() - t0
        self.stats.build_s += wall
        ledger = _timing.current()
        if ledger is not None:
            workers = getattr(self.builder, "n_parallel", 1)
            ledger.add_build(wall, [getattr(b, "phases", {}) for b in built], workers)
        return built

    def _run(self, chunk: list, built: list, note: str, gate) -> list[MeasureResult]:
        """Run one built batch, keep its best and record it."""
        if gate is not None:
            gate.check()
        t1 = time.perf_counter()
        ran = self.runner.run(chunk, built)
        t2 = time.perf_counter()
        ran = _with_split(built, _with_note(ran, note))
        self.stats.run_s += t2 - t1
        ledger = _timing.current()
        if ledger is not None:
            ledger.add("run", t2 - t1)
        return self._keep(chunk, ran, gate)

    def _build_and_run_remotely(self, chunk: list, note: str, gate) -> list[MeasureResult]:
        """Have the RPC servers build and run one batch (:func:`runner_builds`), keep its best
        and record it."""
        if gate is not None:
            gate.check()
        t1 = time.perf_counter()
        built, ran = self.runner.build_and_run(chunk)
        t2 = time.perf_counter()
        ran = _with_split(built, _with_note(ran, note))
        self.stats.run_s += t2 - t1
        ledger = _timing.current()
        if ledger is not None:
            # The servers' builds, inside the runner's wall time: the candidates in flight at
            # once (on average) divide their seconds, as the builders' do.
            busy = sum(r.all_cost for r in ran) / max(t2 - t1, 1e-9)
            phases = [getattr(b, "phases", {}) for b in built]
            ledger.add_build(t2 - t1, phases, max(1, round(busy)), rest="run")
        return self._keep(chunk, ran, gate)

    def _keep(self, chunk: list, ran: list, gate) -> list[MeasureResult]:
        """Count a measured batch, keep its best and give it to the callbacks (the log)."""
        if gate is not None:
            gate.check()  # stopped while running: the workers may have been killed under it
        self.stats.measured += len(chunk)
        self.stats.errors += sum(r.error_no != MeasureErrorNo.NO_ERROR for r in ran)
        for inp, res in zip(chunk, ran):
            key = inp.task.workload_key
            if res.error_no == MeasureErrorNo.NO_ERROR and res.mean_cost < self.best_cost.get(
                key, MAX_COST
            ):
                self.best_cost[key] = res.mean_cost
                self.best_input[key] = inp
        with deferred_signals(), _timing.phase("records"):
            # (a Ctrl-C here waits: the log gets the whole batch)
            for cb in self.callbacks:
                cb.callback(chunk, ran)
        return ran

    def close(self, clean: bool = True) -> None:
        """Stop the builder's and runner's processes; after a ``clean`` end also close the
        callbacks that can be closed (``RecordToFile`` then marks the log as ended cleanly)."""
        for part in (self.builder, self.runner, *(self.callbacks if clean else ())):
            close = getattr(part, "close", None)
            if close is not None:
                close()


def runner_builds(builder, runner) -> bool:
    """Whether ``runner`` builds the candidates itself (``runner.build_and_run(inputs) ->
    (build results, measure results)``, e.g. ``RPCRunner``, whose servers run only what they
    built from the states), so that building them with ``builder`` would only be thrown
    away. False when the builder does more than build: a ``build_func`` that links each
    candidate with the device's toolchain, or a builder other than :class:`LocalBuilder`."""
    if not getattr(runner, "builds_candidates", False):
        return False
    if builder == "local":
        return True
    return (
        isinstance(builder, LocalBuilder)
        and type(builder).build is LocalBuilder.build
        and builder.build_func == "default"
    )


def _with_split(built, ran) -> list[MeasureResult]:
    """``ran`` with each result's ``build_s`` (the worker's build seconds) and ``run_s`` (the
    rest of its ``all_cost``) filled in, so records keep them (runners may not)."""
    out = []
    for b, r in zip(built, ran, strict=True):
        build_s = float(getattr(b, "time_cost", 0.0) or 0.0)
        run_s = r.run_s if r.run_s == r.run_s else max(0.0, r.all_cost - build_s)  # not NaN
        out.append(dataclasses.replace(r, build_s=build_s, run_s=run_s))
    return out


def measure(
    inputs: Sequence[MeasureInput], builder, runner, callbacks: Sequence = ()
) -> list[MeasureResult]:
    """Build and run ``inputs`` once; a one-shot :class:`ProgramMeasurer`.

    Parameters
    ----------
    inputs : sequence of MeasureInput
    builder : LocalBuilder
    runner : LocalRunner
    callbacks : sequence
        Objects with ``callback(inputs, results)`` (e.g. ``records.RecordToFile``).

    Returns
    -------
    list of MeasureResult
    """
    return ProgramMeasurer(builder, runner, callbacks).measure(inputs)
