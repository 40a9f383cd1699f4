"""GPU test fixtures: everything here is skipped unless an NVIDIA GPU is reachable.

``cuda_backend`` needs pycuda and a CUDA device; ``opencl_gpu_backend`` needs pyopencl and an
OpenCL platform with a GPU (the NVIDIA one on the integrator's H100). Both skip with the reason.
"""

from __future__ import annotations

import os

import pytest


def cuda_unavailable() -> str | None:
    """Why pycuda cannot run kernels here, or None when it can."""
    try:
        import pycuda.driver as cuda
    except ImportError:
        return "pycuda is not installed"
    try:
        cuda.init()
        if cuda.Device.count() == 0:
            return "no CUDA device"
    except Exception as err:  # no driver, or a driver without a usable device
        return f"CUDA driver unavailable: {err}"
    return None


def opencl_gpu_unavailable() -> str | None:
    """Why no OpenCL GPU platform is usable here, or None when one is."""
    try:
        import pyopencl as cl
    except ImportError:
        return "pyopencl is not installed"
    try:
        platforms = cl.get_platforms()
    except Exception as err:
        return f"no OpenCL platform: {err}"
    for p in platforms:
        try:
            if p.get_devices(device_type=cl.device_type.GPU):
                return None
        except Exception:
            continue
    return "no OpenCL platform with a GPU device"


CUDA_REASON = cuda_unavailable()
OPENCL_GPU_REASON = opencl_gpu_unavailable()


@pytest.fixture(autouse=True)
def _require_a_gpu():
    if CUDA_REASON and OPENCL_GPU_REASON:
        pytest.skip(f"no CUDA GPU ({CUDA_REASON}; OpenCL: {OPENCL_GPU_REASON})")


@pytest.fixture(scope="session")
def cuda_backend():
    if CUDA_REASON:
        pytest.skip(CUDA_REASON)
    from runtime.cuda import CUDABackend

    return CUDABackend(0)


@pytest.fixture(scope="session")
def opencl_gpu_backend():
    if OPENCL_GPU_REASON:
        pytest.skip(OPENCL_GPU_REASON)
    from runtime.opencl import OpenCLBackend

    old = os.environ.pop("AUTOSCHED_OPENCL_PLATFORM", None)
    try:
        backend = OpenCLBackend(0)  # prefers the first platform with GPU devices
    finally:
        if old is not None:
            os.environ["AUTOSCHED_OPENCL_PLATFORM"] = old
    assert backend.properties()["is_gpu"]
    return backend
