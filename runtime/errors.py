"""Errors raised by the runtime: compiling generated code and launching it."""

from __future__ import annotations


class CompileError(RuntimeError):
    """The backend compiler rejected generated code.

    ``log`` holds the compiler's own message (LLVM verifier, nvcc, OpenCL build log) so that a
    caller such as the tuner can record it next to the failing schedule.
    """

    def __init__(self, message: str, log: str = ""):
        super().__init__(message if not log else f"{message}\n{log}")
        self.log = log


class LaunchError(RuntimeError):
    """A compiled kernel could not be launched or reported a failure while running."""


class IndexOutOfRangeError(LaunchError, IndexError):
    """A kernel met a data-dependent index outside its tensor (``A[B[i]]`` with ``B[i]``
    out of range, e.g. a token id not below the vocabulary size): the kernel read no element
    outside the tensor, and its outputs are not valid.

    ``tensor``, ``axis`` and ``value`` say which (None where the kernel could not tell).
    """

    def __init__(self, message: str, tensor: str | None = None, axis: int | None = None,
                 value: int | None = None):  # fmt: skip
        super().__init__(message)
        self.tensor, self.axis, self.value = tensor, axis, value
