"""The model zoo: ``get_network`` as the seed tutorials define it, over our own copies of
``tvm.relay.testing``'s networks with deterministic random weights, plus the transformers of
TVM MetaSchedule's benchmarks (bert-tiny, bert-base, gpt2, vit-b16; ``transformer.py``).

``mod`` is a ``Module``; ``mod["main"]`` is the network's Function (its first param is the
input: ``data``, or the int64 ``input_ids`` of bert / gpt2; the rest are the weights, all of
which are in ``params``).
"""

from __future__ import annotations

import numpy as np

from ..ir import Function, Module, free_vars
from .inception_v3 import inception_v3
from .layers import NetBuilder
from .mobilenet import mobilenet
from .resnet import UNITS, resnet
from .squeezenet import squeezenet
from .transformer import CONFIGS as TRANSFORMERS
from .transformer import transformer

__all__ = ["NETWORKS", "NetBuilder", "get_network"]

NETWORKS = (
    [f"resnet-{n}" for n in UNITS]
    + [f"resnet3d-{n}" for n in UNITS]
    + ["mobilenet", "squeezenet_v1.0", "squeezenet_v1.1", "inception_v3"]
    + list(TRANSFORMERS)
)


def get_network(name: str, batch_size: int = 1, layout: str = "NHWC", dtype: str = "float32",
                seed: int = 0, seq_len: int | None = None):  # fmt: skip
    """Build a zoo network with deterministic random weights.

    Parameters
    ----------
    name : str
        "resnet-N" and "resnet3d-N" (N in 18, 34, 50, 101, 152, 200, 269), "mobilenet",
        "squeezenet_v1.1" (and "squeezenet_v1.0"), "inception_v3"; the transformers
        "bert-tiny" (2 layers, hidden 128), "bert-base", "gpt2" (12 layers, hidden 768; their
        input is ``input_ids``, int64 (batch, seq_len)) and "vit-b16" (224x224 images).
    batch_size : int
    layout : str
        "NHWC" or "NCHW". For resnet3d these mean NDHWC / NCDHW (which may also be given).
    dtype : str
    seed : int
        Seed of the weights; a weight's values depend only on the seed and its name.
    seq_len : int, optional
        The sequence length of bert-* and gpt2 (default 128); not for the others.

    Returns
    -------
    mod : Module
        ``mod["main"]`` is the Function.
    params : dict[str, np.ndarray]
        A value for every weight (every parameter but "data").
    input_shape, output_shape : tuple
        e.g. (1, 224, 224, 3) and (1, 1000); (1, 128) and (1, 128, 768) for bert-base.
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
    if name in TRANSFORMERS:
        if layout not in ("NHWC", "NCHW"):
            raise ValueError(f"{name}: layout must be 'NHWC' or 'NCHW', got {layout!r}")
        out, b, input_shape = transformer(name, batch_size, seq_len, layout, dtype)
        params = b.params(seed)
        inputs = [v for v in free_vars(out) if v.name not in params]  # first, as "data" is
        func = Function((*inputs, *(v for v in free_vars(out) if v.name in params)), out)
        return Module.from_function(func), params, input_shape, out.shape
    if seq_len is not None:
        raise ValueError(f"{name}: seq_len only applies to bert-* and gpt2")
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
