"""SqueezeNet 1.0 / 1.1 as ``relay.testing.squeezenet`` builds it (NCHW; dropout, an
identity at inference, is left out)."""

from __future__ import annotations

from .. import nn, op
from .layers import NetBuilder


def _fire_conv(b: NetBuilder, net, channels, kernel_size, padding, prefix):
    net = b.conv(net, channels, kernel_size, 1, padding, prefix + "_conv")
    return nn.relu(b.bias_add(net, prefix + "_conv_bias"))


def _fire(b: NetBuilder, net, squeeze, expand1x1, expand3x3, prefix):
    net = _fire_conv(b, net, squeeze, 1, 0, prefix + "_input")
    left = _fire_conv(b, net, expand1x1, 1, 0, prefix + "_left")
    right = _fire_conv(b, net, expand3x3, 3, 1, prefix + "_right")
    return op.concatenate([left, right], axis=b.c_axis)


def squeezenet(b: NetBuilder, data_shape, version: str = "1.1", num_classes: int = 1000):
    if version not in ("1.0", "1.1"):
        raise ValueError(f"squeezenet version must be '1.0' or '1.1', got {version!r}")
    net = b.data(data_shape)
    if version == "1.0":
        net = nn.relu(b.bias_add(b.conv(net, 96, 7, 2, 3, "conv1"), "conv1_bias"))
        net = b.max_pool(net, 3, 2)
        net = _fire(b, net, 16, 64, 64, "fire1")
        net = _fire(b, net, 16, 64, 64, "fire2")
        net = _fire(b, net, 32, 128, 128, "fire3")
        net = b.max_pool(net, 3, 2)
        net = _fire(b, net, 32, 128, 128, "fire4")
        net = _fire(b, net, 48, 192, 192, "fire5")
        net = _fire(b, net, 48, 192, 192, "fire6")
        net = _fire(b, net, 64, 256, 256, "fire7")
        net = b.max_pool(net, 3, 2)
        net = _fire(b, net, 64, 256, 256, "fire8")
    else:
        net = nn.relu(b.bias_add(b.conv(net, 64, 3, 2, 1, "conv1"), "conv1_bias"))
        net = b.max_pool(net, 3, 2)
        net = _fire(b, net, 16, 64, 64, "fire1")
        net = _fire(b, net, 16, 64, 64, "fire2")
        net = b.max_pool(net, 3, 2)
        net = _fire(b, net, 32, 128, 128, "fire3")
        net = _fire(b, net, 32, 128, 128, "fire4")
        net = b.max_pool(net, 3, 2)
        net = _fire(b, net, 48, 192, 192, "fire5")
        net = _fire(b, net, 48, 192, 192, "fire6")
        net = _fire(b, net, 64, 256, 256, "fire7")
        net = _fire(b, net, 64, 256, 256, "fire8")
    net = b.conv(net, num_classes, 1, 1, 0, "conv_final")
    net = nn.relu(b.bias_add(net, "conv_final_bias"))
    net = nn.batch_flatten(nn.global_avg_pool2d(net, layout=b.layout))
    return nn.softmax(net)
