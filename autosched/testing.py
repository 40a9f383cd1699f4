"""The old name of :mod:`autosched.workloads` (the seed workloads: ``matmul``,
``conv2d_nhwc_bias_relu``, ...), which holds no test helpers.

Kept because scripts written from the README of autosched 0.1 import ``autosched.testing``;
it is the same module object (``autosched.testing is autosched.workloads``), so every name
has one home. New code imports :mod:`autosched.workloads`.
"""

import sys

from . import workloads

sys.modules[__name__] = workloads
