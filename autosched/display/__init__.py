"""Notebook display of autosched objects: HTML tables, the live tuning view.

The IR objects render themselves (``ComputeDAG``, ``State``: :mod:`tensorir.display`; generated
code and timing results: :mod:`runtime.display`); this package holds what belongs to the
search: the task list of a network (:class:`TaskList`), a record log as a sortable table
(:class:`RecordsTable`) and the live view of a tuning run (:class:`LiveView`).
"""

from .live import LiveView, in_notebook
from .records import RecordsTable
from .tasks import TaskList

__all__ = ["LiveView", "RecordsTable", "TaskList", "in_notebook"]
