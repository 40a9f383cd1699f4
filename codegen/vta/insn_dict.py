"""The instruction dicts codegen/vta/lower.py emits (and the test oracle builds): a LOAD /
STORE's fields, a GEMM / ALU's micro-op loop fields, in the ISA's field names."""

from __future__ import annotations


def _mem(op, kind, sram, dram, y, x, stride, pads=(0, 0, 0, 0), **deps):
    y0, y1, x0, x1 = pads
    return dict(
        opcode=op, memory_type=kind, sram_base=sram, dram_base=dram, y_size=y, x_size=x,
        x_stride=stride, y_pad_0=y0, y_pad_1=y1, x_pad_0=x0, x_pad_1=x1, **deps,
    )  # fmt: skip


def _loops(bgn, end, iters=(1, 1), dst=(0, 0), src=(0, 0)):
    return dict(
        uop_bgn=bgn, uop_end=end, iter_out=iters[0], iter_in=iters[1],
        dst_factor_out=dst[0], dst_factor_in=dst[1], src_factor_out=src[0], src_factor_in=src[1],
    )  # fmt: skip
