"""Inception v3 as ``relay.testing.inception_v3`` builds it (from MXNet's symbol), in either
layout; input 299x299."""

from __future__ import annotations

from .. import nn, op
from .layers import NetBuilder


def _conv(b: NetBuilder, data, num_filter, kernel=(1, 1), stride=(1, 1), pad=(0, 0), name="",
          suffix=""):  # fmt: skip
    conv = b.conv(data, num_filter, kernel, stride, pad, f"{name}{suffix}_conv1")
    return nn.relu(b.batch_norm(conv, f"{name}{suffix}_bn"))


def _pool(b: NetBuilder, data, kernel, stride, pad, pool_type):
    if pool_type == "max":
        return b.max_pool(data, kernel, stride, pad)
    return b.avg_pool(data, kernel, stride, pad, count_include_pad=True)


def _concat(b: NetBuilder, parts):
    return op.concatenate(parts, axis=b.c_axis)


def inception_7a(b, data, n1x1, n3x3_red, n3x3_1, n3x3_2, n5x5_red, n5x5, pool, proj, name):
    t1 = _conv(b, data, n1x1, name=f"{name}_conv")
    t5 = _conv(b, data, n5x5_red, name=f"{name}_tower", suffix="_conv")
    t5 = _conv(b, t5, n5x5, (5, 5), pad=(2, 2), name=f"{name}_tower", suffix="_conv_1")
    t3 = _conv(b, data, n3x3_red, name=f"{name}_tower_1", suffix="_conv")
    t3 = _conv(b, t3, n3x3_1, (3, 3), pad=(1, 1), name=f"{name}_tower_1", suffix="_conv_1")
    t3 = _conv(b, t3, n3x3_2, (3, 3), pad=(1, 1), name=f"{name}_tower_1", suffix="_conv_2")
    pooled = _pool(b, data, (3, 3), (1, 1), (1, 1), pool)
    proj_ = _conv(b, pooled, proj, name=f"{name}_tower_2", suffix="_conv")
    return _concat(b, [t1, t5, t3, proj_])


def inception_7b(b, data, n3x3, nd3x3_red, nd3x3_1, nd3x3_2, name):
    t3 = _conv(b, data, n3x3, (3, 3), (2, 2), name=f"{name}_conv")
    td = _conv(b, data, nd3x3_red, name=f"{name}_tower", suffix="_conv")
    td = _conv(b, td, nd3x3_1, (3, 3), pad=(1, 1), name=f"{name}_tower", suffix="_conv_1")
    td = _conv(b, td, nd3x3_2, (3, 3), (2, 2), name=f"{name}_tower", suffix="_conv_2")
    return _concat(b, [t3, td, _pool(b, data, (3, 3), (2, 2), (0, 0), "max")])


def inception_7c(b, data, n1x1, d7_red, d7_1, d7_2, q7_red, q7_1, q7_2, q7_3, q7_4, pool, proj,
                 name):  # fmt: skip
    t1 = _conv(b, data, n1x1, name=f"{name}_conv")
    td = _conv(b, data, d7_red, name=f"{name}_tower", suffix="_conv")
    td = _conv(b, td, d7_1, (1, 7), pad=(0, 3), name=f"{name}_tower", suffix="_conv_1")
    td = _conv(b, td, d7_2, (7, 1), pad=(3, 0), name=f"{name}_tower", suffix="_conv_2")
    tq = _conv(b, data, q7_red, name=f"{name}_tower_1", suffix="_conv")
    tq = _conv(b, tq, q7_1, (7, 1), pad=(3, 0), name=f"{name}_tower_1", suffix="_conv_1")
    tq = _conv(b, tq, q7_2, (1, 7), pad=(0, 3), name=f"{name}_tower_1", suffix="_conv_2")
    tq = _conv(b, tq, q7_3, (7, 1), pad=(3, 0), name=f"{name}_tower_1", suffix="_conv_3")
    tq = _conv(b, tq, q7_4, (1, 7), pad=(0, 3), name=f"{name}_tower_1", suffix="_conv_4")
    pooled = _pool(b, data, (3, 3), (1, 1), (1, 1), pool)
    proj_ = _conv(b, pooled, proj, name=f"{name}_tower_2", suffix="_conv")
    return _concat(b, [t1, td, tq, proj_])


def inception_7d(b, data, n3x3_red, n3x3, d7_red, d7_1, d7_2, d7_3x3, pool, name):
    t3 = _conv(b, data, n3x3_red, name=f"{name}_tower", suffix="_conv")
    t3 = _conv(b, t3, n3x3, (3, 3), (2, 2), name=f"{name}_tower", suffix="_conv_1")
    td = _conv(b, data, d7_red, name=f"{name}_tower_1", suffix="_conv")
    td = _conv(b, td, d7_1, (1, 7), pad=(0, 3), name=f"{name}_tower_1", suffix="_conv_1")
    td = _conv(b, td, d7_2, (7, 1), pad=(3, 0), name=f"{name}_tower_1", suffix="_conv_2")
    td = _conv(b, td, d7_3x3, (3, 3), (2, 2), name=f"{name}_tower_1", suffix="_conv_3")
    return _concat(b, [t3, td, _pool(b, data, (3, 3), (2, 2), (0, 0), pool)])


def inception_7e(b, data, n1x1, d3_red, d3_1, d3_2, n3x3_d3_red, n3x3, n3x3_d3_1, n3x3_d3_2,
                 pool, proj, name):  # fmt: skip
    t1 = _conv(b, data, n1x1, name=f"{name}_conv")
    td = _conv(b, data, d3_red, name=f"{name}_tower", suffix="_conv")
    td_a = _conv(b, td, d3_1, (1, 3), pad=(0, 1), name=f"{name}_tower", suffix="_mixed_conv")
    td_b = _conv(b, td, d3_2, (3, 1), pad=(1, 0), name=f"{name}_tower", suffix="_mixed_conv_1")
    t3 = _conv(b, data, n3x3_d3_red, name=f"{name}_tower_1", suffix="_conv")
    t3 = _conv(b, t3, n3x3, (3, 3), pad=(1, 1), name=f"{name}_tower_1", suffix="_conv_1")
    t3_a = _conv(b, t3, n3x3_d3_1, (1, 3), pad=(0, 1), name=f"{name}_tower_1",
                 suffix="_mixed_conv")  # fmt: skip
    t3_b = _conv(b, t3, n3x3_d3_2, (3, 1), pad=(1, 0), name=f"{name}_tower_1",
                 suffix="_mixed_conv_1")  # fmt: skip
    pooled = _pool(b, data, (3, 3), (1, 1), (1, 1), pool)
    proj_ = _conv(b, pooled, proj, name=f"{name}_tower_2", suffix="_conv")
    return _concat(b, [t1, td_a, td_b, t3_a, t3_b, proj_])


def inception_v3(b: NetBuilder, data_shape, num_classes: int = 1000):
    data = b.data(data_shape)
    x = _conv(b, data, 32, (3, 3), (2, 2), name="conv")
    x = _conv(b, x, 32, (3, 3), name="conv_1")
    x = _conv(b, x, 64, (3, 3), pad=(1, 1), name="conv_2")
    x = _pool(b, x, (3, 3), (2, 2), (0, 0), "max")
    x = _conv(b, x, 80, (1, 1), name="conv_3")
    x = _conv(b, x, 192, (3, 3), name="conv_4")
    x = _pool(b, x, (3, 3), (2, 2), (0, 0), "max")
    x = inception_7a(b, x, 64, 64, 96, 96, 48, 64, "avg", 32, "mixed")
    x = inception_7a(b, x, 64, 64, 96, 96, 48, 64, "avg", 64, "mixed_1")
    x = inception_7a(b, x, 64, 64, 96, 96, 48, 64, "avg", 64, "mixed_2")
    x = inception_7b(b, x, 384, 64, 96, 96, "mixed_3")
    x = inception_7c(b, x, 192, 128, 128, 192, 128, 128, 128, 128, 192, "avg", 192, "mixed_4")
    x = inception_7c(b, x, 192, 160, 160, 192, 160, 160, 160, 160, 192, "avg", 192, "mixed_5")
    x = inception_7c(b, x, 192, 160, 160, 192, 160, 160, 160, 160, 192, "avg", 192, "mixed_6")
    x = inception_7c(b, x, 192, 192, 192, 192, 192, 192, 192, 192, 192, "avg", 192, "mixed_7")
    x = inception_7d(b, x, 192, 320, 192, 192, 192, 192, "max", "mixed_8")
    x = inception_7e(b, x, 320, 384, 384, 384, 448, 384, 384, 384, "avg", 192, "mixed_9")
    x = inception_7e(b, x, 320, 384, 384, 384, 448, 384, 384, 384, "max", 192, "mixed_10")
    x = _pool(b, x, (8, 8), (1, 1), (0, 0), "avg")
    flat = nn.batch_flatten(x)
    # relay.testing names the bias fc2_bias (sic); kept so names match TVM's params.
    return nn.softmax(b.dense_add_bias(flat, num_classes, "fc1_weight", "fc2_bias"))
