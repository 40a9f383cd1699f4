"""Which CUDA features an nvcc ``-arch`` has: ``__dp4a`` (sm_61), ``nvcuda::wmma`` fragments
of each operand dtype (:data:`tensorir.passes.tensor_core.FRAGMENT_SHAPES`), ``cp.async``
(sm_80). Each answer is True, False, or None where the architecture is not known here (the
kernel then carries both forms under ``#if __CUDA_ARCH__``)."""

from __future__ import annotations

import re

from tensorir.passes.tensor_core import FRAGMENT_SHAPES

__all__ = [
    "CP_ASYNC_MIN_ARCH",
    "DP4A_MIN_ARCH",
    "WMMA_MIN_ARCH",
    "WGMMA_ARCH",
    "GRID_DEPENDENCY_MIN_ARCH",
    "grid_dependency_available",
    "cp_async_available",
    "dp4a_available",
    "wmma_available",
    "wmma_unavailable_reason",
    "wgmma_available",
]

DP4A_MIN_ARCH = 61
"""``__dp4a`` needs compute capability 6.1 (sm_61) or newer."""

WMMA_MIN_ARCH = {dtype: shape.min_arch for dtype, shape in FRAGMENT_SHAPES.items()}
"""``nvcuda::wmma`` fragments of each operand dtype need this compute capability or newer."""

CP_ASYNC_MIN_ARCH = 80
"""``cp.async`` (global to shared copies that bypass registers) needs sm_80 or newer. The
switch for the asynchronous copies of double-buffered tensor-core kernels: a number above
every real architecture (1000) makes them plain 16-byte loads and stores again."""


WGMMA_ARCH = 90
"""Hopper's warpgroup ``wgmma.mma_async``: sm_90 only, compiled as ``sm_90a`` (the
architecture-specific features; later architectures do not have the instruction)."""


GRID_DEPENDENCY_MIN_ARCH = 90
"""Programmatic dependent launch (``griddepcontrol.wait`` / ``launch_dependents``): sm_90 or
newer. A kernel that waits on its grid dependency before touching memory may be launched while
the kernel before it is still finishing (the network's CUDA graph, :mod:`runtime.cuda_graph`)."""


def _arch_number(arch: str | None) -> int | None:
    found = re.fullmatch(r"(?:sm|compute)_(\d+)[a-z]?", arch or "")
    return None if found is None else int(found.group(1))


def dp4a_available(arch: str | None) -> bool | None:
    """Whether code for ``-arch=arch`` may use ``__dp4a``: True, False, or None where the
    architecture is not known here (None, ``native``, ``all``), to be decided by nvcc."""
    n = _arch_number(arch)
    return None if n is None else n >= DP4A_MIN_ARCH


def cp_async_available(arch: str | None) -> bool | None:
    """Whether code for ``-arch=arch`` may use ``cp.async`` (sm_80 on): True, False, or None
    (unknown architecture: the helpers choose by ``__CUDA_ARCH__`` when nvcc compiles)."""
    n = _arch_number(arch)
    return None if n is None else n >= CP_ASYNC_MIN_ARCH


def grid_dependency_available(arch: str | None) -> bool | None:
    """Whether code for ``-arch=arch`` may use ``griddepcontrol`` (sm_90 on): True, False, or
    None (unknown architecture: the kernel guards it with ``__CUDA_ARCH__``)."""
    n = _arch_number(arch)
    return None if n is None else n >= GRID_DEPENDENCY_MIN_ARCH


def wmma_available(arch: str | None, dtype: str) -> bool | None:
    """Whether code for ``-arch=arch`` may use wmma fragments of ``dtype`` (float16 from
    sm_70, bfloat16 from sm_80): True, False, or None (unknown architecture: decided by nvcc
    through ``__CUDA_ARCH__``)."""
    n = _arch_number(arch)
    return None if n is None else n >= WMMA_MIN_ARCH[dtype]


def wmma_unavailable_reason(arch: str | None, dtype: str) -> str:
    """Why code for ``-arch=arch`` cannot run fragments of operand ``dtype`` (one line), or ""
    when it can or the architecture is unknown (see :func:`wmma_available`)."""
    if wmma_available(arch, dtype) is not False:
        return ""
    what = "TF32 tensor cores (float32 operands)" if dtype == "float32" else f"{dtype} wmma"
    need = WMMA_MIN_ARCH[dtype]
    return (
        f"-arch={arch} has no {what}: they need sm_{need} or newer; the loops stay scalar "
        f"(compile for -arch=sm_{need} or newer to use them)"
    )


def wgmma_available(arch: str | None) -> bool | None:
    """Whether a GPU of ``-arch=arch`` runs ``wgmma`` (sm_90 / sm_90a: True; another known
    architecture: False; None when the architecture is unknown here)."""
    n = _arch_number(arch)
    return None if n is None else n == WGMMA_ARCH
