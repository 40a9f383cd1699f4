"""Hardware parameters and the CUDA architecture of a target, read from its device.

GPU targets read their limits from device 0 of their kind the first time a task needs them
(``runtime.cuda.query_properties`` / ``runtime.opencl.query_properties``: attribute queries,
no context or queue is created), once per process. Without a device (CI, a laptop) they fall
back to the documented defaults below with a one-line warning, so GPU tasks can still be
created, searched and built. ``opencl -device=mali`` never touches a device: a Mali board is
tuned remotely, and its limits are TVM's Mali preset. Explicit ``HardwareParams`` fields always
win (:meth:`autosched.task.HardwareParams.for_target`).
"""

from __future__ import annotations

import functools
import warnings

from codegen.target import Target

INT32_MAX = 2**31 - 1

# Used without a device: an NVIDIA data-centre GPU (H100 SXM: 132 SMs) for "cuda" and generic
# "opencl"; TVM's presets for Mali (the seed's Mali tutorial passes the same limits, with
# num_cores=-1, which this project keeps at 4 since num_cores sizes parallel loops).
GPU_DEFAULTS = dict(
    num_cores=132,
    vector_unit_bytes=16,
    cache_line_bytes=64,
    max_shared_memory_per_block=49152,
    max_local_memory_per_block=INT32_MAX,
    max_threads_per_block=1024,
    max_vthread_extent=8,
    warp_size=32,
)
MALI_DEFAULTS = dict(
    num_cores=4,
    vector_unit_bytes=16,
    cache_line_bytes=64,
    max_shared_memory_per_block=32768,
    max_local_memory_per_block=INT32_MAX,
    max_threads_per_block=256,
    max_vthread_extent=1,
    warp_size=1,
)


@functools.cache
def device_properties(kind: str) -> dict | None:
    """Properties of device 0 of ``kind`` ("cuda" or "opencl"), or None (with one warning)."""
    try:
        if kind == "cuda":
            from runtime.cuda import query_properties
        else:
            from runtime.opencl import query_properties
        return query_properties(0)
    except Exception as err:  # no driver, no device, no pyopencl / pycuda
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        warnings.warn(
            f"no {kind} device to read hardware parameters from ({first}); using defaults",
            stacklevel=4,
        )
        return None


def gpu_params(target: Target) -> dict:
    """HardwareParams fields for a GPU target (device values, else the defaults)."""
    if target.get("device") == "mali":
        return dict(MALI_DEFAULTS)
    props = device_properties(target.kind)
    if props is None:
        return dict(GPU_DEFAULTS)
    warp = int(props.get("warp_size") or 1)
    return dict(
        num_cores=int(props["num_cores"]),
        # TVM uses 16 bytes on GPUs; a CPU OpenCL device (PoCL) reports its SIMD width.
        vector_unit_bytes=16 if props.get("is_gpu", True) else int(props["vector_unit_bytes"]),
        cache_line_bytes=int(props.get("cache_line_bytes", 64)),
        max_shared_memory_per_block=int(props["max_shared_memory_per_block"]),
        max_local_memory_per_block=INT32_MAX,
        max_threads_per_block=int(props["max_threads_per_block"]),
        max_vthread_extent=max(1, warp // 4),  # TVM's rule (8 on NVIDIA)
        warp_size=warp,
    )


def cuda_arch(target) -> str:
    """``-arch`` of a CUDA target: its own option, else the device's, else nvcc's default."""
    from runtime.cuda import DEFAULT_ARCH

    target = Target(target)
    arch = target.get("arch")
    if arch:
        return arch
    props = device_properties("cuda")
    return props["arch"] if props else DEFAULT_ARCH


def with_device_arch(target) -> Target:
    """A CUDA target with ``-arch`` filled from the device (other targets unchanged).

    Tasks keep the target as the user wrote it (records name tasks by ``str(target)``); the
    builder compiles with this one.
    """
    target = Target(target)
    if target.kind != "cuda" or target.get("arch"):
        return target
    return target.with_options(arch=cuda_arch(target))
