"""``optimize``: the Relay build pipeline (opt_level 3) up to fusion, for our op set."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..ir import Function, Module, bind_params, calls
from .fold import fold_constant
from .fold_scale import fold_scale_axis
from .layout import convert_layout
from .simplify import canonicalize_ops, simplify_inference
from .winograd import alter_op_layout_winograd

__all__ = ["optimize"]

_LAYOUT_OPS = ("nn.conv2d", "nn.conv3d", "nn.conv2d_transpose")


def _needs_convert(func: Function, layout: str) -> bool:
    want = {"NHWC": ("NHWC", "NDHWC"), "NCHW": ("NCHW", "NCDHW")}[layout]
    return any(c.op in _LAYOUT_OPS and c.attrs["data_layout"] not in want for c in calls(func))


def optimize(
    mod_or_func: Module | Function,
    params: Mapping[str, np.ndarray] | None = None,
    *,
    layout: str = "NHWC",
    use_winograd: bool = True,
    device_kind: str = "gpu",
) -> Function:
    """Prepare a network for fusion and task extraction.

    bind_params -> simplify_inference -> fold_constant -> fold_scale_axis -> canonicalize_ops
    -> convert_layout (only when a convolution is not in ``layout`` yet) ->
    alter_op_layout_winograd (if ``use_winograd`` and NHWC) -> fold_constant.

    Parameters
    ----------
    mod_or_func : Module or Function
    params : dict name -> array, optional
        Weights to bind as constants (without them nothing folds into the weights).
    layout : "NHWC" or "NCHW"
        The data layout convolutions should end up in (only NCHW -> NHWC converts).
    use_winograd : bool
        Turn eligible NHWC 3x3 convolutions into winograd with a folded weight transform.
    device_kind : "cpu" or "gpu"
        Which of TVM's winograd rules applies (see ``tensorir.ops.use_winograd``): on the CPU
        only convolutions with 64 < CO < 512 become winograd.

    Returns
    -------
    Function
    """
    if layout not in ("NHWC", "NCHW"):
        raise ValueError(f"optimize: layout must be 'NHWC' or 'NCHW', got {layout!r}")
    func = mod_or_func["main"] if isinstance(mod_or_func, Module) else mod_or_func
    if params:
        func = bind_params(func, params)
    func = simplify_inference(func)
    func = fold_constant(func)
    func = fold_scale_axis(func)
    func = canonicalize_ops(func)
    if layout == "NHWC" and _needs_convert(func, layout):
        func = convert_layout(func, "NHWC")
    if use_winograd and layout == "NHWC":
        func = alter_op_layout_winograd(func, device_kind)
    return fold_constant(func)
