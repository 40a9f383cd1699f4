"""``autotvm.tophub.context(target, extra_files)``: the seed's way to apply tuned logs.

TVM's tophub also downloads pre-tuned logs per device; autosched has no such service, so the
context holds the records of ``extra_files`` only (an :class:`ApplyHistoryBest`).
"""

from __future__ import annotations

from .dispatch import ApplyHistoryBest

__all__ = ["context"]


def context(target=None, extra_files=None) -> ApplyHistoryBest:
    """The best records of ``extra_files`` (a path or a list of paths) as a dispatch context;
    ``target`` is accepted for TVM's signature (records match the call's target)."""
    if extra_files is None:
        extra_files = []
    elif isinstance(extra_files, str):
        extra_files = [extra_files]
    return ApplyHistoryBest(list(extra_files))
