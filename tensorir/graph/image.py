"""Constructors of the ``image.*`` ops, like ``relay.image``."""

from __future__ import annotations

from .ir import Call, Expr, make_call

__all__ = ["resize2d"]


def resize2d(
    data: Expr,
    size,
    layout: str = "NCHW",
    method: str = "linear",
    coordinate_transformation_mode: str = "half_pixel",
    rounding_method: str = "",
    cubic_alpha: float = -0.5,
    scales=None,
) -> Call:
    """Resize the H and W dims of a 4-D tensor to ``size`` (oh, ow).

    ``method`` is "nearest_neighbor", "linear" or "cubic"; ``coordinate_transformation_mode``
    one of ONNX's (half_pixel, pytorch_half_pixel, align_corners, asymmetric,
    tf_half_pixel_for_nn); ``rounding_method`` the nearest mode ("" is "round"). ``scales``
    (sh, sw), not in Relay, are ONNX's scales when the coordinate transform must divide by
    them rather than by ``size / input``.
    """
    attrs = dict(
        size=tuple(size), layout=layout, method=method,
        coordinate_transformation_mode=coordinate_transformation_mode,
        rounding_method=rounding_method, cubic_alpha=cubic_alpha,
        scales=None if scales is None else tuple(scales),
    )  # fmt: skip
    return make_call("image.resize2d", (data,), attrs)
