"""Winograd transform matrices for the numpy reference; they live in
``tensorir.ops.winograd_reference`` with the reference implementations that use them."""

from ..ops.winograd_reference import winograd_matrices

__all__ = ["winograd_matrices"]
