"""The tuners: ``XGBTuner`` (LightGBM model), ``GATuner``, ``RandomTuner``,
``GridSearchTuner``; all share :class:`Tuner`'s ``tune`` loop."""

from .ga_tuner import GATuner
from .gridsearch_tuner import GridSearchTuner
from .random_tuner import RandomTuner
from .sa_optimizer import SimulatedAnnealingOptimizer
from .tuner import Tuner
from .xgb_tuner import XGBTuner

__all__ = [
    "GATuner",
    "GridSearchTuner",
    "RandomTuner",
    "SimulatedAnnealingOptimizer",
    "Tuner",
    "XGBTuner",
]
