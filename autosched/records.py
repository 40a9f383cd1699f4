"""``python -m autosched.records distill -i log.json -o best.json`` and the old import path.

The records live in :mod:`autosched.measure.records`; this module keeps the command line (and
``from autosched.records import ...``) working.
"""

import sys

from .measure.records import *  # noqa: F403 - the same public names
from .measure.records import __all__, main  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
