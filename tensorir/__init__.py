"""tensorir: the tensor IR, the scheduling language and lowering (numpy only)."""

from . import te
from .dag import ComputeDAG
from .tensor import Tensor, TensorError

__all__ = ["ComputeDAG", "Tensor", "TensorError", "te"]
