"""The building blocks the zoo networks share, as ``relay.testing.layers`` has them, plus the
deterministic random weights.

A ``NetBuilder`` knows the data layout, so each network is written once and built in NCHW or
NHWC (NCDHW / NDHWC) directly. Every weight is drawn in a canonical layout (OIHW / OIDHW for
convolutions) from a generator seeded by ``(seed, crc32(name))`` and then transposed, so the
same name gets the same numbers in every layout and whatever else the network contains.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from .. import nn, op
from ..ir import Call, Expr, Var

# Kernel layouts per data layout: (regular, depthwise). NHWC depthwise is HWOI, as TVM uses.
KERNEL_LAYOUTS = {
    "NCHW": ("OIHW", "OIHW"),
    "NHWC": ("HWIO", "HWOI"),
    "NCDHW": ("OIDHW", "OIDHW"),
    "NDHWC": ("DHWIO", "DHWIO"),
}


class NetBuilder:
    """Creates weight Vars (named like relay.testing) and the layers that use them.

    Parameters
    ----------
    layout : str
        "NCHW", "NHWC", "NCDHW" or "NDHWC".
    dtype : str
        dtype of the input, the weights and every layer.
    """

    def __init__(self, layout: str, dtype: str = "float32"):
        if layout not in KERNEL_LAYOUTS:
            raise ValueError(f"unsupported layout {layout!r}; use one of {list(KERNEL_LAYOUTS)}")
        self.layout = layout
        self.dtype = dtype
        self.ndim = len(layout) - 2
        # name -> (init kind, canonical shape, permutation to the graph's layout, fan_in, gain)
        self._specs: dict[str, tuple] = {}

    @property
    def c_axis(self) -> int:
        return self.layout.index("C")

    def channels(self, x: Expr) -> int:
        return x.shape[self.c_axis]

    def data(self, shape) -> Var:
        return op.var("data", shape, self.dtype)

    def weight(self, name: str, kind: str, canonical, perm=None, fan_in=1, gain=1.0) -> Var:
        """A new weight Var; ``perm`` maps the canonical shape to the stored one."""
        if name in self._specs:
            raise ValueError(f"weight {name!r} is created twice")
        canonical = tuple(canonical)
        shape = canonical if perm is None else tuple(canonical[i] for i in perm)
        self._specs[name] = (kind, canonical, perm, fan_in, gain)
        return op.var(name, shape, self.dtype)

    # --- layers ----------------------------------------------------------------------------

    def conv(self, data, channels, kernel_size, strides=1, padding=0, name="", groups=1,
             weight_name=None, gain=1.0) -> Call:  # fmt: skip
        """Convolution with weight ``<name>_weight`` (``weight_name`` overrides the name);
        ``gain`` scales its He-initialised values."""
        ks = (kernel_size,) * self.ndim if isinstance(kernel_size, int) else tuple(kernel_size)
        cin = self.channels(data)
        depthwise = groups > 1 and groups == cin == channels
        klayout = KERNEL_LAYOUTS[self.layout][1 if depthwise else 0]
        canon_layout = "OI" + self.layout[2:] if self.c_axis == 1 else "OI" + self.layout[1:-1]
        canonical = (channels, cin // groups, *ks)
        perm = tuple(canon_layout.index(c) for c in klayout)
        w = self.weight(weight_name or name + "_weight", "conv", canonical, perm,
                        fan_in=cin // groups * math.prod(ks), gain=gain)  # fmt: skip
        build = nn.conv2d if self.ndim == 2 else nn.conv3d
        return build(data, w, strides=strides, padding=padding, groups=groups, channels=channels,
                     kernel_size=ks, data_layout=self.layout, kernel_layout=klayout)  # fmt: skip

    def batch_norm(self, data, name, epsilon=2e-5, scale=True) -> Call:
        """Inference batch norm on the channel axis with ``<name>_gamma/_beta/_moving_mean/
        _moving_var`` (gamma exists, unused, when ``scale=False``, as in relay.testing)."""
        c = (self.channels(data),)
        names = ("gamma", "beta", "moving_mean", "moving_var")
        gamma, beta, mean, var = (self.weight(f"{name}_{n}", f"bn_{n}", c) for n in names)
        return nn.batch_norm(data, gamma, beta, mean, var, axis=self.c_axis, epsilon=epsilon,
                             scale=scale)  # fmt: skip

    def bias_add(self, data, name) -> Call:
        """Add ``name`` (a (C,) bias) on the channel axis."""
        b = self.weight(name, "bias", (self.channels(data),))
        return nn.bias_add(data, b, axis=self.c_axis)

    def dense_add_bias(self, data, units, weight_name, bias_name) -> Call:
        """``bias_add(dense(data, W), b, axis=-1)`` as relay.testing's dense_add_bias."""
        k = data.shape[-1]
        w = self.weight(weight_name, "dense", (units, k), fan_in=k)
        b = self.weight(bias_name, "bias", (units,))
        return nn.bias_add(nn.dense(data, w, units=units), b, axis=-1)

    def max_pool(self, data, pool_size, strides, padding=0) -> Call:
        pool = nn.max_pool2d if self.ndim == 2 else nn.max_pool3d
        return pool(data, pool_size, strides, padding, layout=self.layout)

    def avg_pool(self, data, pool_size, strides, padding=0, count_include_pad=False) -> Call:
        pool = nn.avg_pool2d if self.ndim == 2 else nn.avg_pool3d
        return pool(data, pool_size, strides, padding, layout=self.layout,
                    count_include_pad=count_include_pad)  # fmt: skip

    # --- weights ---------------------------------------------------------------------------

    def params(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Deterministic random values for every weight created so far."""
        return {name: self._init(name, seed, *spec) for name, spec in self._specs.items()}

    def _init(self, name, seed, kind, canonical, perm, fan_in, gain) -> np.ndarray:
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        if kind == "conv":  # He init keeps activations O(1) through relu chains
            v = rng.standard_normal(canonical) * (gain * math.sqrt(2.0 / fan_in))
        elif kind == "dense":
            v = rng.standard_normal(canonical) * math.sqrt(1.0 / fan_in)
        elif kind in ("bn_gamma", "bn_moving_var"):
            v = rng.uniform(0.8, 1.2, canonical)  # positive, near 1: BN keeps the scale
        else:  # bias, bn_beta, bn_moving_mean: small, never exactly zero
            v = rng.uniform(-0.1, 0.1, canonical)
        if perm is not None:
            v = v.transpose(perm)
        return np.ascontiguousarray(v, dtype=self.dtype)
