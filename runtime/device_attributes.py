"""TVM's device attributes (``dev.max_threads_per_block``, ``dev.warp_size``, ...).

The seed tutorials read these off ``tvm.device(...)``. Values come from the backends'
property queries, which read the driver without creating a context (``cuda.query_properties``,
``opencl.query_properties``). As in TVM, an attribute a device kind does not have is None: on
the CPU only ``exist``, ``device_name``, ``multi_processor_count`` (cores) and
``total_global_memory`` are defined, since thread blocks, warps and shared memory are GPU ideas.
Units follow TVM: ``max_clock_rate`` is kHz on CUDA and MHz on OpenCL, sizes are bytes.
"""

from __future__ import annotations

import os

ATTRIBUTES = (
    "max_threads_per_block",
    "warp_size",
    "max_shared_memory_per_block",
    "compute_version",
    "device_name",
    "max_clock_rate",
    "multi_processor_count",
    "max_thread_dimensions",
    "api_version",
    "driver_version",
    "l2_cache_size_bytes",
    "total_global_memory",
)


def cpu_attributes(p: dict) -> dict:
    attrs = dict.fromkeys(ATTRIBUTES)
    attrs["device_name"] = p["name"]
    attrs["multi_processor_count"] = p["num_cores"]
    attrs["total_global_memory"] = _host_memory_bytes()
    return attrs


def cuda_attributes(p: dict) -> dict:
    return {
        "max_threads_per_block": p["max_threads_per_block"],
        "warp_size": p["warp_size"],
        "max_shared_memory_per_block": p["max_shared_memory_per_block"],
        "compute_version": p["compute_version"],
        "device_name": p["name"],
        "max_clock_rate": p["clock_rate_khz"],
        "multi_processor_count": p["multi_processor_count"],
        "max_thread_dimensions": [p["max_thread_x"], p["max_thread_y"], p["max_thread_z"]],
        "api_version": p["api_version"],
        "driver_version": str(p["driver_version"]),
        "l2_cache_size_bytes": p["l2_cache_size"],
        "total_global_memory": p["total_memory"],
    }


def opencl_attributes(p: dict) -> dict:
    words = p["version"].split()  # "OpenCL 3.0 PoCL ..."
    return {
        "max_threads_per_block": p["max_threads_per_block"],
        "warp_size": p["warp_size"],
        "max_shared_memory_per_block": p["max_shared_memory_per_block"],
        "compute_version": words[1] if len(words) > 1 else p["version"],
        "device_name": p["name"],
        "max_clock_rate": p["max_clock_rate_mhz"],
        "multi_processor_count": p["multi_processor_count"],
        "max_thread_dimensions": [p["max_thread_x"], p["max_thread_y"], p["max_thread_z"]],
        "api_version": None,
        "driver_version": p["driver_version"],
        "l2_cache_size_bytes": p["global_mem_cache_size"],
        "total_global_memory": p["global_mem_size"],
    }


def _host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX
        return None
