"""ResNet v2 (pre-activation, "Identity Mappings in Deep Residual Networks") as
``relay.testing.resnet`` / ``resnet_3d`` build it; one definition for 2-D and 3-D."""

from __future__ import annotations

from .. import nn, op
from .layers import NetBuilder

UNITS = {
    18: (2, 2, 2, 2),
    34: (3, 4, 6, 3),
    50: (3, 4, 6, 3),
    101: (3, 4, 23, 3),
    152: (3, 8, 36, 3),
    200: (3, 24, 36, 3),
    269: (3, 30, 48, 8),
}


def residual_unit(b: NetBuilder, data, num_filter, stride, dim_match, name, bottle_neck,
                  gain=1.0):  # fmt: skip
    """BN-relu-conv twice (or the 1x1-3x3-1x1 bottleneck) plus the shortcut. ``gain`` scales
    the branch's last conv weights: with random (not fitted) BN statistics nothing renormalises
    the sum, so each unit would double the variance; a gain of 1/sqrt(units) bounds the growth
    to about e over the whole network and keeps the logits O(1)."""
    nd = b.ndim
    bn1 = b.batch_norm(data, name + "_bn1")
    act1 = nn.relu(bn1)
    if bottle_neck:
        mid = int(num_filter * 0.25)
        conv1 = b.conv(act1, mid, 1, stride, 0, name + "_conv1")
        act2 = nn.relu(b.batch_norm(conv1, name + "_bn2"))
        conv2 = b.conv(act2, mid, 3, 1, 1, name + "_conv2")
        act3 = nn.relu(b.batch_norm(conv2, name + "_bn3"))
        out = b.conv(act3, num_filter, 1, 1, 0, name + "_conv3", gain=gain)
    else:
        conv1 = b.conv(act1, num_filter, 3, stride, 1, name + "_conv1")
        act2 = nn.relu(b.batch_norm(conv1, name + "_bn2"))
        out = b.conv(act2, num_filter, 3, 1, 1, name + "_conv2", gain=gain)
    shortcut = data if dim_match else b.conv(act1, num_filter, (1,) * nd, stride, 0, name + "_sc")
    return op.add(out, shortcut)


def resnet(b: NetBuilder, data_shape, num_layers: int, num_classes: int = 1000):
    """The network's output expression (softmax of the logits)."""
    if num_layers not in UNITS:
        raise ValueError(f"resnet-{num_layers}: num_layers must be one of {sorted(UNITS)}")
    units = UNITS[num_layers]
    bottle_neck = num_layers >= 50
    filters = (64, 256, 512, 1024, 2048) if bottle_neck else (64, 64, 128, 256, 512)
    nd = b.ndim
    data = b.data(data_shape)
    body = b.batch_norm(data, "bn_data", scale=False)
    height = data_shape[b.layout.index("H")]
    if height <= 32:  # cifar-sized input: no stem downsampling, as relay.testing
        body = b.conv(body, filters[0], 3, 1, 1, "conv0")
    elif nd == 2:
        body = b.conv(body, filters[0], 7, 2, 3, "conv0")
        body = nn.relu(b.batch_norm(body, "bn0"))
        body = b.max_pool(body, 3, 2, 1)
    else:  # resnet_3d: temporal kernel 3, no stem pooling
        body = b.conv(body, filters[0], (3, 7, 7), (1, 2, 2), (1, 3, 3), "conv0")
        body = nn.relu(b.batch_norm(body, "bn0"))
    gain = 1.0 / sum(units) ** 0.5
    for i, count in enumerate(units):
        stride = 1 if i == 0 else 2
        body = residual_unit(b, body, filters[i + 1], (stride,) * nd, False,
                             f"stage{i + 1}_unit1", bottle_neck, gain)  # fmt: skip
        for j in range(count - 1):
            body = residual_unit(b, body, filters[i + 1], (1,) * nd, True,
                                 f"stage{i + 1}_unit{j + 2}", bottle_neck, gain)  # fmt: skip
    body = nn.relu(b.batch_norm(body, "bn1"))
    if nd == 2:
        pool = nn.global_avg_pool2d(body, layout=b.layout)
    else:  # global_avg_pool3d is not in our op set: an avg_pool3d over the whole volume
        spatial = tuple(body.shape[b.layout.index(c)] for c in "DHW")
        pool = b.avg_pool(body, spatial, 1)
    flat = nn.batch_flatten(pool)
    return nn.softmax(b.dense_add_bias(flat, num_classes, "fc1_weight", "fc1_bias"))
