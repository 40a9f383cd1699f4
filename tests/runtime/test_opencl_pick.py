"""Choosing an OpenCL platform: GPUs first, then the first CPU platform that can compile."""

import types

import pytest

from runtime.opencl import _pick_devices


class _Error(Exception):
    pass


def _fake_cl(platform_specs):
    """A stand-in for pyopencl: each spec is (name, has_gpu, builds)."""

    class Program:
        def __init__(self, ctx, src):
            self.ctx = ctx

        def build(self):
            if not self.ctx.device.builds:
                raise _Error("Build on device:\nerror: unknown target CPU 'generic'\n")
            return self

    platforms = []
    for name, has_gpu, builds in platform_specs:
        plat = types.SimpleNamespace(name=name, version=f"{name} 1.0")
        dev = types.SimpleNamespace(builds=builds, platform=plat, name=f"{name}-dev")

        def get_devices(device_type=None, _dev=dev, _gpu=has_gpu):
            if device_type == "GPU" and not _gpu:
                raise _Error("DEVICE_NOT_FOUND")
            return [_dev]

        plat.get_devices = get_devices
        platforms.append(plat)
    return types.SimpleNamespace(
        get_platforms=lambda: platforms,
        device_type=types.SimpleNamespace(GPU="GPU"),
        Error=_Error,
        Context=lambda devices: types.SimpleNamespace(device=devices[0]),
        Program=Program,
    )


def test_skips_a_cpu_platform_that_cannot_compile(monkeypatch):
    monkeypatch.delenv("AUTOSCHED_OPENCL_PLATFORM", raising=False)
    cl = _fake_cl([("BundledPoCL", False, False), ("SystemPoCL", False, True)])
    assert _pick_devices(cl)[0].name == "SystemPoCL-dev"


def test_gpu_platform_wins(monkeypatch):
    monkeypatch.delenv("AUTOSCHED_OPENCL_PLATFORM", raising=False)
    cl = _fake_cl([("CPU", False, True), ("NVIDIA", True, True)])
    assert _pick_devices(cl)[0].name == "NVIDIA-dev"


def test_no_working_platform_names_each_failure(monkeypatch):
    monkeypatch.delenv("AUTOSCHED_OPENCL_PLATFORM", raising=False)
    cl = _fake_cl([("BundledPoCL", False, False)])
    with pytest.raises(RuntimeError, match=r"(?s)BundledPoCL.*unknown target CPU.*pocl-opencl-icd"):
        _pick_devices(cl)
