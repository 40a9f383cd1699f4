"""Where a tuning run's time goes: the timing ledger (issue 29, user-pains 2).

One :class:`TimeLedger` per tuning run adds up wall seconds by phase, exclusively (a phase
timed inside another is taken out of the outer one, so the phases never overlap and their sum
is at most the run's wall time):

========== =====================================================================
phase      what
========== =====================================================================
sample     sketch generation and random annotation of the initial population
evolve     evolution: mutation, selection (crossover: none, as in TVM)
features   lowering states to loop IR and extracting their feature rows
predict    the cost model's prediction
train      the cost model's training
lower      builders: replaying the steps and lowering to loop IR
codegen    builders: generating code (LLVM IR, CUDA or OpenCL C)
compile    builders: compiling to machine code (LLVM O3, nvcc)
wait       waiting for the builder pool beyond its workers' own work (transfers,
           idle workers in a batch smaller than the pool, imbalance)
run        the runner: loading, checking and timing candidates
records    measure callbacks (writing records to the log)
========== =====================================================================

The builders run in parallel worker processes, so their ``lower`` / ``codegen`` / ``compile``
seconds (reported by each worker with its result) are turned into wall seconds by dividing
by the workers that were busy, and the rest of the build's wall time is ``wait``. What no
phase covers (the task scheduler's choices, progress output) is ``other`` in :meth:`line`.

Code that does not know the ledger (the cost model, the feature pool) times itself with the
module-level :func:`phase`, which charges the ledger made current by :meth:`TimeLedger.active`
in the same thread and does nothing outside a tuning run.

When a round's candidates are measured in a background thread while the tuning process
searches the next round (:mod:`autosched.measure.overlap`), that thread charges a ledger of its
own, which :meth:`TimeLedger.merge` adds to the run's: every measurement second still shows
under its phase, and the seconds that ran hidden behind the search are counted once more as
``overlap``, which :meth:`TimeLedger.line` takes out again, so the phases less ``overlap``
never exceed the wall time (no second is counted twice).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence

__all__ = ["BUILD_PHASES", "MEASURE_PHASES", "PHASES", "TimeLedger", "phase"]

PHASES = ("sample", "evolve", "features", "predict", "train", "lower", "codegen", "compile",
          "wait", "run", "records")  # fmt: skip
# The phases of the builders (one worker's report: lower, codegen, compile).
BUILD_PHASES = ("lower", "codegen", "compile", "wait")
# Building and running candidates; the rest of a run is search overhead (issue 29's target:
# at most 25% of the wall time on a 2-core CPU).
MEASURE_PHASES = (*BUILD_PHASES, "run")

# Per thread, the ledgers made current (innermost last): a background measurement charges its
# own ledger while the tuning thread charges the run's.
_LOCAL = threading.local()


def _active() -> list:
    stack = getattr(_LOCAL, "stack", None)
    if stack is None:
        stack = _LOCAL.stack = []
    return stack


class TimeLedger:
    """Wall seconds of one tuning run by phase, in total and per round.

    Attributes
    ----------
    seconds : dict of str to float
        Exclusive wall seconds per phase (:data:`PHASES`).
    rounds : list of dict
        Per round (:meth:`end_round`): the seconds of each phase in that round, and
        ``"task"``, ``"trials"``, ``"wall"`` (the round's wall seconds).
    trials : int
        Candidates measured, counted by :meth:`end_round`.
    overlap : float
        Measurement seconds (already in ``seconds``) that ran in the background while this
        thread did something else, the next round's search (:meth:`merge`); 0 when rounds are
        sequential.
    """

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.rounds: list[dict] = []
        self.trials = 0
        self.overlap = 0.0
        self.start = clock()
        self._stack: list[list] = []  # open phases: [name, start, seconds of inner phases]
        self._round_start = (self.start, dict(self.seconds), 0.0)

    # ------------------------------------------------------------------ charging

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the wall time of the block to ``name``, less its inner phases."""
        if name not in self.seconds:
            raise ValueError(f"unknown timing phase {name!r}; use one of {PHASES}")
        entry = [name, self.clock(), 0.0]
        self._stack.append(entry)
        try:
            yield
        finally:
            self._stack.pop()
            elapsed = self.clock() - entry[1]
            self.seconds[name] += max(0.0, elapsed - entry[2])
            if self._stack:
                self._stack[-1][2] += elapsed

    def add(self, name: str, seconds: float) -> None:
        """Charge ``seconds`` measured elsewhere to ``name`` (taken out of the open phase)."""
        if name not in self.seconds:
            raise ValueError(f"unknown timing phase {name!r}; use one of {PHASES}")
        seconds = max(0.0, float(seconds))
        self.seconds[name] += seconds
        if self._stack:
            self._stack[-1][2] += seconds

    def add_build(
        self, wall: float, reports: Sequence[Mapping], workers: int, rest: str = "wait"
    ) -> None:
        """Charge a batch build of ``wall`` seconds: the workers' ``lower`` / ``codegen`` /
        ``compile`` seconds (one report per candidate) divided by the busy workers, the rest
        to ``rest`` (``"run"`` when the builds happened inside a runner's wall time: RPC
        servers build what they measure). Without any report (a builder that does not say)
        it all goes to ``compile``."""
        busy = max(1, min(int(workers), len(reports)))
        totals = {k: sum(float(r.get(k, 0.0)) for r in reports) / busy for k in BUILD_PHASES[:3]}
        inside = sum(totals.values())
        if inside <= 0:
            self.add("compile", wall)
            return
        scale = min(1.0, wall / inside)  # the workers' clocks cannot exceed the batch's wall
        for k, v in totals.items():
            self.add(k, v * scale)
        self.add(rest, wall - inside * scale)

    def merge(self, other: TimeLedger, waited: float) -> None:
        """Add the phases of ``other``, the ledger of a measurement that ran in a background
        thread, of which this thread waited ``waited`` seconds; the rest ran hidden behind
        this thread's own phases and becomes :attr:`overlap`. Called with no phase open (the
        waiting is then covered by ``other``'s phases, not by an open one of this ledger)."""
        work = 0.0
        for name, seconds in other.seconds.items():
            self.seconds[name] += seconds
            work += seconds
        self.overlap += max(0.0, work - max(0.0, float(waited)))

    # ------------------------------------------------------------------ rounds

    def end_round(self, trials: int, task: int | None = None) -> dict:
        """Close a round of ``trials`` measured candidates; return its row (see ``rounds``)."""
        now = self.clock()
        start, before, overlap = self._round_start
        row = {k: self.seconds[k] - before[k] for k in PHASES}
        row.update(task=task, trials=int(trials), wall=now - start, overlap=self.overlap - overlap)
        self.rounds.append(row)
        self.trials += int(trials)
        self._round_start = (now, dict(self.seconds), self.overlap)
        return row

    # ------------------------------------------------------------------ reading

    def wall(self) -> float:
        """Seconds since the ledger was made."""
        return self.clock() - self.start

    def measuring(self) -> float:
        """Seconds building and running candidates."""
        return sum(self.seconds[k] for k in MEASURE_PHASES)

    def line(self, wall: float | None = None, trials: int | None = None) -> str:
        """The one-line breakdown, e.g. ``Time: 120.3 s, 214 trials (106.7 per minute):
        sample 3.1, evolve ... s; outside building and running 21%``."""
        wall = self.wall() if wall is None else wall
        trials = self.trials if trials is None else trials
        per_min = 60.0 * trials / wall if wall > 0 else math.nan
        parts = [f"{k} {self.seconds[k]:.1f}" for k in PHASES]
        other = wall - (sum(self.seconds.values()) - self.overlap)
        if self.overlap > 0:  # measurement hidden behind the search: in its phases already
            parts.append(f"overlap -{self.overlap:.1f}")
        parts.append(f"other {max(0.0, other):.1f}")
        outside = 1.0 - self.measuring() / wall if wall > 0 else math.nan
        return (
            f"Time: {wall:.1f} s, {trials} trials ({per_min:.1f} per minute): "
            f"{', '.join(parts)} s; outside building and running {100 * outside:.0f}%"
        )

    # ------------------------------------------------------------------ the current ledger

    @contextlib.contextmanager
    def active(self) -> Iterator[TimeLedger]:
        """Make this the ledger that :func:`phase` charges inside the block (in this thread)."""
        stack = _active()
        stack.append(self)
        try:
            yield self
        finally:
            stack.remove(self)


def current() -> TimeLedger | None:
    """The ledger of the tuning run in progress in this thread, or None."""
    stack = _active()
    return stack[-1] if stack else None


def phase(name: str):
    """``with phase("features"):`` charges the current ledger; a no-op without one."""
    ledger = current()
    return ledger.phase(name) if ledger is not None else contextlib.nullcontext()
