"""MobileNet v1 as ``relay.testing.mobilenet`` builds it (alpha 1.0, not shallow)."""

from __future__ import annotations

from .. import nn
from .layers import NetBuilder


def conv_block(b: NetBuilder, data, name, channels, strides=1):
    conv = b.conv(data, channels, 3, strides, 1, name + "_conv")
    return nn.relu(b.batch_norm(conv, name + "_bn", epsilon=1e-5))


def separable_conv_block(b: NetBuilder, data, name, dw_channels, pw_channels, downsample=False):
    """Depthwise 3x3 (+BN+relu), then pointwise 1x1 (+BN+relu)."""
    strides = 2 if downsample else 1
    conv1 = b.conv(data, dw_channels, 3, strides, 1, groups=dw_channels,
                   weight_name=name + "_weight")  # fmt: skip
    act1 = nn.relu(b.batch_norm(conv1, name + "_bn1", epsilon=1e-5))
    conv2 = b.conv(act1, pw_channels, 1, 1, 0, name + "_conv2")
    return nn.relu(b.batch_norm(conv2, name + "_bn2", epsilon=1e-5))


# (depthwise channels, pointwise channels, downsample) of blocks 1..13
BLOCKS = (
    [(32, 64, False), (64, 128, True), (128, 128, False), (128, 256, True), (256, 256, False),
     (256, 512, True)]
    + [(512, 512, False)] * 5
    + [(512, 1024, True), (1024, 1024, False)]
)  # fmt: skip


def mobilenet(b: NetBuilder, data_shape, num_classes: int = 1000):
    body = conv_block(b, b.data(data_shape), "conv_block_1", 32, strides=2)
    for i, (dw, pw, down) in enumerate(BLOCKS):
        body = separable_conv_block(b, body, f"separable_conv_block_{i + 1}", dw, pw, down)
    flat = nn.batch_flatten(nn.global_avg_pool2d(body, layout=b.layout))
    return nn.softmax(b.dense_add_bias(flat, num_classes, "fc_weight", "fc_bias"))
