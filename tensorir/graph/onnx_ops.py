"""The core ONNX node converters of ``onnx_frontend.from_onnx``, gathered from their family
modules: one function per ONNX op type, each turning a node into graph calls (docs/graph-ops.md)
or, for the shape arithmetic torch exports (Shape -> Gather -> Unsqueeze -> Concat -> Reshape),
into values known at import time. ``onnx_node.py`` holds what they share (``Node``, ``Value``,
``CONVERTERS``); the families are ``onnx_ops_window.py`` (Conv, pools, BatchNormalization),
``onnx_ops_elementwise.py``, ``onnx_ops_dense.py`` (Gemm, MatMul, Softmax) and
``onnx_ops_shape.py`` (shapes and data movement).

Nothing here imports onnx: the frontend parses attributes into plain Python values (strings,
ints, floats, tuples, numpy arrays for tensors) before a converter sees them.
"""

from __future__ import annotations

# The converters live by family (onnx_ops_window, _elementwise, _dense, _shape); importing them
# registers them into CONVERTERS (no op type is in two of them, so the order is free). The
# names below are re-exported: the frontend and the other converter modules import them here.
from . import onnx_ops_dense, onnx_ops_elementwise  # noqa: F401 - they register their converters
from .onnx_node import (  # noqa: F401
    CONVERTERS,
    MULTI_OUTPUT,
    Node,
    OnnxImportError,
    Value,
    _Converter,
    _register,
    _static_or,
)
from .onnx_ops_shape import _axes  # noqa: F401  (onnx_ops_math reuses it)
from .onnx_ops_window import _pads  # noqa: F401  (onnx_ops_nn reuses it)
