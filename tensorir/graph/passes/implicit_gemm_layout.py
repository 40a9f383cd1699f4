"""``alter_op_layout_implicit_gemm``: constant HWIO weights of NHWC convolutions that run as
tensor-core implicit GEMMs stored as OHWI, so the GEMM's second operand is K-major.

An NHWC conv's implicit GEMM (``tensorir.ops.conv2d_gemm``) multiplies ``col[p, r]`` by the
weight reshaped to ``(K, CO)``; with an HWIO kernel that operand is N-major (``Y[k, j]``). The
Hopper warpgroup sketch reads both operands K-major from shared memory (``wgmma`` takes 16-bit
operands only so), and an OHWI kernel is exactly ``W2[co, r]``: each output channel's taps in
one contiguous row, which its shared-memory copy reads in 16-byte words. The weights are
constants, so the pass transposes them once, at build time, as TVM's AlterOpLayout does for its
own kernel layouts.
"""

from __future__ import annotations

import numpy as np

from ...ops.conv2d_gemm import use_implicit_gemm
from ..ir import Call, Constant, Function, make_call, rewrite

__all__ = ["alter_op_layout_implicit_gemm"]

_HWIO_TO_OHWI = (3, 0, 1, 2)


def alter_op_layout_implicit_gemm(func: Function, dtypes: tuple[str, ...]) -> Function:
    """Store the constant HWIO weight of each NHWC ``nn.conv2d`` that
    ``use_implicit_gemm(..., dtypes)`` accepts as OHWI (``kernel_layout="OHWI"``). A weight
    that is not a constant keeps HWIO: transposing it would cost a kernel per call."""

    def visit(node, args):
        if not (isinstance(node, Call) and node.op == "nn.conv2d"):
            return None
        a = node.attrs
        data, weight = args
        if a["data_layout"] != "NHWC" or a["kernel_layout"] != "HWIO":
            return None
        if not isinstance(weight, Constant) or weight.dtype != data.dtype:
            return None
        if not use_implicit_gemm(
            data.shape, weight.shape, a["strides"], a["padding"], a["dilation"], a["groups"],
            "NHWC", "HWIO", data.dtype, dtypes,
        ):  # fmt: skip
            return None
        ohwi = Constant(np.ascontiguousarray(weight.value.transpose(_HWIO_TO_OHWI)), weight.name)
        return make_call("nn.conv2d", (data, ohwi), {**dict(a), "kernel_layout": "OHWI"})

    return rewrite(func, visit)
