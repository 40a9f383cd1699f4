"""``tvm.contrib.utils``: :func:`autosched.utils.tempdir` and its directory class."""

from ..utils import TempDirectory, tempdir

__all__ = ["TempDirectory", "tempdir"]
