"""The record files' public names: ``autosched.records.to_dataframe(log)``, ``load_records``,
``distill``, ... and ``python -m autosched.records distill -i log.json -o best.json``.

A facade: each name is defined in one module below, which the library imports directly —
the format, reader and writer in :mod:`autosched.measure.records`, the rule for a usable
record in :mod:`autosched.measure.data`, ``ApplyHistoryBest`` in
:mod:`autosched.measure.dispatch`, the tabular view of a log (``to_dataframe`` with pandas,
``record_rows`` as plain dicts) in :mod:`autosched.measure.record_rows`, the command line in
:mod:`autosched.cli.records`. It sits with the entry points in the top layer
(docs/architecture.md), so no module of the library imports it.
"""

import sys

from .cli.records import main
from .measure.data import usable_result
from .measure.dispatch import ApplyHistoryBest
from .measure.record_rows import record_rows, to_dataframe
from .measure.records import (
    RECORD_VERSION,
    RecordState,
    RecordTask,
    RecordToFile,
    RecordWarning,
    distill,
    load_best_record,
    load_ranked_records,
    load_records,
    log_ended_cleanly,
    read_record_lines,
    register_dag,
    save_records,
)

__all__ = [
    "RECORD_VERSION",
    "ApplyHistoryBest",
    "RecordState",
    "RecordTask",
    "RecordToFile",
    "RecordWarning",
    "distill",
    "load_best_record",
    "load_ranked_records",
    "load_records",
    "log_ended_cleanly",
    "main",
    "read_record_lines",
    "record_rows",
    "register_dag",
    "save_records",
    "to_dataframe",
    "usable_result",
]

if __name__ == "__main__":
    sys.exit(main())
