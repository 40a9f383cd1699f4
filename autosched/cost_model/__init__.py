"""The cost model: per-store features of a lowered program, their parallel extraction, and the
models trained on measured throughput (LightGBM, random) with their file format.

Re-exports the public names; modules of the library import from the defining module.
"""

from .model import CostModel, LGBModel, RandomModel

__all__ = ["CostModel", "LGBModel", "RandomModel"]
