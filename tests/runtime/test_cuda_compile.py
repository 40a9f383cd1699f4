"""CUDA compilation without a GPU: NVRTC in process (when cuda-python or cupy imports) or
nvcc, to a cubin; the per-process cache; one-line errors."""

import shutil

import pytest

from runtime import cuda
from runtime.errors import CompileError

KERNEL = """#include <cuda_fp16.h>
extern "C" __global__ void scale(float* __restrict__ a, half* __restrict__ h, float s) {
  a[blockIdx.x * blockDim.x + threadIdx.x] *= s;
  h[threadIdx.x] = __float2half(a[threadIdx.x]);
}
"""
COMPILERS = [
    pytest.param("nvcc", marks=pytest.mark.skipif(shutil.which("nvcc") is None,
                                                  reason="nvcc is not on PATH")),
    pytest.param("nvrtc", marks=pytest.mark.skipif(cuda.nvrtc_binding() is None,
                                                   reason="no NVRTC binding (cuda-python, cupy)")),
]  # fmt: skip


@pytest.mark.parametrize("compiler", COMPILERS)
def test_compile_cubin_gives_a_cached_cubin_for_the_arch(compiler):
    src = KERNEL + f"// {compiler}\n"  # a source of its own: not in the cache yet
    cubin = cuda.compile_cubin(src, "sm_80", compiler=compiler)
    assert cubin[:4] == b"\x7fELF" and len(cubin) > 1000
    assert b"scale" in cubin  # the extern "C" kernel keeps its name
    assert cuda.compile_cubin(src, "sm_80", compiler=compiler) is cubin  # cached
    other = cuda.compile_cubin(src, "sm_90", compiler=compiler)
    assert other is not cubin and other[:4] == b"\x7fELF"


@pytest.mark.parametrize("compiler", COMPILERS)
def test_compile_errors_carry_the_compiler_log(compiler):
    with pytest.raises(CompileError) as info:
        cuda.compile_cubin('extern "C" __global__ void k() { undeclared_name = 1; }',
                           "sm_80", compiler=compiler)  # fmt: skip
    assert "sm_80" in str(info.value) and "undeclared_name" in info.value.log


def test_unknown_compiler_is_refused():
    with pytest.raises(ValueError, match="compiler must be"):
        cuda.compile_cubin(KERNEL, "sm_80", compiler="clang")
