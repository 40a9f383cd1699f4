"""Measurement: its data (inputs, results, error codes), the local builders and runners with
their worker processes, the record files and the dispatch context (``ApplyHistoryBest``).

Re-exports the public names; modules of the library import from the defining module.
"""

from .data import MAX_COST, BuildResult, MeasureErrorNo, MeasureInput, MeasureResult
from .dispatch import ApplyHistoryBest
from .local import (
    LocalBuilder,
    LocalRPCMeasureContext,
    LocalRunner,
    MeasureStats,
    ProgramMeasurer,
    measure,
)
from .records import RecordToFile, load_best_record, load_records

__all__ = [
    "MAX_COST",
    "ApplyHistoryBest",
    "BuildResult",
    "LocalBuilder",
    "LocalRPCMeasureContext",
    "LocalRunner",
    "MeasureErrorNo",
    "MeasureInput",
    "MeasureResult",
    "MeasureStats",
    "ProgramMeasurer",
    "RecordToFile",
    "load_best_record",
    "load_records",
    "measure",
]
