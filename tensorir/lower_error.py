"""The error of a loop state that cannot be lowered (its own module: bound inference, the
loop structure and the interval helpers all raise it)."""

__all__ = ["LowerError"]


class LowerError(ValueError):
    """A loop state cannot be lowered (bad attachment, unsupported construct)."""
