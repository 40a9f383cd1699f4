"""TVM's device attributes on ``device("cuda")`` against pycuda's (runs where a GPU is)."""

import runtime


def test_cuda_attributes_match_the_driver(cuda_backend):
    import pycuda.driver as cuda

    a = cuda.device_attribute
    d = cuda.Device(0)
    dev = runtime.device("cuda", 0)
    assert dev.exist and dev.device_type == 2 and dev.device_id == 0
    assert dev.max_threads_per_block == d.get_attribute(a.MAX_THREADS_PER_BLOCK) >= 1024
    assert dev.warp_size == 32
    assert dev.max_shared_memory_per_block >= 48 * 1024
    assert dev.compute_version == "{}.{}".format(*d.compute_capability())
    assert dev.device_name == d.name()
    assert dev.max_clock_rate == d.get_attribute(a.CLOCK_RATE)
    assert dev.multi_processor_count == d.get_attribute(a.MULTIPROCESSOR_COUNT) > 0
    assert dev.max_thread_dimensions == [
        d.get_attribute(a.MAX_BLOCK_DIM_X),
        d.get_attribute(a.MAX_BLOCK_DIM_Y),
        d.get_attribute(a.MAX_BLOCK_DIM_Z),
    ]
    assert dev.api_version >= 11000 and int(dev.driver_version) >= 11000
    assert dev.l2_cache_size_bytes == d.get_attribute(a.L2_CACHE_SIZE) > 0
    assert dev.total_global_memory == d.total_memory()
    assert 0 < dev.available_global_memory <= dev.total_global_memory
