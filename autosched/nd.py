"""``tvm.nd``: ``nd.array(numpy_array[, dev])`` is :func:`runtime.array` (an NDArray)."""

from runtime import NDArray, array, empty

__all__ = ["NDArray", "array", "empty"]
