"""OpenCL code generation, run on the CI's OpenCL device (PoCL) against numpy."""

import sys
from pathlib import Path

import numpy as np
import pytest

from codegen.opencl import build_opencl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu.programs import (  # noqa: E402
    add_case,
    all_cases,
    check_outputs,
    lowered_cases,
    matmul_case,
    param_arrays,
    run_on_backend,
    two_stage_case,
)

cl = pytest.importorskip("pyopencl")


@pytest.fixture(scope="module")
def backend():
    from runtime.opencl import OpenCLBackend

    try:
        return OpenCLBackend(0)
    except RuntimeError as err:
        pytest.skip(f"no OpenCL device: {err}")


def _supports(backend, case) -> bool:
    ext = backend.properties()["extensions"]
    return all(f != "float16" or "cl_khr_fp16" in ext for f in case.needs)


@pytest.mark.parametrize("case", all_cases(), ids=lambda c: c.name)
def test_runs_like_numpy(backend, case):
    if not _supports(backend, case):
        pytest.skip(f"{case.name} needs {case.needs}, which this OpenCL device lacks")
    src = build_opencl(case.program).as_dict()
    inputs = case.inputs(np.random.default_rng(7))
    check_outputs(case, run_on_backend(backend, src, inputs), inputs)


@pytest.mark.parametrize("case", lowered_cases(), ids=lambda c: c.name)
def test_lowered_schedules_run_like_numpy(backend, case):
    # Programs from tensorir.lower (Ansor-style GPU schedules): lowering + codegen integration.
    src = build_opencl(case.program).as_dict()
    inputs = case.inputs(np.random.default_rng(9))
    check_outputs(case, run_on_backend(backend, src, inputs), inputs)


def test_kernel_text():
    src = build_opencl(matmul_case(tx_extent=4).program)
    code = src.code
    assert src.lang == "opencl"
    assert (
        "__kernel __attribute__((reqd_work_group_size(8, 4, 1))) void matmul_guarded_kernel0("
        in code
    )
    assert "__global const float* restrict A" in code and "__global float* restrict C" in code
    assert "__local float A_shared[128];" in code
    assert "int by = get_group_id(1);" in code and "int tx = get_local_id(0);" in code
    assert code.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    assert "__syncthreads" not in code and "__shared__" not in code


def test_half_and_double_enable_extensions():
    from gpu.programs import half_case

    assert build_opencl(half_case().program).code.startswith(
        "#pragma OPENCL EXTENSION cl_khr_fp16 : enable"
    )
    assert "cl_khr_fp16" not in build_opencl(add_case().program).code


def test_compile_error_carries_the_build_log(backend):
    from runtime.errors import CompileError

    with pytest.raises(CompileError) as info:
        backend.compile("__kernel void k(__global float* a) { a[0] = undefined_name; }", ("k",))
    assert "undefined_name" in info.value.log


def test_properties(backend):
    p = backend.properties()
    assert p["max_threads_per_block"] >= 1 and p["max_shared_memory_per_block"] > 0
    assert p["max_vthread_extent"] == 8 and p["warp_size"] >= 1 and p["name"]


def test_platform_env_selects_or_explains(monkeypatch):
    from runtime.opencl import OpenCLBackend

    monkeypatch.setenv("AUTOSCHED_OPENCL_PLATFORM", "no-such-platform")
    with pytest.raises(RuntimeError, match="matches no OpenCL platform"):
        OpenCLBackend(0)
    name = cl.get_platforms()[0].name
    monkeypatch.setenv("AUTOSCHED_OPENCL_PLATFORM", name[:6])
    assert OpenCLBackend(0).properties()["platform"] == name.strip()


def test_time_launches_is_positive(backend):
    case = add_case()
    src = build_opencl(case.program).as_dict()
    compiled = backend.compile(src["code"], ("add_kernel0",))
    bufs = [backend.alloc(4 * 1024) for _ in range(3)]
    t = backend.time_launches(
        lambda: backend.launch(compiled, "add_kernel0", (8, 1, 1), (128, 1, 1), bufs), 3
    )
    assert 0 < t < 1


def _runtime_module():
    try:
        from runtime import device, load_module
    except ImportError as err:  # runtime/module.py is written by another helper
        pytest.skip(f"runtime.load_module not available: {err}")
    return device, load_module


@pytest.mark.parametrize("make", [matmul_case, two_stage_case], ids=["matmul", "two_stage"])
def test_through_load_module(make):
    device, load_module = _runtime_module()
    case = make()
    src = build_opencl(case.program)
    mod = load_module(**src.as_dict(), device=device("opencl"))
    inputs = case.inputs(np.random.default_rng(3))
    params = src.as_dict()["params"]
    arrays = param_arrays(params, inputs)
    mod(*arrays)
    got = {p[0]: a for a, p in zip(arrays, params) if p[0] not in inputs}
    check_outputs(case, got, inputs)
    timing = mod.time_evaluator(number=2, repeat=2)(*arrays)
    assert timing.mean > 0 and len(timing.results) == 2


def test_vthread_injection_does_not_change_results(backend):
    case = lowered_cases()[0]
    inputs = case.inputs(np.random.default_rng(4))
    plain = run_on_backend(backend, build_opencl(case.program, False).as_dict(), inputs)
    injected = run_on_backend(backend, build_opencl(case.program).as_dict(), inputs)
    check_outputs(case, plain, inputs)
    np.testing.assert_allclose(injected["C"], plain["C"], rtol=1e-6, atol=1e-6)
