"""One total tuning budget for a tune split over several runs (the GPU machine's calls).

A figure "after 20 minutes of tuning" that was tuned in three calls of a few minutes needs two
things the tuner alone does not give: each call must tune only what is left of the total (a
``max_tuning_seconds`` budget starts afresh in every run), and the network must be built from
the records measured within the total, even when a call was stopped from outside after it. A
ledger beside the log does both. It holds one entry per run, ``{"start": UNIX_SECONDS,
"seconds": TUNED_SO_FAR}``, rewritten after every measured batch, so a call killed at its time
limit loses at most the batch in flight.

    ledger = TuneLedger(log + ".ledger.json")
    budget = ledger.remaining(1200)                # what this run may still tune
    callback = ledger.start_run()                  # a measure callback: appends this run
    ...
    lines = records_within(log, ledger.runs(), 1200)   # the records of the first 1200 s

    python tune_ledger.py trim LOG LEDGER SECONDS OUT  # the same from a shell

Used by ``bench_gpu.py --total-seconds``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from autosched.measure.records import MARKER_KEY, read_record_lines


class LedgerError(ValueError):
    """A ledger file that cannot be read as this module writes it."""


class TuneLedger:
    """The runs of one tune and the seconds each has tuned, in a JSON file.

    Parameters
    ----------
    path : str or Path
        The ledger; a missing file is an empty ledger (no run yet).
    """

    def __init__(self, path):
        self.path = Path(path)

    def runs(self) -> list[dict]:
        """Every run so far, oldest first, as ``{"start": float, "seconds": float}``."""
        if not self.path.exists():
            return []
        try:
            runs = json.loads(self.path.read_text())
            return [{"start": float(r["start"]), "seconds": float(r["seconds"])} for r in runs]
        except (ValueError, TypeError, KeyError) as e:
            raise LedgerError(
                f"tune ledger {self.path}: not a list of {{start, seconds}} runs ({e}); "
                f"delete it to start the budget afresh"
            ) from None

    def spent(self) -> float:
        """Seconds tuned by all runs so far."""
        return sum(r["seconds"] for r in self.runs())

    def remaining(self, total_seconds: float) -> float:
        """What is left of ``total_seconds`` (0 when it is spent)."""
        return max(0.0, total_seconds - self.spent())

    def start_run(self, clock=time.time) -> _LedgerCallback:
        """Append a run starting now; returns the measure callback that keeps its seconds."""
        runs = self.runs()
        runs.append({"start": clock(), "seconds": 0.0})
        self._write(runs)
        return _LedgerCallback(self, clock)

    def _write(self, runs: list[dict]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(runs))
        os.replace(tmp, self.path)  # a kill mid-write leaves the previous ledger whole


class _LedgerCallback:
    """Measure callback (``callback(inputs, results)``): the last run's seconds = now - start."""

    def __init__(self, ledger: TuneLedger, clock):
        self.ledger, self.clock = ledger, clock

    def callback(self, inputs, results) -> None:
        runs = self.ledger.runs()
        runs[-1]["seconds"] = max(0.0, self.clock() - runs[-1]["start"])
        self.ledger._write(runs)


def tuned_seconds_at(timestamp: float, runs: list[dict]) -> float | None:
    """Seconds of tuning, over all runs, when a record stamped ``timestamp`` was measured; None
    for a record from before the first run of the ledger."""
    before, found = 0.0, None
    for run in runs:
        if run["start"] <= timestamp:
            found = before + (timestamp - run["start"])
        before += run["seconds"]
    return found


def _record_stamp(text: str) -> float | None:
    """A record line's measurement time (Unix seconds); None for a run marker."""
    try:
        obj = json.loads(text)
        if MARKER_KEY in obj:
            return None
        return float(obj["r"][3])
    except (TypeError, KeyError, IndexError, AttributeError) as e:
        raise ValueError(f"no result timestamp ({e!r})") from None


def records_within(log, runs: list[dict], seconds: float) -> list[str]:
    """The record lines of ``log`` measured within the first ``seconds`` of tuning. Markers
    are dropped; unreadable lines too, with the log reader's one warning naming them."""
    kept = []
    for _, text, stamp in read_record_lines(log, _record_stamp, stacklevel=2):
        at = tuned_seconds_at(stamp, runs)
        if at is not None and at <= seconds:
            kept.append(text)
    return kept


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    trim = sub.add_parser("trim", help="write the records of the first SECONDS of tuning")
    trim.add_argument("log")
    trim.add_argument("ledger")
    trim.add_argument("seconds", type=float)
    trim.add_argument("out")
    args = p.parse_args(argv)
    runs = TuneLedger(args.ledger).runs()
    if not runs:
        p.error(f"ledger {args.ledger}: no runs (is it the ledger of {args.log}?)")
    lines = records_within(args.log, runs, args.seconds)
    Path(args.out).write_text("".join(line + "\n" for line in lines))
    print(f"{len(lines)} records of the first {args.seconds:g} s of tuning -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
