"""The network level: a Relay-like graph of operator calls, its numpy reference evaluator,
a printer, and the model zoo (``get_network``).

See docs/graph-ir.md for the API and docs/graph-ops.md for the op vocabulary.
"""

from . import image, nn, op, shapes
from .ir import (
    Attrs,
    Call,
    Constant,
    Expr,
    Function,
    Module,
    Var,
    bind_params,
    calls,
    free_vars,
    make_call,
    post_order,
    rewrite,
    users,
)
from .onnx_frontend import OnnxImportError, from_onnx
from .printer import astext
from .reference import evaluate
from .shapes import OPS, ShapeError, get_op
from .zoo import NETWORKS, get_network

__all__ = [
    "NETWORKS", "OPS", "Attrs", "Call", "Constant", "Expr", "Function", "Module",
    "OnnxImportError", "ShapeError", "Var", "astext", "bind_params", "calls", "evaluate",
    "free_vars", "from_onnx", "get_network", "get_op", "image", "make_call", "nn", "op",
    "post_order",
    "rewrite", "shapes", "users",
]  # fmt: skip
