"""OpenCL on a GPU platform (NVIDIA's on the H100): generated kernels vs numpy."""

import numpy as np
import pytest

from codegen.opencl import build_opencl

from .programs import all_cases, check_outputs, lowered_cases, run_on_backend


@pytest.mark.parametrize("case", all_cases() + lowered_cases(), ids=lambda c: c.name)
def test_runs_like_numpy(opencl_gpu_backend, case):
    ext = opencl_gpu_backend.properties()["extensions"]
    if "float16" in case.needs and "cl_khr_fp16" not in ext:
        pytest.skip("the OpenCL device has no cl_khr_fp16")
    src = build_opencl(case.program).as_dict()
    inputs = case.inputs(np.random.default_rng(13))
    check_outputs(case, run_on_backend(opencl_gpu_backend, src, inputs), inputs)


def test_gpu_properties(opencl_gpu_backend):
    p = opencl_gpu_backend.properties()
    assert p["is_gpu"] and p["max_threads_per_block"] >= 256
    assert p["max_shared_memory_per_block"] >= 16 * 1024
