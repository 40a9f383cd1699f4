"""``autotvm.MeasureInput``: one configuration to measure (data only, so records and
dispatch need not import the builders and runners)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MeasureInput"]


@dataclass(frozen=True)
class MeasureInput:
    """One configuration to measure (TVM's ``autotvm.MeasureInput(target, task, config)``).

    ``state`` is the State the configuration instantiates to (None when it did not, or when
    read back from a record); ``record_state`` the steps of a record read back
    (:class:`autosched.measure.records.RecordState`).
    """

    target: object
    task: object
    config: object
    state: object = field(default=None, compare=False)
    record_state: object = field(default=None, compare=False)
