"""The built-in templates, and which one a network's operator call is tuned with.

| op | layout | llvm | cuda / opencl |
| --- | --- | --- | --- |
| conv2d | NCHW | ``conv2d_nchw.x86`` | ``conv2d_nchw.cuda`` |
| conv2d | NHWC | ``conv2d_nhwc.x86`` | ``conv2d_nhwc.cuda`` |
| depthwise conv2d | NCHW | ``depthwise_conv2d_nchw.x86`` | ``depthwise_conv2d_nchw.cuda`` |
| dense | | ``dense.x86`` | ``dense.cuda`` |
"""

from __future__ import annotations

from codegen.target import EXT_KINDS

from . import conv2d, dense, depthwise

__all__ = ["EXT_DEV_WORKLOADS", "SCHEDULES", "conv2d", "dense", "depthwise", "workload_of_call"]

# Each template's schedule, for a template's own DAG or a network's fused group (the reduction
# followed by element-wise ops): ``SCHEDULES[name](cfg, state)``.
SCHEDULES = {
    "conv2d_nchw.x86": conv2d.schedule_nchw_cpu,
    "conv2d_nhwc.x86": conv2d.schedule_nhwc_cpu,
    "conv2d_nchw.cuda": conv2d.schedule_nchw_gpu,
    "conv2d_nhwc.cuda": conv2d.schedule_nhwc_gpu,
    "depthwise_conv2d_nchw.x86": depthwise.schedule_cpu,
    "depthwise_conv2d_nchw.cuda": depthwise.schedule_gpu,
    "dense.x86": dense.schedule_cpu,
    "dense.cuda": dense.schedule_gpu,
}


def _tensor(expr) -> tuple:
    return ("TENSOR", tuple(int(d) for d in expr.shape), expr.dtype)


#: Workload finders of external accelerators, ``Target("ext_dev -device=NAME")``: NAME ->
#: ``f(call) -> (template name, args) or None``. Their packages register them on import
#: (``autosched.vta`` registers "vta"), as they may import this one but not the reverse.
EXT_DEV_WORKLOADS: dict = {}


def workload_of_call(call, target) -> tuple[str, tuple] | None:
    """``(template name, args)`` for a graph call of ``nn.conv2d`` / ``nn.dense``, or None
    when no template covers it (grouped convolutions, depthwise NHWC)."""
    if target.kind in EXT_KINDS:  # an accelerator's own templates
        finder = EXT_DEV_WORKLOADS.get(target.get("device"))
        return finder(call) if finder is not None else None
    suffix = "cuda" if target.is_gpu else "x86"
    attrs = call.attrs
    if call.op == "nn.dense":
        data, weight = call.args[:2]
        return f"dense.{suffix}", (_tensor(data), _tensor(weight), attrs.get("out_dtype") or
                                   data.dtype)  # fmt: skip
    if call.op != "nn.conv2d":
        return None
    data, kernel = call.args[:2]
    layout = attrs["data_layout"]
    groups = int(attrs["groups"])
    channels = data.shape[1] if layout == "NCHW" else data.shape[3]
    args = (
        _tensor(data),
        _tensor(kernel),
        tuple(int(x) for x in attrs["strides"]),
        tuple(int(x) for x in attrs["padding"]),
        tuple(int(x) for x in attrs["dilation"]),
        attrs.get("out_dtype") or data.dtype,
    )
    if groups == 1 and layout in ("NCHW", "NHWC"):
        return f"conv2d_{layout.lower()}.{suffix}", args
    if groups == channels and layout == "NCHW" and kernel.shape[1] == 1:
        return f"depthwise_conv2d_nchw.{suffix}", args
    return None
