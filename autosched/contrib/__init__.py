"""The ``tvm.contrib`` modules seed tutorials import, under the same names.

``from autosched.contrib import utils, ndk`` then ``utils.tempdir()`` (:mod:`autosched.utils`)
and ``lib.export_library(path, ndk.create_shared)`` (:mod:`autosched.contrib.ndk`);
``graph_executor.GraphModule`` is :class:`runtime.graph_executor.GraphModule`. They are
aliases of autosched's own functions, not copies.
"""

from . import graph_executor, ndk, utils

__all__ = ["graph_executor", "ndk", "utils"]
