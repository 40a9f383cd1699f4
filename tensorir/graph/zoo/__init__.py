"""The model zoo: ``get_network`` as the seed tutorials define it, over our own copies of
``tvm.relay.testing``'s networks with deterministic random weights.

``mod`` is a ``Module``; ``mod["main"]`` is the network's Function (its first param is
``data``, the rest are the weights, all of which are in ``params``).
"""

from __future__ import annotations

import numpy as np

from ..ir import Function, Module, free_vars
from .inception_v3 import inception_v3
from .layers import NetBuilder
from .mobilenet import mobilenet
from .resnet import UNITS, resnet
from .squeezenet import squeezenet

__all__ = ["NETWORKS", "NetBuilder", "get_network"]

NETWORKS = (
    [f"resnet-{n}" for n in UNITS]
    + [f"resnet3d-{n}" for n in UNITS]
    + ["mobilenet", "squeezenet_v1.0", "squeezenet_v1.1", "inception_v3"]
)


def get_network(name: str, batch_size: int = 1, layout: str = "NHWC", dtype: str = "float32",
                seed: int = 0):  # fmt: skip
    """Build a zoo network with deterministic random weights.

    Parameters
    ----------
    name : str
        "resnet-N" and "resnet3d-N" (N in 18, 34, 50, 101, 152, 200, 269), "mobilenet",
        "squeezenet_v1.1" (and "squeezenet_v1.0"), "inception_v3".
    batch_size : int
    layout : str
        "NHWC" or "NCHW". For resnet3d these mean NDHWC / NCDHW (which may also be given).
    dtype : str
    seed : int
        Seed of the weights; a weight's values depend only on the seed and its name.

    Returns
    -------
    mod : Module
        ``mod["main"]`` is the Function.
    params : dict[str, np.ndarray]
        A value for every weight (every parameter but "data").
    input_shape, output_shape : tuple
        e.g. (1, 224, 224, 3) and (1, 1000).
    """
    if name not in NETWORKS:
        raise ValueError(f"unknown network {name!r}; known networks: {', '.join(NETWORKS)}")
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int | np.integer)
        or batch_size < 1
    ):
        raise ValueError(
            f"get_network({name!r}): batch_size must be a positive int, got {batch_size!r}"
        )
    batch_size = int(batch_size)
    if name.startswith("resnet3d-"):
        layout = {"NHWC": "NDHWC", "NCHW": "NCDHW"}.get(layout, layout)
        if layout not in ("NDHWC", "NCDHW"):
            raise ValueError(f"{name}: layout must be NHWC/NDHWC or NCHW/NCDHW, got {layout!r}")
        image = (16, 112, 112, 3) if layout == "NDHWC" else (3, 16, 112, 112)
    else:
        if layout not in ("NHWC", "NCHW"):
            raise ValueError(f"{name}: layout must be 'NHWC' or 'NCHW', got {layout!r}")
        side = 299 if name == "inception_v3" else 224
        image = (side, side, 3) if layout == "NHWC" else (3, side, side)
    if name.startswith("squeezenet") and layout != "NCHW":
        raise ValueError(
            f"{name} only supports NCHW layout (as relay.testing's, whose fire modules "
            "concatenate on axis 1): ask for layout='NCHW' and convert the layout afterwards"
        )
    input_shape = (batch_size, *image)
    b = NetBuilder(layout, dtype)
    if name.startswith("resnet"):
        out = resnet(b, input_shape, int(name.split("-")[1]))
    elif name == "mobilenet":
        out = mobilenet(b, input_shape)
    elif name.startswith("squeezenet"):
        out = squeezenet(b, input_shape, version=name.split("_v")[1])
    else:
        out = inception_v3(b, input_shape)
    func = Function(tuple(free_vars(out)), out)
    return Module.from_function(func), b.params(seed), input_shape, out.shape
