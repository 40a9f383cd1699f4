"""int8 dot-product loops in CUDA code use ``__dp4a`` (sm_61+) when the reduction is contiguous,
a multiple of 4 long and 4-byte aligned; nvcc accepts the code (no GPU needed; the run on a GPU,
bit-exact against numpy, is tests/gpu/test_int8_cuda.py)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import autosched as ansor
from codegen.cuda import build_cuda, dp4a_available
from codegen.opencl import build_opencl
from tensorir.dag import ComputeDAG
from tensorir.lower import lower
from tensorir.ops import NameScope
from tensorir.ops import quantized as q

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu.programs import int8_conv_ohwi_dag as conv_ohwi_dag  # noqa: E402
from gpu.programs import int8_dense_dag as dense_dag  # noqa: E402
from gpu.programs import int8_gpu_state as gpu_state  # noqa: E402

NVCC = shutil.which("nvcc")


def conv_hwio_dag():
    """tensorir.ops.quantized's NHWC conv2d: HWIO weights, strided (by CO) over ci."""
    scope = NameScope()
    x, w = scope.placeholder((1, 6, 6, 16), "int8"), scope.placeholder((3, 3, 16, 8), "int8")
    with scope:
        out = q.conv2d_int8(x, w, 1, (0, 0, 0, 0), data_layout="NHWC")
    return ComputeDAG([x, w, out])  # PaddedInput (no padding) is inlined by int8_gpu_state


def cuda_code(state, arch="sm_90") -> str:
    return build_cuda(lower(state), arch=arch).code


def nvcc_ptx(code: str, tmp_path, arch: str = "sm_90") -> str:
    src = tmp_path / "k.cu"
    src.write_text(code)
    out = tmp_path / "k.ptx"
    r = subprocess.run(
        [NVCC, f"-arch={arch}", "--ptx", "-O3", str(src), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return out.read_text()


@pytest.mark.parametrize(
    "dtypes, instruction",
    [
        (("int8", "int8"), "dp4a.s32.s32"),
        (("uint8", "int8"), "dp4a.u32.s32"),
        (("int8", "uint8"), "dp4a.s32.u32"),
        (("uint8", "uint8"), "dp4a.u32.u32"),
    ],
    ids=lambda p: "x".join(p) if isinstance(p, tuple) else None,
)
def test_dense_uses_dp4a_for_each_signedness(dtypes, instruction, tmp_path):
    code = cuda_code(gpu_state(dense_dag(64, *dtypes)))
    assert "k += 4)" in code and "#if" not in code
    assert ("__dp4a(" in code) == (dtypes[0] == dtypes[1])  # mixed signs: PTX's own dp4a
    if NVCC is None:
        pytest.skip("nvcc is not on PATH")
    assert instruction in nvcc_ptx(code, tmp_path)


def test_conv2d_with_contiguous_reduction_uses_dp4a(tmp_path):
    code = cuda_code(gpu_state(conv_ohwi_dag()))
    assert "__dp4a(*(const int*)&X[" in code and "(const int*)&W[" in code
    if NVCC is None:
        pytest.skip("nvcc is not on PATH")
    assert "dp4a.s32.s32" in nvcc_ptx(code, tmp_path)


def test_unrolled_reduction_uses_dp4a():
    code = cuda_code(gpu_state(dense_dag(32), unroll=True))
    assert "#pragma unroll\n      for (int k = 0; k < 32; k += 4) {" in code
    assert "__dp4a(" in code


def test_shared_memory_operands_are_declared_aligned(tmp_path):
    code = cuda_code(gpu_state(dense_dag(64), shared_a=True))
    assert "__shared__ __align__(4) signed char A_shared[64];" in code
    assert "__dp4a(*(const int*)&A_shared[" in code
    if NVCC is None:
        pytest.skip("nvcc is not on PATH")
    assert "dp4a.s32.s32" in nvcc_ptx(code, tmp_path)


@pytest.mark.parametrize(
    "dag",
    [dense_dag(30), dense_dag(64, offset=2), conv_hwio_dag()],
    ids=["extent_not_a_multiple_of_4", "run_not_4_byte_aligned", "weight_strided_in_k"],
)
def test_scalar_loop_where_dp4a_does_not_apply(dag):
    code = cuda_code(gpu_state(dag))
    assert "dp4a" not in code and "__align__" not in code
    assert "* ((int)(" in code  # the scalar products are still there


def test_architectures_without_dp4a_keep_the_scalar_loop():
    state = gpu_state(dense_dag(64))
    assert "dp4a" not in cuda_code(state, "sm_60")
    assert "dp4a" not in build_opencl(lower(state)).code


def test_unknown_architecture_leaves_the_choice_to_nvcc(tmp_path):
    code = cuda_code(gpu_state(dense_dag(64)), arch=None)
    guarded = code[code.index("#if __CUDA_ARCH__ >= 610") :]
    assert "__dp4a(" in guarded[: guarded.index("#else")]
    assert "* ((int)(" in guarded[guarded.index("#else") : guarded.index("#endif")]
    if NVCC is None:
        pytest.skip("nvcc is not on PATH")
    assert "dp4a.s32.s32" in nvcc_ptx(code, tmp_path, "sm_75")


def test_generate_source_passes_the_targets_arch():
    state = gpu_state(dense_dag(64))
    assert "#if" not in ansor.generate_source(state, "cuda -arch=sm_86").code
    assert "__dp4a(" in ansor.generate_source(state, "cuda -arch=sm_86").code
    assert "dp4a" not in ansor.generate_source(state, "cuda -arch=sm_60").code
    assert "#if __CUDA_ARCH__ >= 610" in ansor.generate_source(state, "cuda").code


@pytest.mark.parametrize(
    "arch, expected",
    [("sm_61", True), ("sm_60", False), ("sm_90a", True), ("compute_86", True),
     ("sm_100", True), ("sm_52", False), ("native", None), (None, None)],
)  # fmt: skip
def test_dp4a_available(arch, expected):
    assert dp4a_available(arch) is expected
