"""CUDA C++ dialect of the C-like kernel generator (compiled by nvcc through pycuda)."""

from __future__ import annotations

import math

from tensorir.loops import Program

from .c_like import CRenderer
from .source import Source

_F32_MATH = {
    "exp": "expf", "log": "logf", "sqrt": "sqrtf", "rsqrt": "rsqrtf", "tanh": "tanhf",
    "erf": "erff", "pow": "powf", "fabs": "fabsf", "floor": "floorf", "ceil": "ceilf",
    "round": "rintf", "sin": "sinf", "cos": "cosf",
}  # fmt: skip
# numpy rounds half to even, so "round" is rint, not C's round (half away from zero).
_F64_MATH = {k: v[:-1] for k, v in _F32_MATH.items()}
_NARROW_INTS = ("int8", "int16", "uint8")


class CUDARenderer(CRenderer):
    """``extern "C" __global__`` kernels with blockIdx/threadIdx and ``__shared__`` buffers."""

    lang = "cuda"
    kernel_prefix = 'extern "C" __global__'
    restrict = "__restrict__"
    shared_qualifier = "__shared__"
    barrier = "__syncthreads();"
    thread_index = {
        "blockIdx.x": "blockIdx.x", "blockIdx.y": "blockIdx.y", "blockIdx.z": "blockIdx.z",
        "threadIdx.x": "threadIdx.x", "threadIdx.y": "threadIdx.y", "threadIdx.z": "threadIdx.z",
    }  # fmt: skip
    types = {
        "float16": "half", "float32": "float", "float64": "double", "int8": "signed char",
        "int16": "short", "int32": "int", "int64": "long long", "uint8": "unsigned char",
        "uint32": "unsigned int", "bool": "bool",
    }  # fmt: skip
    helper_qualifier = "__device__ __forceinline__"
    int64_suffix = "LL"

    def header(self) -> list[str]:
        return ["#include <cuda_fp16.h>"] if "float16" in self._dtypes else []

    def kernel_signature(self, name, params, info) -> str:
        # The launch always uses exactly this block, so tell ptxas the bound (register budget).
        bounds = f"__launch_bounds__({info.threads_per_block})"
        return f"{self.kernel_prefix} void {bounds} {name}({', '.join(params)})"

    def float_const(self, value: float, dtype: str) -> str:
        if dtype == "float16":
            return f"__float2half({self.float_const(value, 'float32')})"
        if math.isnan(value):
            text = (
                "__int_as_float(0x7fc00000)"
                if dtype == "float32"
                else ("__longlong_as_double(0x7ff8000000000000LL)")
            )
            return text
        if math.isinf(value):
            text = (
                "__int_as_float(0x7f800000)"
                if dtype == "float32"
                else ("__longlong_as_double(0x7ff0000000000000LL)")
            )
            return f"(-{text})" if value < 0 else text
        text = self.float_text(value) + ("f" if dtype == "float32" else "")
        return f"({text})" if value < 0 else text

    def cast(self, dtype: str, src_dtype: str, v: str) -> str:
        # Go through float for half: __half's own conversions differ between CUDA versions.
        if src_dtype == "float16":
            v, src_dtype = f"__half2float({v})", "float32"
            if dtype == "float32":
                return v
        if dtype == "float16":
            return f"__float2half((float)({v}))"
        return f"(({self.ctype(dtype)})({v}))"

    def math_call(self, name: str, args: list[str], dtype: str) -> str:
        one = "1.0f" if dtype == "float32" else "1.0"
        if name == "sigmoid":
            exp = _F32_MATH["exp"] if dtype == "float32" else "exp"
            return f"({one} / ({one} + {exp}(-({args[0]}))))"
        table = _F32_MATH if dtype == "float32" else _F64_MATH
        if name not in table:
            raise ValueError(f"math function {name!r} has no CUDA equivalent")
        return f"{table[name]}({', '.join(args)})"

    def minmax(self, op: str, a: str, b: str, dtype: str) -> str:
        if dtype == "float32":
            return f"f{op}f({a}, {b})"
        if dtype == "float64":
            return f"f{op}({a}, {b})"
        if dtype in _NARROW_INTS:
            return f"(({self.ctype(dtype)}){op}((int)({a}), (int)({b})))"
        return f"{op}({a}, {b})"


def build_cuda(program: Program, inject_vthreads: bool = True) -> Source:
    """Generate CUDA C++ for ``program``: one kernel per top-level statement.

    Parameters
    ----------
    program : Program
        Lowered loop IR whose top-level statements are bound to blockIdx/threadIdx.
    inject_vthreads : bool
        Push vthread loops down to the statements that depend on them (see
        :func:`tensorir.passes.inject_vthread.inject_virtual_threads`); False runs them as
        plain loops.

    Returns
    -------
    Source
        ``lang="cuda"``; kernels are ``extern "C"`` (compile with pycuda's
        ``no_extern_c=True``), launches give each kernel's grid, block and buffer arguments.
    """
    return CUDARenderer(inject_vthreads).render(program)
