"""TVM's device attributes on ``device(...)``, as the seed tutorials read them."""

import os

import pytest

import runtime
from runtime.device import Device

GPU_ONLY = (
    "max_threads_per_block",
    "warp_size",
    "max_shared_memory_per_block",
    "compute_version",
    "max_thread_dimensions",
    "api_version",
    "driver_version",
    "l2_cache_size_bytes",
)


def test_cpu_attributes_follow_tvm():
    dev = runtime.device("cpu", 0)
    assert dev.exist is True and (dev.device_type, dev.device_id) == (1, 0)
    # TVM's CPU has no warps, thread blocks or shared memory: None, not a made-up number.
    for name in GPU_ONLY:
        assert getattr(dev, name) is None, name
    assert dev.available_global_memory is None
    assert dev.multi_processor_count == dev.properties["num_cores"] >= 1
    assert dev.device_name == dev.properties["name"]
    page, pages = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_PHYS_PAGES")
    assert dev.total_global_memory == page * pages


def test_absent_device_attributes_are_none():
    dev = Device("cuda", 97)
    assert dev.exist is False and (dev.device_type, dev.device_id) == (2, 97)
    assert dev.max_threads_per_block is None and dev.warp_size is None
    assert dev.available_global_memory is None


def test_opencl_attributes_match_the_driver():
    dev = runtime.device("opencl", 0)
    if not dev.exist:
        pytest.skip("no OpenCL platform")
    import pyopencl as cl

    from runtime.opencl import _pick_devices

    d = _pick_devices(cl)[0]
    assert dev.device_type == 4
    assert dev.max_threads_per_block == d.max_work_group_size
    assert dev.max_shared_memory_per_block == d.local_mem_size
    assert dev.warp_size == dev.properties["warp_size"] >= 1
    assert dev.device_name == d.name.strip()
    assert dev.max_clock_rate == d.max_clock_frequency
    assert dev.multi_processor_count == d.max_compute_units
    assert dev.max_thread_dimensions == list(d.max_work_item_sizes)[:3]
    assert dev.compute_version == d.version.split()[1]
    assert dev.driver_version == d.driver_version.strip()
    assert dev.l2_cache_size_bytes == d.global_mem_cache_size
    assert dev.total_global_memory == d.global_mem_size
    assert dev.api_version is None and dev.available_global_memory is None
