"""``python -m autosched.records distill -i log.json -o best.json`` (and ``autosched distill``):
the record files' command line."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from ..measure.records import distill

__all__ = ["main"]


def main(argv: Iterable[str] | None = None) -> int:
    """``python -m autosched.records --mode distill -i log.json [-o best.json]``.

    TVM's ``python -m tvm.auto_scheduler.measure_record --mode distill -i log.json`` spelled for
    autosched; ``distill`` as a sub-command (``python -m autosched.records distill -i ...``) and
    ``--i`` / ``--o`` work too.
    """
    parser = argparse.ArgumentParser(
        prog="python -m autosched.records",
        description="distill: keep the best record per workload and target of a log",
    )
    parser.add_argument("command", nargs="?", choices=["distill"], help="same as --mode")
    parser.add_argument("--mode", choices=["distill"], default="distill")
    parser.add_argument("-i", "--i", "--input", dest="input", required=True, help="log to read")
    parser.add_argument(
        "-o", "--o", "--output", dest="output",
        help="file to write (default: <input stem>.best.json)",
    )  # fmt: skip
    args = parser.parse_args(None if argv is None else list(argv))
    src = Path(args.input)
    if not src.is_file():
        parser.error(f"record file {str(src)!r} does not exist")
    out = Path(args.output) if args.output else src.with_suffix(".best.json")
    n = distill(src, out)
    print(f"kept {n} record(s) from {src} in {out}")
    return 0
