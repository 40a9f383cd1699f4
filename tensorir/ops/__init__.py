"""The operator library (TVM's topi): te computations of the network operators.

``compute_op(op, inputs, attrs)`` builds any op of docs/graph-ops.md by its Relay name; the
functions below build them directly. Chain ops into one DAG under one :class:`NameScope`.
"""

from ._util import NameScope
from ._util import pad as pad_compute
from .broadcast import (
    add,
    batch_norm,
    bias_add,
    broadcast_shape,
    divide,
    maximum,
    minimum,
    multiply,
    subtract,
)
from .conv2d import conv2d, conv2d_nchw, conv2d_nhwc, conv_out_size
from .conv3d import conv3d
from .dense import batch_matmul, dense, matmul
from .elemwise import cast, clip, exp, negative, relu, sigmoid, sqrt, tanh
from .pool import adaptive_pool, global_pool, pool
from .registry import SUPPORTED_OPS, compute_op, op_attrs
from .softmax import softmax
from .transform import (
    batch_flatten,
    concatenate,
    layout_transform,
    pad,
    reshape,
    reshape_shape,
    squeeze,
    transpose,
)
from .winograd import (
    conv2d_winograd_nhwc_without_weight_transform,
    use_winograd,
    winograd_matrices,
    winograd_tile_size,
    winograd_weight_transform,
    winograd_weight_transform_np,
)

__all__ = [
    "SUPPORTED_OPS",
    "NameScope",
    "adaptive_pool",
    "add",
    "batch_flatten",
    "batch_matmul",
    "batch_norm",
    "bias_add",
    "broadcast_shape",
    "cast",
    "clip",
    "compute_op",
    "concatenate",
    "conv2d",
    "conv2d_nchw",
    "conv2d_nhwc",
    "conv2d_winograd_nhwc_without_weight_transform",
    "conv3d",
    "conv_out_size",
    "dense",
    "divide",
    "exp",
    "global_pool",
    "layout_transform",
    "matmul",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "op_attrs",
    "pad",
    "pad_compute",
    "pool",
    "relu",
    "reshape",
    "reshape_shape",
    "sigmoid",
    "softmax",
    "sqrt",
    "squeeze",
    "subtract",
    "tanh",
    "transpose",
    "use_winograd",
    "winograd_matrices",
    "winograd_tile_size",
    "winograd_weight_transform",
    "winograd_weight_transform_np",
]
