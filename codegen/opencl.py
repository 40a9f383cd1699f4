"""OpenCL C dialect of the C-like kernel generator (built by pyopencl at run time)."""

from __future__ import annotations

import math

from tensorir.loops import Program

from .c_like import CRenderer
from .source import Source

# OpenCL's math builtins are overloaded for half/float/double, so no suffixes.
# numpy rounds half to even, so "round" is rint, not C's round (half away from zero).
_MATH = {
    "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh", "erf": "erf",
    "pow": "pow", "fabs": "fabs", "floor": "floor", "ceil": "ceil", "round": "rint",
    "sin": "sin", "cos": "cos",
}  # fmt: skip


class OpenCLRenderer(CRenderer):
    """``__kernel`` functions with get_group_id/get_local_id and ``__local`` buffers."""

    lang = "opencl"
    kernel_prefix = "__kernel"
    global_qualifier = "__global"
    restrict = "restrict"
    shared_qualifier = "__local"
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    thread_index = {
        "blockIdx.x": "get_group_id(0)", "blockIdx.y": "get_group_id(1)",
        "blockIdx.z": "get_group_id(2)", "threadIdx.x": "get_local_id(0)",
        "threadIdx.y": "get_local_id(1)", "threadIdx.z": "get_local_id(2)",
    }  # fmt: skip
    types = {
        "float16": "half", "float32": "float", "float64": "double", "int8": "char",
        "int16": "short", "int32": "int", "int64": "long", "uint8": "uchar", "uint32": "uint",
        "bool": "bool",
    }  # fmt: skip
    helper_qualifier = "static inline"
    int64_suffix = "L"

    def header(self) -> list[str]:
        out = []
        if "float16" in self._dtypes:
            out.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
        if "float64" in self._dtypes:
            out.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        return out

    def kernel_signature(self, name, params, info) -> str:
        # The launch always uses exactly this work-group size; saying so lets the compiler
        # size registers and lets the runtime reject a wrong launch.
        x, y, z = info.block
        attr = f"__attribute__((reqd_work_group_size({x}, {y}, {z})))"
        return f"{self.kernel_prefix} {attr} void {name}({', '.join(params)})"

    def float_const(self, value: float, dtype: str) -> str:
        if dtype == "float16":
            return f"((half){self.float_const(value, 'float32')})"
        if math.isnan(value) or math.isinf(value):
            text = "NAN" if math.isnan(value) else "INFINITY"
            if dtype == "float64":
                text = f"((double){text})"
            return f"(-{text})" if value < 0 else text
        text = self.float_text(value) + ("f" if dtype == "float32" else "")
        return f"({text})" if value < 0 else text

    def math_call(self, name: str, args: list[str], dtype: str) -> str:
        if name == "sigmoid":
            one = "1.0f" if dtype == "float32" else "1.0"
            return f"({one} / ({one} + exp(-({args[0]}))))"
        if name not in _MATH:
            raise ValueError(f"math function {name!r} has no OpenCL equivalent")
        return f"{_MATH[name]}({', '.join(args)})"

    def minmax(self, op: str, a: str, b: str, dtype: str) -> str:
        if dtype in ("float32", "float64"):
            return f"f{op}({a}, {b})"
        return f"{op}({a}, {b})"


def render(program: Program, target, options) -> Source:
    """The backend table's renderer (codegen.target.BACKENDS): :func:`build_opencl`."""
    return build_opencl(program)


def build_opencl(program: Program, inject_vthreads: bool = True) -> Source:
    """Generate OpenCL C for ``program``: one ``__kernel`` per top-level statement.

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
        ``lang="opencl"``; each launch's global size is ``grid * block`` work-items.
    """
    return OpenCLRenderer(inject_vthreads).render(program)
