"""``python -m autosched.records distill -i log.json -o best.json`` and the old import path.

The records live in :mod:`autosched.measure.records`; this module keeps the command line (and
``from autosched.records import ...``) working, and adds the tabular view of a log:
``to_dataframe(log)`` (pandas) and ``record_rows(log)`` (plain dicts), from
:mod:`autosched.measure.record_rows`.
"""

import sys

from .measure.record_rows import record_rows, to_dataframe
from .measure.records import *  # noqa: F403 - the same public names
from .measure.records import __all__ as _records_all
from .measure.records import main  # noqa: F401

__all__ = [*_records_all, "record_rows", "to_dataframe"]

if __name__ == "__main__":
    sys.exit(main())
