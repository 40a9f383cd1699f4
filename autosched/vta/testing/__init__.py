"""``vta.testing``: ``from autosched.vta.testing import simulator`` (TVM's module name)."""

from . import simulator

__all__ = ["simulator"]
