"""``tvm.transform.PassContext``: the ``with`` block the seeds compile in.

Seed 001 and 000 write::

    with auto_scheduler.ApplyHistoryBest(log_file):
        with tvm.transform.PassContext(
            opt_level=3, config={"relay.backend.use_auto_scheduler": True}
        ):
            lib = relay.build(mod, target, params=params)

autosched's network build has no pass pipeline to configure: it always fuses, always reads the
active ``ApplyHistoryBest`` (what ``relay.backend.use_auto_scheduler`` turns on in TVM) and has
no optimisation levels. ``PassContext`` checks its arguments, keeps them readable
(``PassContext.current()``) and changes nothing else, so the seed's lines run as written.
"""

from __future__ import annotations

import threading

__all__ = ["PassContext"]

_local = threading.local()

#: The ``config`` keys the seeds pass; others are refused, naming these.
KNOWN_CONFIG = ("relay.backend.use_auto_scheduler", "relay.FuseOps.max_depth",
                "tir.disable_vectorize")  # fmt: skip


class PassContext:
    """``PassContext(opt_level=2, required_pass=None, disabled_pass=None, config=None)``."""

    def __init__(self, opt_level: int = 2, required_pass=None, disabled_pass=None, config=None,
                 **_):  # fmt: skip
        if not isinstance(opt_level, int) or not 0 <= opt_level <= 4:
            raise ValueError(f"PassContext: opt_level must be 0..4, got {opt_level!r}")
        config = dict(config or {})
        unknown = sorted(set(config) - set(KNOWN_CONFIG))
        if unknown:
            raise ValueError(f"PassContext: unknown config {unknown}; known: {list(KNOWN_CONFIG)}")
        self.opt_level = opt_level
        self.required_pass = set(required_pass or ())
        self.disabled_pass = set(disabled_pass or ())
        self.config = config

    @staticmethod
    def current() -> PassContext:
        """The innermost active context (a default one outside any ``with``)."""
        stack = getattr(_local, "stack", None)
        return stack[-1] if stack else PassContext()

    def __enter__(self) -> PassContext:
        if not hasattr(_local, "stack"):
            _local.stack = []
        _local.stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _local.stack.pop()
