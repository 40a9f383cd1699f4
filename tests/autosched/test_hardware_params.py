"""HardwareParams for GPU targets: read from the device, Mali preset, defaults, explicit wins."""

import dataclasses

import pytest

from autosched import hardware
from autosched.hardware import HardwareParams
from codegen.target import Target

FULL = HardwareParams(1, 2, 3, 4, 5, 6, 7, 8)


@pytest.fixture
def no_device_reads(monkeypatch):
    """Fail the test if anything queries a device."""

    def boom(kind):
        raise AssertionError(f"the {kind} device was queried")

    monkeypatch.setattr(hardware, "device_properties", boom)


@pytest.fixture
def fresh_cache():
    hardware.device_properties.cache_clear()
    yield
    hardware.device_properties.cache_clear()


def test_mali_preset_without_touching_a_device(no_device_reads):
    hw = HardwareParams.for_target("opencl -device=mali")
    assert hw == HardwareParams(4, 16, 64, 32768, 2**31 - 1, 256, 1, 1, 32768)


def test_explicit_params_win_and_skip_the_device(no_device_reads):
    # TVM's eight fields, all given: the opt-in is none beyond the shared memory given.
    full = dataclasses.replace(
        FULL, max_shared_memory_per_block_optin=FULL.max_shared_memory_per_block
    )
    assert HardwareParams.for_target("cuda", FULL) == full
    assert HardwareParams.for_target("opencl", FULL) == full
    hw = HardwareParams.for_target("opencl -device=mali", HardwareParams(num_cores=2))
    assert hw.num_cores == 2 and hw.max_threads_per_block == 256


def test_explicit_fields_win_over_device_values(monkeypatch):
    props = {"num_cores": 80, "max_shared_memory_per_block": 65536, "max_threads_per_block": 512,
             "warp_size": 64, "arch": "sm_70"}  # fmt: skip
    monkeypatch.setattr(hardware, "device_properties", lambda kind: props)
    hw = HardwareParams.for_target("cuda", HardwareParams(max_threads_per_block=256))
    assert hw.num_cores == 80 and hw.max_shared_memory_per_block == 65536
    assert hw.warp_size == 64 and hw.max_vthread_extent == 16  # TVM: warp / 4
    assert hw.max_threads_per_block == 256
    assert hardware.cuda_arch("cuda") == "sm_70"
    assert str(hardware.with_device_arch("cuda")) == "cuda -arch=sm_70"
    assert str(hardware.with_device_arch("cuda -arch=sm_90")) == "cuda -arch=sm_90"
    assert str(hardware.with_device_arch("opencl")) == "opencl"


def test_opencl_params_come_from_the_device(fresh_cache):
    pytest.importorskip("pyopencl")
    from runtime import device
    from runtime.opencl import query_properties

    if not device("opencl").exists:
        pytest.skip("no usable OpenCL device")
    props = query_properties(0)
    hw = HardwareParams.for_target("opencl")
    assert hw.num_cores == props["num_cores"] >= 1
    assert hw.max_threads_per_block == props["max_work_group_size"] >= 1
    assert hw.max_shared_memory_per_block == props["max_shared_memory_per_block"] > 0
    assert hw.vector_unit_bytes >= 4 and hw.vector_unit_bytes % 4 == 0
    assert hw.cache_line_bytes >= 16 and hw.warp_size >= 1
    assert hw.max_vthread_extent == max(1, hw.warp_size // 4)
    if not props["is_gpu"]:  # PoCL on the CPU: no warps
        assert hw.warp_size == 1


def test_cuda_without_a_device_falls_back_with_one_warning(monkeypatch, fresh_cache):
    import runtime.cuda

    def missing(index=0):
        raise RuntimeError("pycuda is not installed (pip install pycuda)")

    monkeypatch.setattr(runtime.cuda, "query_properties", missing)
    with pytest.warns(UserWarning, match="no cuda device .*pycuda is not installed"):
        hw = HardwareParams.for_target("cuda")
    assert hw == HardwareParams(**hardware.GPU_DEFAULTS)
    assert hardware.cuda_arch(Target("cuda")) == runtime.cuda.DEFAULT_ARCH  # cached: no warning


def test_target_with_options():
    t = Target("opencl -device=mali").with_options(arch="x", device="adreno")
    assert str(t) == "opencl -arch=x -device=adreno"
    assert str(Target("cuda -O=3").with_options(arch="sm_90")) == "cuda -O=3 -arch=sm_90"
    assert t.get("device") == "adreno" and t.get("arch") == "x"


def test_minus_one_reads_the_device_and_other_bad_values_are_refused(no_device_reads):
    assert HardwareParams(num_cores=-1) == HardwareParams()
    hw = HardwareParams.for_target("opencl -device=mali", HardwareParams(num_cores=-1))
    assert hw.num_cores == 4  # the Mali preset's, not -1
    for bad in (-2, 0, 2.5, "4", True):
        with pytest.raises(ValueError, match="HardwareParams: num_cores must be a positive int"):
            HardwareParams(num_cores=bad)
    with pytest.raises(ValueError, match="max_shared_memory_per_block must be a non-negative"):
        HardwareParams(max_shared_memory_per_block=-5)
    assert HardwareParams(max_shared_memory_per_block=0).max_shared_memory_per_block == 0


def test_missing_gpu_limits_come_from_the_one_table_of_defaults():
    from autosched.kernel import gpu_limits

    class Device:
        properties = {"max_threads_per_block": 512, "max_thread_x": 256}

    limits = gpu_limits(Device())
    assert limits["max_threads_per_block"] == 512 and limits["max_thread_x"] == 256
    for key in ("warp_size", "max_vthread_extent", "max_shared_memory_per_block"):
        assert limits[key] == hardware.GPU_DEFAULTS[key]
    hw = HardwareParams(warp_size=16)
    assert hw.gpu_value("warp_size") == 16
    assert hw.gpu_value("max_threads_per_block") == hardware.GPU_DEFAULTS["max_threads_per_block"]
