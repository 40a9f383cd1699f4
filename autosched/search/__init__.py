"""The search: sketch generation (CPU and GPU rules), random annotation, mutation, evolutionary
search under the cost model, and the policy that runs rounds of it (``SketchPolicy``).

Re-exports the public names; modules of the library import from the defining module.
"""

from .params import SearchParams
from .policy import PreloadCustomSketchRule, PreloadMeasuredStates, SeedStates, SketchPolicy

__all__ = [
    "PreloadCustomSketchRule",
    "PreloadMeasuredStates",
    "SearchParams",
    "SeedStates",
    "SketchPolicy",
]
